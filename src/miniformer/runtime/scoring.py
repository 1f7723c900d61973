"""Per-window losses on fixed held-out windows: what training curves, evaluation and the report's intervals share.

A loss is kept per window, not only as one mean, so that two runs scored on the same windows can be compared window
by window (a paired difference cancels most of the sampling error of the windows themselves) and so that the report
can bootstrap an interval over windows.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from miniformer.errors import UserError
from miniformer.network.objectives import IGNORE, Objective, Specials

BATCH = 16


def windows(data: np.ndarray, length: int, max_tokens: int | None = None, stride: int | None = None) -> Tensor:
    """Consecutive windows of ``length`` tokens (stride ``length - 1`` so every target token is scored once)."""
    stride = stride or max(1, length - 1)
    starts = list(range(0, len(data) - length + 1, stride))
    if max_tokens is not None:
        starts = starts[: max(1, max_tokens // length)]
    return torch.from_numpy(np.stack([data[s : s + length].astype(np.int64) for s in starts]))


def spread_windows(data: np.ndarray, length: int, count: int) -> Tensor:
    """``count`` windows spread evenly over the whole split (every play contributes), the same for every run."""
    last = len(data) - length
    starts = np.unique(np.linspace(0, last, num=max(1, count)).astype(np.int64))
    return torch.from_numpy(np.stack([data[s : s + length].astype(np.int64) for s in starts]))


def curve_windows(val: np.ndarray, length: int, curve_tokens: int) -> Tensor:
    """The val-loss curve's windows, train.curve_tokens worth. More windows than the split has distinct starts would
    only repeat windows, and 10^12 tokens asked for 226 GiB of start positions: refused in one line."""
    count, starts = max(1, curve_tokens // length), len(val) - length + 1
    if count > starts:
        raise UserError(f"train.curve_tokens = {curve_tokens} asks for {count} val-curve windows of {length} tokens, "
                        f"but the val split holds {starts} distinct ones; set it to at most {starts * length}")
    return spread_windows(val, length, count)


@torch.no_grad()
def window_losses(
    model: torch.nn.Module,
    tokens: Tensor,
    objective: Objective,
    specials: Specials,
    device: torch.device,
    causal_override: Tensor | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Summed loss and scored-token count per window, each window in the objective's training format.

    MLM and span masks are drawn from a fixed generator, so every run of an objective hides the same tokens.
    ``causal_override`` (a (T, T) mask) replaces the objective's mask: the no-mask breakage scored as it should read.
    """
    g = torch.Generator().manual_seed(0)
    sums, counts = [], []
    for i in range(0, len(tokens), BATCH):
        b = objective.batch(tokens[i : i + BATCH], specials, g)
        mask = causal_override if causal_override is not None else b.mask
        x, y = b.x.to(device), b.y.to(device)
        logits = model(x, attn_mask=None if mask is None else mask.to(device))["logits"]
        nll = F.cross_entropy(logits.flatten(0, 1).float(), y.flatten(), ignore_index=IGNORE, reduction="none")
        sums.append(nll.view(y.shape).sum(1).cpu().numpy())
        counts.append((y != IGNORE).sum(1).cpu().numpy())
    return np.concatenate(sums).astype(np.float64), np.concatenate(counts).astype(np.int64)


def mean_loss(sums: np.ndarray, counts: np.ndarray) -> float:
    return float(sums.sum() / max(int(counts.sum()), 1))


def attention_entropy(weights: list[Tensor]) -> list[float]:
    """Mean entropy (nats) of each layer's attention distributions, over heads, queries and the batch."""
    return [float(-(w * w.clamp_min(1e-12).log()).sum(-1).mean()) for w in weights]
