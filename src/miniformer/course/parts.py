"""Textbook computations and random inputs for the later course exercises: positions (project 3), the multi-head
module (5), the block (6), the training step (7) and the objectives' batches (8).

Written out plainly (loops over positions, explicit cos/sin, explicit means), independent of the package's own code,
so a bug in the package cannot pass a wrong answer. checks.py runs them exactly as it runs the attention primitives.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn

IGNORE = -100  # a target that takes no loss (PyTorch's cross_entropy default)

# --- project 3: positions ---------------------------------------------------------------------------------------------


def textbook_sinusoidal(T: int, n_embd: int) -> Tensor:
    table = torch.zeros(T, n_embd)
    for p in range(T):
        for i in range(0, n_embd, 2):
            table[p, i] = math.sin(p / 10000 ** (i / n_embd))
            table[p, i + 1] = math.cos(p / 10000 ** (i / n_embd))
    return table


def textbook_rope(x: Tensor, start: int = 0) -> Tensor:
    """x (B, T, H, D): the pair (2i, 2i+1) at position p = start + t turned by the angle p · 10000^(-2i/D)."""
    D, T = x.size(-1), x.size(1)
    p = torch.arange(start, start + T, dtype=torch.float64)[:, None, None]  # (T, 1, 1): over heads and pairs
    angle = p * 10000.0 ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
    cos, sin = torch.cos(angle).float(), torch.sin(angle).float()
    a, b = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = a * cos - b * sin
    out[..., 1::2] = a * sin + b * cos
    return out


def textbook_alibi(n_heads: int, T: int) -> Tensor:
    slopes = [2 ** (-8 * (h + 1) / n_heads) for h in range(n_heads)]
    return torch.tensor([[[-m * abs(i - j) for j in range(T)] for i in range(T)] for m in slopes])


def _embedding_shape(args: tuple, got) -> str | None:
    block_size, n_embd = args
    if not isinstance(got, nn.Embedding):
        return f"应返回 nn.Embedding · return an nn.Embedding (a trained vector per position), got {type(got).__name__}"
    if tuple(got.weight.shape) != (block_size, n_embd):
        return (f"每个位置一个 n_embd 维向量 · one n_embd vector per position: nn.Embedding({block_size}, {n_embd}), "
                f"got {tuple(got.weight.shape)}")
    return None


def _rotate_half(x: Tensor, start: int) -> Tensor:
    """The other convention (GPT-NeoX, LLaMA): channel i paired with i + D/2."""
    D = x.size(-1)
    paired = torch.stack([x[..., : D // 2], x[..., D // 2:]], dim=-1).flatten(-2)  # (i, i + D/2) made adjacent
    turned = textbook_rope(paired, start).unflatten(-1, (D // 2, 2))
    return torch.cat([turned[..., 0], turned[..., 1]], dim=-1)


def _keeps_length(args: tuple, got) -> str | None:
    x, start = args
    if isinstance(got, Tensor) and got.shape == x.shape:
        before, after = x.norm(dim=-1), got.norm(dim=-1)
        if not torch.allclose(before, after, atol=1e-4):
            return ("旋转不改变长度 · a rotation keeps each head's vector length: yours changes it (cos and sin of "
                    "the same angle on each pair (2i, 2i+1)?)")
        if torch.allclose(got, _rotate_half(x, start), atol=1e-4):
            return ("配对是相邻的通道 (2i, 2i+1) · the pairs are adjacent channels (2i, 2i+1), as in the RoFormer "
                    "paper; yours turns (i, i + D/2) together (the rotate-half convention of GPT-NeoX and LLaMA)")
    return None


# --- project 5: the multi-head module ---------------------------------------------------------------------------------


def textbook_multi_head(module: nn.Module, x: Tensor, causal: bool, bias: Tensor | None, rotate) -> Tensor:
    from miniformer.course.checks import textbook_self_attention

    Q, K, V = x @ module.q_proj.weight.T, x @ module.k_proj.weight.T, x @ module.v_proj.weight.T
    if rotate is not None:
        Q, K = rotate(Q, K)
    return textbook_self_attention(Q, K, V, module.n_heads, causal, bias) @ module.o_proj.weight.T


def run_multi_head(cls: type, args: tuple) -> tuple:
    """(what the student's module gives, what the textbook gives with the same weights)."""
    n_embd, n_heads, x, causal, bias, rotate = args
    torch.manual_seed(0)
    module = cls(n_embd, n_heads)
    layers = ("q_proj", "k_proj", "v_proj", "o_proj")
    missing = [n for n in layers if not isinstance(getattr(module, n, None), nn.Linear)]
    if missing or getattr(module, "n_heads", None) != n_heads:
        raise AssertionError(f"✗ MultiHeadAttention({n_embd}, {n_heads}): 需要 · needs "
                             f"{', '.join(missing) or 'self.n_heads'} (the model takes these layers over)")
    got, expected = module(x, causal, bias, rotate), textbook_multi_head(module, x, causal, bias, rotate)
    if isinstance(got, Tensor) and got.shape == expected.shape and not torch.allclose(got, expected, atol=1e-5):
        before_o = expected @ torch.linalg.pinv(module.o_proj.weight.T.detach())
        if torch.allclose(got, before_o, atol=1e-3):
            raise AssertionError(f"✗ MultiHeadAttention({n_embd}, {n_heads}).forward: 最后要经过 o_proj · forward must "
                                 "end in self.o_proj(...): yours returns the heads' concatenation before it")
    return got, expected


# --- project 6: the block ---------------------------------------------------------------------------------------------


def textbook_block(x, attn, mlp, norm1, norm2, pre_norm=True, residual=True):
    def add(skip, branch):
        return skip + branch if residual else branch

    if pre_norm:
        x = add(x, attn(norm1(x)))
        return add(x, mlp(norm2(x)))
    x = norm1(add(x, attn(x)))
    return norm2(add(x, mlp(x)))


def textbook_mlp(x: Tensor, up_proj: nn.Linear, down_proj: nn.Linear) -> Tensor:
    h = x @ up_proj.weight.T
    h = 0.5 * h * (1 + torch.erf(h / math.sqrt(2)))  # GELU, exactly (not the tanh approximation)
    return h @ down_proj.weight.T


def textbook_layer_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # the biased variance, as LayerNorm's
    return (x - mean) / torch.sqrt(var + eps) * weight


def _biased_variance(args: tuple, got) -> str | None:
    x, weight, eps = args
    unbiased = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + eps) * weight
    if isinstance(got, Tensor) and got.shape == x.shape and torch.allclose(got, unbiased, atol=1e-4):
        return ("LayerNorm 用有偏方差 · LayerNorm divides by C, not C − 1: the biased variance "
                "(x.var(-1, unbiased=False, keepdim=True), or the mean of the squared deviations)")
    std = (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + eps) * weight
    if isinstance(got, Tensor) and got.shape == x.shape and torch.allclose(got, std, atol=1e-4):
        return "eps 加在方差上，在开方之前 · eps is added to the (biased) variance, inside the square root"
    return None


