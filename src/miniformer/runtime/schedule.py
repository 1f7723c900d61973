"""The learning-rate schedules every training loop here follows (ours and the cross-check's peer)."""

from __future__ import annotations

import math

# cosine: linear warm-up, then a cosine decay to min_lr at the last step (the default study's budgets).
# wsd: warm-up, a stable phase at lr, then a linear cool-down to min_lr over the last `cooldown_frac` of the steps
# (Hägele et al. 2024): along the stable phase the rate does not shrink, so a curve that flattens there has flattened
# because the model stopped learning, not because the rate did; the trend of an effect is read on that phase.
SCHEDULES = ("cosine", "wsd")


def decay_start(cfg) -> int:
    """The step from which the rate decays toward min_lr: after the warm-up (cosine), or at the cool-down (wsd)."""
    if cfg.schedule == "wsd":
        return max(cfg.warmup, cfg.steps - round(cfg.cooldown_frac * cfg.steps))
    return cfg.warmup


def lr_at(step: int, cfg) -> float:
    """Linear warm-up to lr, then the schedule's decay to min_lr at the last step."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    start = decay_start(cfg)
    if cfg.schedule == "wsd":
        if step < start:
            return cfg.lr
        return cfg.lr + (cfg.min_lr - cfg.lr) * min(1.0, (step - start) / max(1, cfg.steps - start))
    progress = (step - start) / max(1, cfg.steps - start)
    return cfg.min_lr + 0.5 * (cfg.lr - cfg.min_lr) * (1 + math.cos(math.pi * min(1.0, progress)))
