"""Position methods. Attention itself is permutation-equivariant; these are the ways order gets in.

Each method enters at one of three places: added to the token embeddings (learned, sinusoidal), a rotation of q and k
(RoPE), or an additive bias on the attention scores (ALiBi, T5). Each class says in ``past_block_size`` what it does
with positions it never saw in training.
"""

from __future__ import annotations

import math
from typing import ClassVar

import torch
from torch import Tensor, nn


class PositionMethod(nn.Module):
    """Interface: a method overrides the hooks it uses; the defaults are 'does nothing'. Each method says what it does
    past block_size, and owns the init of its own parameters (model.init_weights hands them over)."""

    name: ClassVar[str]
    past_block_size: ClassVar[str] = ""
    # Why a longer input has no defined output (None: any length is defined); evaluation and explore ask this.
    undefined_past_block: ClassVar[str | None] = None
    # Whether the method tells a bidirectional model one order from another (the tests hold each method to it).
    tells_order: ClassVar[bool] = True
    # Its parameters that are embedding tables: Kaplan's non-embedding count leaves them out (network/flops.py).
    embedding_tables: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def build(cls, block_size: int, n_embd: int, n_head: int) -> PositionMethod:
        return cls()

    @classmethod
    def parameter_count(cls, block_size: int, n_embd: int, n_head: int) -> int:
        """Its parameters for a config, counted on the meta device: nothing is allocated (runtime/memory.py refuses
        a model too big for the machine from the config alone). Any method is counted right this way; a method
        whose meta build would import torch's compiler (a table's init, a computed buffer), which a job otherwise
        never loads, gives its count in closed form instead (benchmarks/RESULTS.md; tests/test_bad_input.py holds
        each registered method's count to a built one and the estimate to never importing the compiler)."""
        with torch.device("meta"):
            return sum(p.numel() for p in cls.build(block_size, n_embd, n_head).parameters())

    def init_parameter(self, name: str, p: nn.Parameter, init: str, embed_std: float) -> None:
        """Initialise this method's parameter ``name``; embed_std is what one token-embedding coordinate starts at."""
        nn.init.normal_(p, std=embed_std)

    # Every hook covers the T positions start, …, start+T-1: start > 0 when earlier positions sit in a KV cache.

    def embed(self, T: int, device: torch.device, start: int = 0) -> Tensor | None:
        """(T, C) vector added to token embeddings, or None."""
        return None

    def rotary(self, T: int, device: torch.device, start: int = 0):  # -> RotaryFn | None
        """A function (q, k) -> the two rotated, each of shape (B,T,H,D); or None."""
        return None

    def score_bias(self, T: int, device: torch.device, start: int = 0) -> Tensor | None:
        """(H, T, start+T) additive bias on the scores of these T queries against every key so far, or None."""
        return None

    def use_given(self, given) -> None:  # given: network.given.GivenPositions
        """Compute with someone else's function for this method (a course student's; ``given`` names one per method,
        None where they wrote none). Methods without an exercise keep their own."""


class NoPosition(PositionMethod):
    name = "none"
    tells_order = False
    past_block_size = "nothing to extrapolate: the model never sees an index; order only comes through the causal mask"


class LearnedAbsolute(PositionMethod):
    name = "learned"
    past_block_size = "undefined: there is no trained vector for index >= block_size, so it raises rather than clamps"
    undefined_past_block = "learned absolute positions have no vector past block_size"
    embedding_tables = ("wpe.weight",)

    @classmethod
    def build(cls, block_size: int, n_embd: int, n_head: int) -> PositionMethod:
        return cls(block_size, n_embd)

    @classmethod
    def parameter_count(cls, block_size: int, n_embd: int, n_head: int) -> int:
        return block_size * n_embd

    def __init__(self, block_size: int, n_embd: int) -> None:
        super().__init__()
        self.block_size = block_size
        self.wpe = nn.Embedding(block_size, n_embd)

    def use_given(self, given) -> None:
        """The student's table (an nn.Embedding from ``learned_positions``) takes over this one's weights and trains."""
        if given is None or given.learned_positions is None:
            return
        table = given.learned_positions(self.block_size, self.wpe.embedding_dim)
        if not isinstance(table, nn.Embedding) or table.weight.shape != self.wpe.weight.shape:
            raise ValueError(f"learned_positions({self.block_size}, {self.wpe.embedding_dim}): expected "
                             f"nn.Embedding({self.block_size}, {self.wpe.embedding_dim}), got {table!r:.80}")
        with torch.no_grad():
            table.weight.copy_(self.wpe.weight)
        self.wpe = table

    def embed(self, T: int, device: torch.device, start: int = 0) -> Tensor:
        if start + T > self.block_size:
            raise ValueError(
                f"learned absolute positions cannot represent position {start + T - 1}: only {self.block_size} "
                "positions were trained (block_size). Use rope/alibi/t5/sinusoidal/none to go past block_size."
            )
        return self.wpe(torch.arange(start, start + T, device=device))