def textbook_rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    return x / torch.sqrt((x**2).mean(dim=-1, keepdim=True) + eps) * weight


def _block_args(g: torch.Generator, pre_norm: bool, residual: bool) -> tuple:
    """Four different, non-linear stand-ins: an order or a wiring mistake changes the result."""
    x = torch.randn(2, 5, 8, generator=g)
    a, m = torch.randn(8, 8, generator=g), torch.randn(8, 8, generator=g)
    return (x, lambda h: torch.tanh(h @ a), lambda h: torch.sin(h @ m), lambda h: h * 0.5 + 1.0,
            lambda h: h.roll(1, dims=-1) * 2.0, pre_norm, residual)


def _linear(g: torch.Generator, n_in: int, n_out: int) -> nn.Linear:
    layer = nn.Linear(n_in, n_out, bias=False)
    with torch.no_grad():
        layer.weight.copy_(torch.randn(n_out, n_in, generator=g) / math.sqrt(n_in))
    return layer


# --- project 7: the training step -------------------------------------------------------------------------------------


def textbook_train_step(model, batch, optimizer) -> float:
    x, y, mask = batch
    loss = model(x, y, attn_mask=mask)["loss"]
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def _two_steps(step: Callable, seed: int, use_mask: bool) -> tuple[list[float], list[Tensor]]:
    """Two steps of ``step`` on a fresh tiny model: the losses it returned, and every parameter after each step."""
    from miniformer.network.model import MiniFormer, ModelConfig

    torch.manual_seed(seed)
    model = MiniFormer(ModelConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(seed)
    losses, params = [], []
    for _ in range(2):
        tokens = torch.randint(0, 11, (3, 9), generator=g)
        mask = torch.ones(8, 8, dtype=torch.bool) if use_mask else None
        loss = step(model, (tokens[:, :-1], tokens[:, 1:], mask), optimizer)
        if not isinstance(loss, float):
            raise AssertionError(f"✗ train_step: 应返回 float · return the loss as a float (loss.item()), got "
                                 f"{type(loss).__name__}")
        losses.append(loss)
        params.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    return losses, params


def run_train_step(step: Callable, args: tuple) -> tuple[Tensor, Tensor]:
    """Two steps of the student's and of the textbook's; a difference is named by the first place it appears."""
    mine, theirs = _two_steps(step, *args), _two_steps(textbook_train_step, *args)
    why = None
    if not math.isclose(mine[0][0], theirs[0][0], rel_tol=1e-5):
        why = (f"第一步的损失不同 · the first loss differs (yours {mine[0][0]:.4f}, textbook {theirs[0][0]:.4f}): the "
               "loss is model(x, y, attn_mask=mask)['loss'], read before the update")
    elif not torch.allclose(mine[1][0], theirs[1][0], atol=1e-6):
        why = ("第一步之后参数不同 · the parameters differ after one step: loss.backward(), then optimizer.step()")
    elif not torch.allclose(mine[1][1], theirs[1][1], atol=1e-6):
        why = ("第二步之后参数不同 · the parameters differ after the second step only: zero the gradients every step "
               "(optimizer.zero_grad()), or they pile up from one step to the next")
    if why:
        raise AssertionError(f"✗ train_step(seed {args[0]}, mask {args[1]}): {why}")
    return torch.tensor(mine[0]), torch.tensor(theirs[0])


# --- project 8: the objectives' batches -------------------------------------------------------------------------------


def textbook_causal_batch(tokens: Tensor) -> tuple:
    return tokens[:, :-1], tokens[:, 1:], None


def textbook_masked_batch(tokens: Tensor, mask_id: int, rate: float, g: torch.Generator) -> tuple:
    chosen = torch.rand(tokens.shape, generator=g) < rate
    x = torch.where(chosen, torch.full_like(tokens, mask_id), tokens)
    y = torch.where(chosen, tokens, torch.full_like(tokens, IGNORE))
    T = tokens.size(1)
    return x, y, torch.ones(T, T, dtype=torch.bool)


def textbook_prefix_batch(tokens: Tensor, prefix_len: int) -> tuple:
    x, y = tokens[:, :-1], tokens[:, 1:].clone()
    T = x.size(1)
    y[:, : prefix_len - 1] = IGNORE
    mask = torch.tensor([[j < prefix_len or j <= i for j in range(T)] for i in range(T)])
    return x, y, mask


def _masked_targets(args: tuple, got) -> str | None:
    tokens, mask_id = args[0], args[1]
    try:
        x, y, _ = got
        hidden = x == mask_id
        if not torch.equal(y != IGNORE, hidden):
            return ("损失只算被遮住的位置 · the loss is taken exactly where a token was masked: y = the original "
                    f"token there and {IGNORE} everywhere else")
        if not torch.equal(y[hidden], tokens[hidden]):
            return "被遮住的位置的目标是原来的字 · a masked position's target is the token that was there"
    except (TypeError, ValueError, RuntimeError):
        return None  # not a triple of tensors: the comparison names it
    return None


def _no_peek(args: tuple, got) -> str | None:
    tokens, prefix_len = args
    try:
        _, y, mask = got
        T = tokens.size(1) - 1
        future = torch.ones(T, T, dtype=torch.bool).triu(1)
        if (mask & future)[prefix_len - 1:].any():
            return ("前缀之后是因果的 · after the prefix the mask is causal: a suffix position must not see what comes "
                    "after it")
        if (y[:, : prefix_len - 1] != IGNORE).any() and T > 1:
            return (f"前缀里的目标不计损失 · no loss inside the prefix: a prefix position already sees the next token "
                    f"(y[:, :prefix_len - 1] = {IGNORE})")
    except (TypeError, ValueError, RuntimeError, AttributeError):
        return None
    return None


def _tokens(g: torch.Generator, b: int = 2, t: int = 9, v: int = 20) -> Tensor:
    return torch.randint(0, v, (b, t), generator=g)


# name -> (textbook, invariant or None, makers of random arguments[, runner(fn, args) -> (got, expected)])
PART_CASES: dict[str, tuple] = {
    "learned_positions": (None, _embedding_shape, [lambda g: (16, 8), lambda g: (5, 4)]),
    "sinusoidal_table": (textbook_sinusoidal, None, [lambda g: (6, 8), lambda g: (3, 4)]),
    "rope_rotate": (textbook_rope, _keeps_length, [lambda g: (torch.randn(2, 5, 3, 8, generator=g), 0),
                                                   lambda g: (torch.randn(1, 4, 2, 4, generator=g), 7)]),
    "alibi_bias": (textbook_alibi, None, [lambda g: (4, 5), lambda g: (2, 3), lambda g: (8, 4)]),
    "MultiHeadAttention": (None, None, [
        lambda g: (8, 2, torch.randn(2, 5, 8, generator=g), True, None, None),
        lambda g: (12, 3, torch.randn(1, 4, 12, generator=g), False, None, None),
        lambda g: (8, 2, torch.randn(2, 5, 8, generator=g), True, torch.randn(2, 5, 5, generator=g), None),
        lambda g: (8, 2, torch.randn(2, 5, 8, generator=g), True, None, lambda Q, K: (Q.flip(1), K * 2.0))],
        run_multi_head),
    "block_forward": (textbook_block, None, [lambda g: _block_args(g, True, True),
                                             lambda g: _block_args(g, False, True),
                                             lambda g: _block_args(g, True, False)]),
    "mlp_forward": (textbook_mlp, None, [lambda g: (torch.randn(2, 3, 4, generator=g), _linear(g, 4, 16),
                                                    _linear(g, 16, 4))]),
    "layer_norm": (textbook_layer_norm, _biased_variance, [lambda g: (torch.randn(2, 3, 8, generator=g) * 3 + 1,
                                                          torch.rand(8, generator=g) + 0.5, 1e-5)]),
    "rms_norm": (textbook_rms_norm, None, [lambda g: (torch.randn(2, 3, 8, generator=g) * 3 + 1,
                                                      torch.rand(8, generator=g) + 0.5, 1e-6)]),
    "train_step": (None, None, [lambda g: (0, False), lambda g: (1, True)], run_train_step),
    "causal_batch": (textbook_causal_batch, None, [lambda g: (_tokens(g),)]),
    "masked_batch": (None, _masked_targets, [lambda g: (_tokens(g, 3, 12), 99, 0.3, 5)],
                     lambda fn, args: (fn(args[0], args[1], args[2], torch.Generator().manual_seed(args[3])),
                                       textbook_masked_batch(args[0], args[1], args[2],
                                                             torch.Generator().manual_seed(args[3])))),
    "prefix_batch": (textbook_prefix_batch, _no_peek, [lambda g: (_tokens(g), 3), lambda g: (_tokens(g, 1, 6), 1)]),
}
