"""The optimizer and the update step, shared by our trainer and the cross-check's peer: the peer must differ from ours
only in its model, never in how it is optimised."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


def make_optimizer(model: nn.Module, t, device: torch.device) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only (not norms, biases), as one fused kernel per parameter group.

    Fused on CPU too: benchmarks/RESULTS.md has its measured gain over the default per-tensor loop.
    """
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": t.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=t.lr, betas=(t.beta1, t.beta2), fused=device.type in ("cpu", "cuda"))


def set_lr(opt: torch.optim.Optimizer, lr: float) -> None:
    for group in opt.param_groups:
        group["lr"] = lr


def update(model: nn.Module, opt: torch.optim.Optimizer, loss: Tensor, grad_clip: float) -> tuple[float, float]:
    """Backward, clip, step: (loss, gradient norm before clipping). A non-finite loss or gradient skips the step, so
    the weights stay those of the last good step (the caller records the divergence)."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip))
    loss_value = float(loss.detach())
    if math.isfinite(loss_value) and math.isfinite(grad_norm):
        opt.step()
    return loss_value, grad_norm
