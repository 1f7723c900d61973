"""The course's answers to the exercises the package has no function of that shape for, written from its own parts.

The model never calls these: it has its own layers and attends through SDPA. They are what the notebook's stubs
return when the solutions are switched on (the tests run the notebook that way), and the shape a student's answer
must have to be handed to the model (``GivenCode.from_namespace``). An answer that a student writes by calling their
own earlier functions takes ``using``, their namespace (``CALLS_THE_STUDENTS``).
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from miniformer.course.parts import textbook_block as block_forward  # noqa: F401 - the wiring is its own answer
from miniformer.course.parts import textbook_train_step as train_step  # noqa: F401 - as is the step
from miniformer.network import attention, objectives, positions

CALLS_THE_STUDENTS = ("self_attention", "MultiHeadAttention.__init__", "MultiHeadAttention.forward")

PRIMITIVES = ("split_heads_qkv", "pairwise_similarities", "attn_scaled", "make_causal_mask", "apply_causal_mask",
              "attn_softmax", "compute_outputs", "merge_heads")


def init_qkv_proj(n_embd: int) -> tuple[nn.Linear, nn.Linear, nn.Linear]:
    """Three projections that give every token a query, a key and a value of the model's width (no bias: W·x, as the
    model's own layers)."""
    return tuple(nn.Linear(n_embd, n_embd, bias=False) for _ in range(3))  # type: ignore[return-value]


def self_attention(Q: Tensor, K: Tensor, V: Tensor, n_heads: int, causal: bool = True, bias: Tensor | None = None,
                   using: dict | None = None) -> Tensor:
    """The primitives in their textbook order: split, QKᵀ, scale, + position bias (ALiBi, T5), mask, softmax, ·V,
    merge. (B, T, C) queries, keys and values -> (B, T, C). ``using``: a namespace whose primitives to call by name
    (the notebook's, as a student's answer calls their own functions), else the package's."""
    p = SimpleNamespace(**{n: (using or {}).get(n) or getattr(attention, n) for n in PRIMITIVES})
    q, k, v = p.split_heads_qkv(Q, K, V, n_heads)
    A = p.attn_scaled(p.pairwise_similarities(q, k), Q.size(-1), n_heads)
    if bias is not None:
        A = A + bias
    if causal:
        A = p.apply_causal_mask(p.make_causal_mask(Q.size(1)).to(Q.device), A)
    return p.merge_heads(p.compute_outputs(p.attn_softmax(A), v))


# --- project 3: positions -------------------------------------------------------------------------------------------


def learned_positions(block_size: int, n_embd: int) -> nn.Embedding:
    return nn.Embedding(block_size, n_embd)


def sinusoidal_table(T: int, n_embd: int) -> Tensor:
    return positions.sinusoidal_table(T, n_embd)


def rope_rotate(x: Tensor, start: int = 0) -> Tensor:
    """x (B, T, H, D) -> each channel pair (2i, 2i+1) at position p = start + t turned by p · 10000^(-2i/D)."""
    T, D = x.size(1), x.size(-1)
    return positions.apply_rotary(x, positions.Rotary(D).rotations(start + T, x.device)[start:, None, :])


def alibi_bias(n_heads: int, T: int) -> Tensor:
    distance = (torch.arange(T)[None, :] - torch.arange(T)[:, None]).abs().float()
    return -positions.alibi_slopes(n_heads)[:, None, None] * distance


# --- project 5: the multi-head module -------------------------------------------------------------------------------


def MultiHeadAttention___init__(self: nn.Module, n_embd: int, n_heads: int, using: dict | None = None) -> None:
    make = (using or {}).get("init_qkv_proj") or init_qkv_proj
    self.n_heads = n_heads
    self.q_proj, self.k_proj, self.v_proj = make(n_embd)
    self.o_proj = nn.Linear(n_embd, n_embd, bias=False)


def MultiHeadAttention_forward(self: nn.Module, x: Tensor, causal: bool = True, bias: Tensor | None = None,
                               rotate=None, using: dict | None = None) -> Tensor:
    attend = (using or {}).get("self_attention") or self_attention
    Q, K, V = self.q_proj(x), self.k_proj(x), self.v_proj(x)
    if rotate is not None:
        Q, K = rotate(Q, K)
    return self.o_proj(attend(Q, K, V, self.n_heads, causal, bias))


# --- project 6: the block (block_forward is parts.textbook_block; project 7's train_step is parts') ------------------


def mlp_forward(x: Tensor, up_proj: nn.Linear, down_proj: nn.Linear) -> Tensor:
    return down_proj(F.gelu(up_proj(x)))


def layer_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    return F.layer_norm(x, (x.size(-1),), weight, None, eps)


def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    return F.rms_norm(x, (x.size(-1),), weight, eps)


# --- project 8: the objectives' batches -----------------------------------------------------------------------------


def causal_batch(tokens: Tensor) -> tuple:
    b = objectives.causal_batch(tokens)
    return b.x, b.y, b.mask


def masked_batch(tokens: Tensor, mask_id: int, rate: float, g: torch.Generator) -> tuple:
    chosen = torch.rand(tokens.shape, generator=g) < rate
    x = tokens.masked_fill(chosen, mask_id)
    y = tokens.masked_fill(~chosen, objectives.IGNORE)
    return x, y, torch.ones(tokens.size(1), tokens.size(1), dtype=torch.bool)


def prefix_batch(tokens: Tensor, prefix_len: int) -> tuple:
    x, y = tokens[:, :-1], tokens[:, 1:].clone()
    y[:, : prefix_len - 1] = objectives.IGNORE
    return x, y, attention.prefix_mask(torch.tensor([prefix_len]), x.size(1))[0]