def sinusoidal_table(T: int, n_embd: int, device: torch.device | None = None) -> Tensor:
    """PE[p, 2i] = sin(p / 10000^(2i/C)), PE[p, 2i+1] = cos(p / 10000^(2i/C)) (Vaswani et al. §3.5)."""
    pos = torch.arange(T, device=device, dtype=torch.float32)[:, None]
    inv_freq = torch.exp(-math.log(10000.0) * torch.arange(0, n_embd, 2, device=device, dtype=torch.float32) / n_embd)
    table = torch.zeros(T, n_embd, device=device)
    table[:, 0::2] = torch.sin(pos * inv_freq)
    table[:, 1::2] = torch.cos(pos * inv_freq)
    return table


class Sinusoidal(PositionMethod):
    """The fixed table times one learned scalar (as x-transformers' ScaledSinusoidalEmbedding).

    The table's entries are O(1). Under Vaswani's init the token embeddings are scaled to the same O(1) and the table
    is added raw (scale 1); under GPT-2's init tokens start at std 0.02 and a raw table drowns them, so the scalar
    starts where the table's entries have the tokens' scale (init_parameter).
    """

    name = "sinusoidal"
    past_block_size = "defined by formula for any index, but the network never saw those vectors (Press 2022: explodes)"

    @classmethod
    def build(cls, block_size: int, n_embd: int, n_head: int) -> PositionMethod:
        return cls(n_embd)

    def init_parameter(self, name: str, p: nn.Parameter, init: str, embed_std: float) -> None:
        """Vaswani add the table raw; under gpt2 its entries (RMS 1/√2) start at the tokens' scale."""
        nn.init.constant_(p, 1.0 if init == "vaswani" else 0.02 * 2**0.5)

    def __init__(self, n_embd: int) -> None:
        super().__init__()
        self.n_embd = n_embd
        self.scale = nn.Parameter(torch.tensor(1.0))
        self.given_table = None

    def use_given(self, given) -> None:
        """The student's ``sinusoidal_table(T, n_embd)`` builds the table."""
        self.given_table = None if given is None else given.sinusoidal_table

    def embed(self, T: int, device: torch.device, start: int = 0) -> Tensor:
        if self.given_table is not None:
            return self.scale * self.given_table(start + T, self.n_embd).to(device)[start:]
        return self.scale * sinusoidal_table(start + T, self.n_embd, device)[start:]


