"""Divergence and loss spikes: findings to record, never exceptions."""

from __future__ import annotations

import math


def divergence_at(step: int, loss: float, grad_norm: float, first_loss: float | None, factor: float) -> dict | None:
    """Why training stops at ``step`` (non-finite loss or gradient, or loss above factor × the first), or None."""
    if not math.isfinite(loss):
        return {"step": step, "reason": f"non-finite loss ({loss})"}
    if not math.isfinite(grad_norm):
        return {"step": step, "reason": f"non-finite gradient norm ({grad_norm})"}
    if first_loss is not None and loss > factor * first_loss:
        return {"step": step, "reason": f"loss blow-up: {loss:.3f} > {factor} x first loss {first_loss:.3f}"}
    return None


def count_spikes(losses: list[float], factor: float = 1.5) -> int:
    """Logged train losses more than ``factor`` × the running minimum so far: how often training jumped back up."""
    spikes, best = 0, math.inf
    for loss in losses:
        if loss is None or not math.isfinite(loss):
            continue
        if loss > factor * best:
            spikes += 1
        best = min(best, loss)
    return spikes
