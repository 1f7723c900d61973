"""Divergence: a finding to record (the step and the cause), never an exception. Loss spikes: runtime/spikes.py."""

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
