"""Someone else's code for parts of the network — a course student's — bundled, so a model can train on it.

The package's model never needs this module: without it every layer computes with the package's own code. The course
notebook builds a ``GivenCode`` from the student's cells (``GivenCode.from_namespace(globals())``) and the trainer
installs it before the optimizer sees the parameters, so the layers the student's code builds are the ones trained.
The fingerprint names the code: a run trained on it is never mistaken for, or resumed as, the package's.

Attention takes the student's code wherever it can compute the layer: their ``MultiHeadAttention`` module (or their
``self_attention`` on their projections) for every training step with the causal mask or none, whatever the position
method (RoPE turns q and k before the student's split; ALiBi's bias reaches their ``self_attention``); the explicit
path through their primitives one by one everywhere else (generation with a cache, heatmaps, the objectives' masks).
"""

from __future__ import annotations

import functools
import hashlib
import types
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from torch import Tensor, nn

from miniformer.network.attention import AttentionInputs, LayerKV, Primitives, SelfAttention

if TYPE_CHECKING:
    from miniformer.network.model import MiniFormer


def _is_linear(m: object, n_embd: int, bias: bool) -> bool:
    return (isinstance(m, nn.Linear) and (m.in_features, m.out_features) == (n_embd, n_embd)
            and (m.bias is not None) == bias)


def projection_problem(built: tuple, n_embd: int, bias: bool) -> str | None:
    """Why ``built`` cannot serve as a model's W_q, W_k, W_v (None when it can): three separate n_embd -> n_embd
    ``nn.Linear`` layers, with a bias exactly when the model's other layers have one."""
    if len(built) != 3 or not all(isinstance(m, nn.Linear) for m in built):
        return f"expected three nn.Linear layers, got {built!r:.80}"
    if any((m.in_features, m.out_features) != (n_embd, n_embd) for m in built):
        return f"each projection maps n_embd -> n_embd ({n_embd} -> {n_embd})"
    if len({id(m.weight) for m in built}) < 3:
        return "the three projections must be separate layers with their own weights"
    if any((m.bias is not None) != bias for m in built):
        return f"the model's layers have {'a' if bias else 'no'} bias: nn.Linear(n_embd, n_embd, bias={bias})"
    return None


