"""Self-attention, built from named primitives and assembled into one switchable module.

The primitives are deliberately tiny: each is one line of tensor algebra with a name, so the module below reads as the
equation softmax(mask(QKᵀ/√d)) V. The module adds the study's switches and a fast path through
``F.scaled_dot_product_attention`` (SDPA) that the tests prove equal to the explicit path for every switch it serves.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from miniformer.network.config import ModelConfig

# ---------------------------------------------------------------------------------------------------------------------
# Primitives: one named step of attention each
# ---------------------------------------------------------------------------------------------------------------------


def pairwise_similarities(Q: Tensor, K: Tensor) -> Tensor:
    """Dot product of every query with every key: (..., T_q, d) x (..., T_k, d) -> (..., T_q, T_k)."""
    return Q @ K.transpose(-2, -1)


def attn_scaled(A: Tensor, n_embd: int, n_heads: int) -> Tensor:
    """Divide scores by √(head dim) so their variance stays ~1 and softmax does not saturate (Vaswani §3.2.1)."""
    return A / math.sqrt(n_embd / n_heads)


def attn_softmax(A: Tensor) -> Tensor:
    """Turn each query's scores into a distribution over keys (last dim)."""
    return torch.softmax(A, dim=-1)


def compute_outputs(A: Tensor, V: Tensor) -> Tensor:
    """Each query's output is the attention-weighted average of the values: (..., T_q, T_k) x (..., T_k, d)."""
    return A @ V


def make_causal_mask(n_tok: int, device: torch.device | str | None = None) -> Tensor:
    """Boolean lower-triangular (n_tok, n_tok) mask: True where query i may look at key j (j <= i)."""
    return torch.ones(n_tok, n_tok, dtype=torch.bool, device=device).tril()


def prefix_mask(prefix_lengths: Tensor, T: int, device: torch.device | str | None = None) -> Tensor:
    """(B, T, T) prefix-LM masks: query i sees key j if j is in its row's prefix (j < p) or j <= i."""
    j = torch.arange(T, device=device)
    in_prefix = j[None, None, :] < prefix_lengths.to(device)[:, None, None]
    return in_prefix | make_causal_mask(T, device)[None]


def apply_causal_mask(mask: Tensor, A: Tensor) -> Tensor:
    """Set scores where ``mask`` is False to -inf so softmax gives them exactly zero weight."""
    return A.masked_fill(~mask, float("-inf"))


def split_heads_qkv(Q: Tensor, K: Tensor, V: Tensor, n_heads: int) -> tuple[Tensor, Tensor, Tensor]:
    """(B, T, C) -> (B, H, T, C/H) for each of Q, K, V: every head sees its own slice of the channels."""
    return tuple(split_heads(X, n_heads) for X in (Q, K, V))  # type: ignore[return-value]