class Rotary(PositionMethod):
    """RoPE (Su et al. 2021): rotate channel pairs of q and k by angle p·θ_i, so q·k depends on the offset only.

    Pairs are adjacent channels (2i, 2i+1), as in the RoFormer paper, so one pair is one complex number and the
    rotation is one complex multiply by e^{i p θ_i} (θ_i = base^(-2i/D)).
    """

    name = "rope"
    past_block_size = "defined for any index; unseen rotation angles degrade quality gradually (Press 2022)"

    @classmethod
    def build(cls, block_size: int, n_embd: int, n_head: int) -> PositionMethod:
        return cls(n_embd // n_head, n_head)

    @classmethod
    def parameter_count(cls, block_size: int, n_embd: int, n_head: int) -> int:
        return 0  # the rotation angles are a buffer

    def __init__(self, head_dim: int, n_head: int = 1, base: float = 10000.0) -> None:
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"RoPE needs an even head dim, got {head_dim}")
        self.head_dim, self.n_head = head_dim, n_head
        self.register_buffer(
            "inv_freq", base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim), persistent=False
        )
        self._cache: tuple[int, torch.device, Tensor] | None = None
        self.given_rotate = None

    def rotations(self, T: int, device: torch.device) -> Tensor:
        """(T, D/2) complex64 unit numbers e^{i p θ_i}, cached for the longest T seen."""
        if self._cache is None or self._cache[0] < T or self._cache[1] != device:
            angles = torch.outer(torch.arange(T, device=device, dtype=torch.float32), self.inv_freq.to(device))
            self._cache = (T, device, torch.polar(torch.ones_like(angles), angles))
        return self._cache[2][:T]

    def use_given(self, given) -> None:
        """The student's ``rope_rotate(x, start)`` turns the (B, T, H, D) queries and keys."""
        self.given_rotate = None if given is None else given.rope_rotate

    def rotary(self, T: int, device: torch.device, start: int = 0):
        if self.given_rotate is not None:
            rotate = self.given_rotate
            return lambda q, k: (rotate(q, start), rotate(k, start))
        # (T, H, D/2), materialised once per forward rather than broadcast over heads: the multiply then runs over
        # H·D/2 contiguous numbers per token instead of broadcasting D/2 (benchmarks/bench_rope.py compares the two).
        rot = self.rotations(start + T, device)[start:, None, :].expand(-1, self.n_head, -1).contiguous()

        def rotate_qk(q: Tensor, k: Tensor) -> tuple[Tensor, Tensor]:
            """Rotate the (B, T, H, D) query and key; the values are not rotated."""
            return apply_rotary(q, rot), apply_rotary(k, rot)

        return rotate_qk


def complex_pairs(x: Tensor) -> Tensor:
    """View channel pairs (2i, 2i+1) of a float tensor as complex numbers; copies only if the layout forbids a view."""
    if x.stride(-1) != 1 or x.storage_offset() % 2 or any(s % 2 for s in x.stride()[:-1]):
        x = x.contiguous()
    return torch.view_as_complex(x.unflatten(-1, (-1, 2)))


_COMPLEX_VIEWABLE = (torch.float32, torch.float64)


def _full_precision(x: Tensor) -> Tensor:
    """Half-precision tensors (bf16 autocast) have no complex view: rotate them in fp32."""
    return x if x.dtype in _COMPLEX_VIEWABLE else x.float()


def apply_rotary(x: Tensor, rot: Tensor) -> Tensor:
    """Rotate the channel pairs of x (..., T, [H,] D) by the complex units rot (T, [H,] D/2); autograd differentiates
    the complex multiply (its transpose is the multiply by the conjugate)."""
    return torch.view_as_real(complex_pairs(_full_precision(x)) * rot).flatten(-2).type_as(x)


def alibi_slopes(n_head: int) -> Tensor:
    """Head slopes from Press et al.: geometric 2^(-8/n)…; for non-powers of two, interleave the next power's slopes."""

    def power_of_two_slopes(n: int) -> list[float]:
        start = 2 ** (-8 / n)
        return [start ** (i + 1) for i in range(n)]

    if math.log2(n_head).is_integer():
        return torch.tensor(power_of_two_slopes(n_head))
    closest = 2 ** math.floor(math.log2(n_head))
    extra = power_of_two_slopes(2 * closest)[0::2][: n_head - closest]
    return torch.tensor(power_of_two_slopes(closest) + extra)


class ALiBi(PositionMethod):
    name = "alibi"
    past_block_size = "defined for any offset; a linear distance penalty the model trained with (Press 2022: flat)"

    @classmethod
    def build(cls, block_size: int, n_embd: int, n_head: int) -> PositionMethod:
        return cls(n_head)

    def __init__(self, n_head: int) -> None:
        super().__init__()
        self.register_buffer("slopes", alibi_slopes(n_head), persistent=False)
        self.given_bias = None

    def use_given(self, given) -> None:
        """The student's ``alibi_bias(n_heads, T)`` (H, T, T) gives the bias; these queries read its last rows."""
        self.given_bias = None if given is None else given.alibi_bias

    def score_bias(self, T: int, device: torch.device, start: int = 0) -> Tensor:
        if self.given_bias is not None:
            return self.given_bias(len(self.slopes), start + T).to(device)[:, start:, :]
        queries, keys = torch.arange(start, start + T, device=device), torch.arange(start + T, device=device)
        distance = (keys[None, :] - queries[:, None]).abs().float()  # symmetric, so bidirectional objectives work too
        return -self.slopes.to(device)[:, None, None] * distance