@dataclass(frozen=True)
class GivenAttention:
    """A student's attention (projects 4 and 5): their primitives, and the assembly built from them."""

    primitives: Primitives
    init_qkv_proj: Callable | None = None  # n_embd -> (W_q, W_k, W_v)
    self_attention: Callable | None = None  # (Q, K, V, n_heads, causal, bias) -> (B, T, C)
    # (n_embd, n_heads) -> a module with q/k/v/o_proj and forward(x, causal, bias, rotate)
    MultiHeadAttention: type | None = None

    def install(self, attn: SelfAttention) -> None:
        """Make ``attn`` compute with this code. The student's layers (from their module or their init_qkv_proj) take
        over the current weights — the model's own init, so correct code trains exactly as the package's — and
        replace the layer's, under the same names (a checkpoint loads into either)."""
        attn.given, attn.__dict__["given_module"] = self, None  # the module: not registered twice
        if self.MultiHeadAttention is not None:
            module = self.MultiHeadAttention(attn.n_embd, attn.n_head)
            built = tuple(getattr(module, n, None) for n in ("q_proj", "k_proj", "v_proj", "o_proj"))
            what = f"MultiHeadAttention({attn.n_embd}, {attn.n_head}) needs q_proj, k_proj, v_proj and o_proj"
        elif self.init_qkv_proj is not None:
            module, built, what = None, tuple(self.init_qkv_proj(attn.n_embd)), f"init_qkv_proj({attn.n_embd})"
        else:
            return
        bias = attn.q_proj.bias is not None
        problem = projection_problem(built[:3], attn.n_embd, bias)
        if problem is None and len(built) == 4 and not _is_linear(built[3], attn.n_embd, bias):
            problem = f"o_proj must be nn.Linear(n_embd, n_embd, bias={bias}), got {built[3]!r:.80}"
        if problem:
            raise ValueError(f"{what}: {problem}")
        for new, old in zip(built, (attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj)):
            new.load_state_dict(old.state_dict())
        attn.q_proj, attn.k_proj, attn.v_proj = built[:3]
        if module is not None:
            attn.o_proj = built[3]
            attn.__dict__["given_module"] = module

    def forward(self, attn: SelfAttention, x: Tensor, inputs: AttentionInputs,
                kv: LayerKV | None) -> tuple[Tensor, Tensor | None]:
        """The layer on this code: the student's module or self_attention where the textbook computes the whole
        layer, else their primitives one by one under the objective's mask."""
        module = attn.__dict__.get("given_module")
        causal = inputs.mask is not None
        if module is not None and textbook_covers(attn, inputs, kv):
            rotate = None if inputs.rotary is None else (lambda Q, K: attn.rotate(Q, K, inputs.rotary))
            return attn.resid_drop(module(x, causal, inputs.score_bias, rotate)), None
        if self.self_attention is not None and textbook_covers(attn, inputs, kv):
            Q, K, V = attn.project(x)
            if inputs.rotary is not None:
                Q, K = attn.rotate(Q, K, inputs.rotary)
            y = self.self_attention(Q, K, V, attn.n_head, causal, inputs.score_bias)
            return attn.resid_drop(attn.o_proj(y)), None
        p = self.primitives
        Q, K, V = attn.project(x)
        if inputs.rotary is not None:
            Q, K = attn.rotate(Q, K, inputs.rotary)
        q, k, v = p.split_heads_qkv(Q, K, V, attn.n_head)
        if kv is not None:
            k, v = kv.append(k, v)
        mask = inputs.mask
        if inputs.causal_hint and kv is None:  # the causal mask from the student's own make_causal_mask
            mask = p.make_causal_mask(q.size(-2)).to(q.device)
        y, w = attn.explicit(q, k, v, mask, inputs.score_bias, p)
        y = p.merge_heads(y) if attn.head_merge == "concat" else y.mean(dim=1)
        return attn.resid_drop(attn.o_proj(y)), w if inputs.return_weights else None


def textbook_covers(attn: SelfAttention, inputs: AttentionInputs, kv: LayerKV | None) -> bool:
    """Whether the textbook ``self_attention(Q, K, V, n_heads, causal, bias)`` computes this layer exactly: the causal
    mask or none, the plain projections, every head concatenated, scaled, no cache, no dropout, no weights asked."""
    return (kv is None and not inputs.return_weights and (inputs.causal_hint or inputs.mask is None)
            and attn.scale and attn.head_merge == "concat" and (attn.dropout == 0 or not attn.training)
            and attn.role == (0, 1, 2) and attn.value_proj)


@dataclass(frozen=True)
class GivenPositions:
    """One function per position method a student writes (project 3); None keeps the package's."""

    learned_positions: Callable | None = None  # (block_size, n_embd) -> nn.Embedding: the table, trained
    sinusoidal_table: Callable | None = None  # (T, n_embd) -> (T, n_embd)
    rope_rotate: Callable | None = None  # (x (B, T, H, D), start) -> x with each channel pair turned by p·θ_i
    alibi_bias: Callable | None = None  # (n_heads, T) -> (H, T, T): -slope_h · |i - j|


@dataclass(frozen=True)
class GivenBlock:
    """The block's wiring and its parts (project 6); ``block_forward`` None keeps the package's block."""

    block_forward: Callable | None = None  # (x, attn, mlp, norm1, norm2, pre_norm, residual) -> x
    mlp_forward: Callable | None = None  # (x, up_proj, down_proj) -> down(gelu(up(x)))
    layer_norm: Callable | None = None  # (x, weight, eps) -> normalised x
    rms_norm: Callable | None = None  # (x, weight, eps) -> x / rms(x) · weight


def _names(cls) -> list[str]:
    return [f.name for f in fields(cls)]


