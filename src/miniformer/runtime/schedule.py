"""The learning-rate schedule every training loop here follows (ours and the cross-check's peer)."""

from __future__ import annotations

import math


def lr_at(step: int, cfg) -> float:
    """Linear warm-up to lr, then cosine decay to min_lr at the last step."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.min_lr + 0.5 * (cfg.lr - cfg.min_lr) * (1 + math.cos(math.pi * min(1.0, progress)))
