"""The learning-rate schedules every training loop here follows (ours and the cross-check's peer)."""

from __future__ import annotations

import math

# The schedules' names are the config's vocabulary (params.SCHEDULES, validated there); what each does is below.


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