ASSEMBLY = [n for n in _names(GivenAttention) if n != "primitives"]
# every function a student can hand to the model, by the name it has in the notebook
GIVEN_NAMES = (*_names(Primitives), *ASSEMBLY, *_names(GivenPositions), *_names(GivenBlock))


@dataclass(frozen=True)
class GivenCode:
    attention: GivenAttention | None = None
    positions: GivenPositions | None = None
    block: GivenBlock | None = None

    @classmethod
    def from_namespace(cls, namespace: dict) -> GivenCode:
        """Every exercise's function from ``namespace`` (a notebook's ``globals()``); each must be there."""
        missing = [n for n in GIVEN_NAMES if not callable(namespace.get(n))]
        if missing:
            raise ValueError(f"define {', '.join(missing)} first (run their exercise cells)")
        return cls(GivenAttention(Primitives.from_namespace(namespace), **{n: namespace[n] for n in ASSEMBLY}),
                   GivenPositions(**{n: namespace[n] for n in _names(GivenPositions)}),
                   GivenBlock(**{n: namespace[n] for n in _names(GivenBlock)}))

    @classmethod
    def of(cls, given: GivenCode | GivenAttention | Primitives | None) -> GivenCode | None:
        """Attention primitives or an attention alone, as a bundle (None stays None: the package's code)."""
        if isinstance(given, Primitives):
            given = GivenAttention(given)
        return cls(attention=given) if isinstance(given, GivenAttention) else given

    def functions(self) -> dict[str, Callable]:
        """name -> the given function, for every part given."""
        parts = [self.positions, self.block]
        if self.attention is not None:
            parts += [self.attention, self.attention.primitives]
        out: dict[str, Callable] = {}
        for part in parts:
            if part is not None:
                out.update({f.name: v for f in fields(part) if callable(v := getattr(part, f.name))
                            and f.name != "primitives"})
        return out

    def fingerprint(self) -> str:
        """A digest of the given functions' compiled code (a given class: its methods')."""
        h = hashlib.sha256()
        for name, fn in sorted(self.functions().items()):
            h.update(name.encode() + _code_bytes(fn))
        return h.hexdigest()[:16]

    def install(self, model: MiniFormer) -> None:
        """Every layer of ``model`` computes with the given code from now on (None parts: the package's)."""
        for block in model.blocks:
            if self.attention is None:
                block.attn.given = None
            else:
                self.attention.install(block.attn)
            block.given = self.block if self.block is not None and self.block.block_forward is not None else None
        model.position.use_given(self.positions)


def _code_bytes(fn) -> bytes:
    """What makes a function compute what it computes, as bytes: its code, constants and the names it calls (nested
    functions and lambdas included, by content, never by address), what its closure holds, and a partial's function.
    Two functions that differ only in a constant, a called name or a captured value differ here."""
    if isinstance(fn, type):  # a class: its methods' code, in name order
        return b"".join(name.encode() + _code_bytes(v) for name, v in sorted(vars(fn).items()) if callable(v))
    if isinstance(fn, functools.partial):  # the bound arguments by name only (a namespace's repr holds addresses)
        return _code_bytes(fn.func) + repr(sorted(fn.keywords)).encode()
    code = getattr(fn, "__code__", None)
    if code is None:
        return getattr(fn, "__qualname__", type(fn).__name__).encode()
    held = [c.cell_contents for c in (getattr(fn, "__closure__", None) or ()) if _has_contents(c)]
    return _code_object_bytes(code) + b"".join(_value_bytes(v) for v in held)


def _code_object_bytes(code: types.CodeType) -> bytes:
    consts = b"".join(_code_object_bytes(c) if isinstance(c, types.CodeType) else repr(c).encode()
                      for c in code.co_consts)
    return code.co_code + consts + " ".join(code.co_names).encode()


def _value_bytes(value: object) -> bytes:
    if isinstance(value, type):  # a class in a closure is super()'s __class__: named, not followed
        return value.__qualname__.encode()
    if callable(value):
        return _code_bytes(value)
    if isinstance(value, int | float | str | bool | bytes | tuple | type(None)):
        return repr(value).encode()
    return type(value).__name__.encode()


def _has_contents(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True