def t5_bucket(relative: Tensor, num_buckets: int, max_distance: int) -> Tensor:
    """T5's bucketing of key-minus-query offsets: exact for small offsets, log-spaced up to max_distance, then flat.

    Each direction gets all ``num_buckets``: keys before the query (and the query itself) in [0, num_buckets), keys
    after it in [num_buckets, 2·num_buckets). T5's decoder, whose mask hides the future, gives its whole table to the
    past (``bidirectional=False`` in its code); splitting one table between both directions, as its encoder does, would
    halve a causal model's resolution over the past. With a table per direction a causal model buckets the past exactly
    as T5's decoder and a bidirectional objective still tells before from after.
    """
    bucket = (relative > 0).long() * num_buckets
    n = relative.abs()
    exact = num_buckets // 2
    is_small = n < exact
    span = max(max_distance / exact, 2.0)  # a max_distance within the exact range (tiny test models) stays defined
    log_ratio = torch.log(n.float().clamp(min=1) / exact) / math.log(span)
    large = (exact + (log_ratio * (num_buckets - exact)).long()).clamp(max=num_buckets - 1)
    return bucket + torch.where(is_small, n, large)


class T5Bias(PositionMethod):
    """T5's relative bias (Raffel 2020): one learned scalar per head and offset bucket, added to the attention logits.

    The table is read times √head_dim, as x-transformers does. Under Adam a parameter moves about lr per step whatever
    its gradient, so a bias read at scale 1 spans only ~lr·steps nats over a run: too little to learn locality in a
    short run; read at √head_dim it moves as fast as a score does. The table starts at zero (init_parameter): every
    offset equal, as T5's own near-zero init has it.
    """

    name = "t5"
    past_block_size = "defined for any offset; offsets past max_distance share the last bucket, so it stays bounded"

    @classmethod
    def build(cls, block_size: int, n_embd: int, n_head: int) -> PositionMethod:
        return cls(n_head, n_embd // n_head, max_distance=block_size)

    @classmethod
    def parameter_count(cls, block_size: int, n_embd: int, n_head: int) -> int:
        return 2 * cls.NUM_BUCKETS * n_head

    def init_parameter(self, name: str, p: nn.Parameter, init: str, embed_std: float) -> None:
        """Every offset equal at the start, as T5's own near-zero init has it."""
        nn.init.zeros_(p)

    NUM_BUCKETS = 32  # per direction, as T5's own

    def __init__(self, n_head: int, head_dim: int, num_buckets: int = NUM_BUCKETS, max_distance: int = 128) -> None:
        super().__init__()
        self.num_buckets, self.max_distance = num_buckets, max_distance
        self.scale = head_dim**0.5
        self.bias = nn.Embedding(2 * num_buckets, n_head)  # past and future tables (see t5_bucket)

    def score_bias(self, T: int, device: torch.device, start: int = 0) -> Tensor:
        queries, keys = torch.arange(start, start + T, device=device), torch.arange(start + T, device=device)
        buckets = t5_bucket(keys[None, :] - queries[:, None], self.num_buckets, self.max_distance)
        return (self.bias(buckets) * self.scale).permute(2, 0, 1)  # (T, T, H) -> (H, T, T)


POSITIONS: dict[str, type[PositionMethod]] = {
    m.name: m for m in (LearnedAbsolute, Sinusoidal, Rotary, ALiBi, T5Bias, NoPosition)
}
POSITION_METHODS = tuple(POSITIONS)


def build_position(method: str, block_size: int, n_embd: int, n_head: int) -> PositionMethod:
    """The method the config's ``pos`` value names."""
    if method not in POSITIONS:
        raise ValueError(f"unknown position method pos={method!r}; choose one of {', '.join(POSITION_METHODS)}")
    return POSITIONS[method].build(block_size, n_embd, n_head)