def split_heads(X: Tensor, n_heads: int) -> Tensor:
    """(B, T, C) -> (B, H, T, C/H)."""
    B, T, C = X.shape
    return X.view(B, T, n_heads, C // n_heads).transpose(1, 2)


def merge_heads(X: Tensor) -> Tensor:
    """(B, H, T, D) -> (B, T, H*D): concatenate the heads' outputs back along channels (inverse of split_heads)."""
    B, H, T, D = X.shape
    return X.transpose(1, 2).contiguous().view(B, T, H * D)


@dataclass(frozen=True)
class Primitives:
    """The primitives a SelfAttention's explicit path runs, one field per step: the package's own by default, a
    course student's in network/given.py (``GivenAttention``)."""

    pairwise_similarities: Callable = pairwise_similarities
    attn_scaled: Callable = attn_scaled
    attn_softmax: Callable = attn_softmax
    compute_outputs: Callable = compute_outputs
    make_causal_mask: Callable = make_causal_mask
    apply_causal_mask: Callable = apply_causal_mask
    split_heads_qkv: Callable = split_heads_qkv
    merge_heads: Callable = merge_heads

    @classmethod
    def from_namespace(cls, namespace: dict) -> Primitives:
        """The functions of these names in ``namespace`` (a notebook's ``globals()``); every one must be there."""
        names = [f.name for f in fields(cls)]
        missing = [n for n in names if not callable(namespace.get(n))]
        if missing:
            raise ValueError(f"define {', '.join(missing)} first (run their exercise cells)")
        return cls(**{n: namespace[n] for n in names})


PACKAGE_PRIMITIVES = Primitives()

# ---------------------------------------------------------------------------------------------------------------------
# The module the model uses
# ---------------------------------------------------------------------------------------------------------------------

# (query, key) as (B,T,H,D) -> the same two rotated (see positions.Rotary); the values are never rotated.
RotaryFn = Callable[[Tensor, Tensor], tuple[Tensor, Tensor]]
_ROLE_INDEX = {"q": 0, "k": 1, "v": 2}


@dataclass
class LayerKV:
    """One layer's keys and values (B, H, L, D) of every position so far, for generation token by token."""

    k: Tensor | None = None
    v: Tensor | None = None

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Add the new positions' keys/values; return all of them."""
        self.k = k if self.k is None else torch.cat((self.k, k), dim=2)
        self.v = v if self.v is None else torch.cat((self.v, v), dim=2)
        return self.k, self.v


class KVCache:
    """Per-layer keys and values, so that each generated token costs one position's forward, not the whole text's."""

    def __init__(self, n_layer: int) -> None:
        self.layers = [LayerKV() for _ in range(n_layer)]

    @property
    def length(self) -> int:
        k = self.layers[0].k
        return 0 if k is None else k.size(2)


@dataclass
class AttentionInputs:
    """What every layer's attention reads besides its input, built once per forward pass by the model."""

    mask: Tensor | None  # bool, broadcastable to (B,H,T,L), True = may attend; None = attend everywhere
    rotary: RotaryFn | None = None  # RoPE: rotates q and k
    score_bias: Tensor | None = None  # ALiBi / T5: (H,T,L) added to the scores
    return_weights: bool = False
    causal_hint: bool = False  # the mask is exactly the causal one: SDPA's built-in causal path may be used


class SelfAttention(nn.Module):
    """Multi-head self-attention with the study's switches (ModelConfig's ``n_head``, ``attn_scale``, ``qkv_order``,
    ``qk_tied``, ``value_proj``, ``head_merge``). The mask and the position hooks arrive at forward time
    (AttentionInputs): the model builds them once for every layer."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_head, self.n_embd, self.head_dim = cfg.n_head, cfg.n_embd, cfg.head_dim
        self.scale = cfg.attn_scale
        # Three projections with the names a LoRA recipe targets (q_proj, k_proj, v_proj, o_proj: peft, the LLaMA
        # family). One fused C -> 3C matrix measured no faster on CPU (benchmarks/bench_projections.py).
        self.q_proj, self.k_proj, self.v_proj = (nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias) for _ in range(3))
        self.o_proj = nn.Linear(cfg.n_embd if cfg.head_merge == "concat" else cfg.head_dim, cfg.n_embd, bias=cfg.bias)
        self.resid_drop = nn.Dropout(cfg.dropout)
        self.dropout = cfg.dropout
        # The switches, each apart from the plain path (switched_projections, and the merge in forward):
        self.role = tuple(_ROLE_INDEX[r] for r in cfg.qkv_order)  # which projection serves as Q, K, V
        if cfg.qk_tied:  # the key is the query's projection: scores q_i·q_j are symmetric in i and j
            self.role = (self.role[0], self.role[0], self.role[2])
        # Without a value projection the values are the input itself; v_proj stays (unused), so the parameter count is
        # that of every other arm.
        self.value_proj = cfg.value_proj
        self.head_merge = cfg.head_merge
        self.given = None  # someone else's attention code (network.given.GivenAttention): computes in its place

    def forward(self, x: Tensor, inputs: AttentionInputs, kv: LayerKV | None = None) -> tuple[Tensor, Tensor | None]:
        """x (B,T,C) -> (output (B,T,C), weights (B,H,T,L) when asked, else None). L = T, or T plus the positions
        already in ``kv`` (whose keys and values the new ones join)."""
        if self.given is not None:
            return self.given.forward(self, x, inputs, kv)
        q, k, v = self.project(x)  # (B,T,C) each
        if inputs.rotary is not None:
            q, k = self.rotate(q, k, inputs.rotary)
        q, k, v = split_heads(q, self.n_head), split_heads(k, self.n_head), split_heads(v, self.n_head)  # (B,H,T,D)
        if kv is not None:
            k, v = kv.append(k, v)
        if inputs.return_weights:
            y, w = self.explicit(q, k, v, inputs.mask, inputs.score_bias)
        else:
            y, w = self._sdpa(q, k, v, inputs.mask, inputs.score_bias, inputs.causal_hint), None
        y = merge_heads(y) if self.head_merge == "concat" else y.mean(dim=1)  # the mean merge: one head's width
        return self.resid_drop(self.o_proj(y)), w

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(B,T,C) query, key and value: W_q x, W_k x, W_v x — or, under a switch, what switched_projections says."""
        if self.role == (0, 1, 2) and self.value_proj:
            return self.q_proj(x), self.k_proj(x), self.v_proj(x)
        return self.switched_projections(x)

    def switched_projections(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The role switches: each of Q, K, V from the projection its role names (qkv_order, qk_tied), the input itself
        as the value without a value projection; a projection two roles share is computed once."""
        projections = (self.q_proj, self.k_proj, self.v_proj)
        used = self.role if self.value_proj else self.role[:2]
        out = {i: projections[i](x) for i in dict.fromkeys(used)}
        return out[self.role[0]], out[self.role[1]], out[self.role[2]] if self.value_proj else x

    def rotate(self, Q: Tensor, K: Tensor, rotary: RotaryFn) -> tuple[Tensor, Tensor]:
        """RoPE on the (B,T,C) query and key: each head's channel pairs turn within the head-major layout that a split
        then cuts into heads (so a split that cuts elsewhere changes what the model computes)."""
        shape = (*Q.shape[:2], self.n_head, self.head_dim)
        q, k = rotary(Q.view(shape), K.view(shape))
        return q.flatten(2), k.flatten(2)

    def explicit(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, score_bias: Tensor | None,
                 p: Primitives = PACKAGE_PRIMITIVES) -> tuple[Tensor, Tensor]:
        """softmax(mask(QKᵀ/√d + bias)) V step by step, with the weights (the heatmaps; SDPA does not return them):
        the package's primitives, or a student's (``p``, network/given.py)."""
        A = p.pairwise_similarities(q, k)
        if self.scale:
            A = p.attn_scaled(A, self.n_embd, self.n_head)
        if score_bias is not None:
            A = A + score_bias
        if mask is not None:
            A = p.apply_causal_mask(mask, A)
        A = p.attn_softmax(A)
        A_drop = F.dropout(A, self.dropout, self.training)
        return p.compute_outputs(A_drop, v), A

    def _sdpa(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        mask: Tensor | None,
        score_bias: Tensor | None,
        is_causal_hint: bool,
    ) -> Tensor:
        scale = None if self.scale else 1.0  # None = SDPA's default 1/√head_dim, the same as attn_scaled
        drop = self.dropout if self.training else 0.0
        if score_bias is None and is_causal_hint:
            return F.scaled_dot_product_attention(q, k, v, dropout_p=drop, is_causal=True, scale=scale)
        attn_mask: Tensor | None = mask
        if score_bias is not None:
            attn_mask = score_bias if mask is None else score_bias.masked_fill(~mask, float("-inf"))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=drop, scale=scale)
