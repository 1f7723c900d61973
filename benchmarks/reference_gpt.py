"""The bar: a GPT written the way the well-known single-file implementations write it.

Fused qkv Linear, no biases, F.scaled_dot_product_attention(is_causal=True), GELU MLP, learned positions, pre-norm
LayerNorm, tied embeddings; trained with PyTorch's AdamW, eager. Written here from the description, not copied.
``rope=True`` gives the same architecture as miniformer's baseline instead: no learned positions, q and k rotated after
the split the way single-file LLaMA-style models do it (view channel pairs as complex numbers, multiply, autograd).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def rope_angles(T: int, head_dim: int, base: float = 10000.0) -> torch.Tensor:
    """(T, head_dim/2) complex units e^{i t θ_j}."""
    theta = base ** (-torch.arange(0, head_dim, 2).float() / head_dim)
    angles = torch.outer(torch.arange(T).float(), theta)
    return torch.polar(torch.ones_like(angles), angles)


def rotate(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """x (B, T, H, D): channel pairs as complex numbers times freqs (T, 1, D/2)."""
    return torch.view_as_real(torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2)) * freqs).flatten(3)


class RefAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int) -> None:
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=False)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=False)

    def forward(self, x: torch.Tensor, freqs: torch.Tensor | None = None) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head) for t in self.c_attn(x).split(C, dim=2))
        if freqs is not None:
            q, k = rotate(q, freqs).type_as(v), rotate(k, freqs).type_as(v)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class RefBlock(nn.Module):
    def __init__(self, n_embd: int, n_head: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd, bias=False)
        self.attn = RefAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd, bias=False)
        self.fc = nn.Linear(n_embd, 4 * n_embd, bias=False)
        self.proj = nn.Linear(4 * n_embd, n_embd, bias=False)

    def forward(self, x: torch.Tensor, freqs: torch.Tensor | None) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x), freqs)
        return x + self.proj(F.gelu(self.fc(self.ln_2(x))))


class RefGPT(nn.Module):
    def __init__(self, vocab_size: int, block_size: int, n_layer: int, n_head: int, n_embd: int,
                 rope: bool = False) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = None if rope else nn.Embedding(block_size, n_embd)
        self.register_buffer("freqs", rope_angles(block_size, n_embd // n_head)[:, None, :] if rope else None)
        self.blocks = nn.ModuleList(RefBlock(n_embd, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd, bias=False)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        T = idx.size(1)
        x = self.wte(idx)
        freqs = None if self.freqs is None else self.freqs[:T]
        if self.wpe is not None:
            x = x + self.wpe(torch.arange(T, device=idx.device))
        for block in self.blocks:
            x = block(x, freqs)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
