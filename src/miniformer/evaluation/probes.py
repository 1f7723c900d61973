"""The probes `evaluate` runs, in the order their values appear in eval.json."""

from __future__ import annotations

from collections.abc import Callable

from miniformer.evaluation import attention, finetune, generations, losses, order, probe, role_swap, uniformity
from miniformer.evaluation.subject import Measured, Subject

PROBES: tuple[Callable[[Subject], Measured], ...] = (
    losses.split_losses,
    losses.length_sweep,
    attention.head_stats,
    order.order_sensitivity,
    order.minimal_pairs,
    uniformity.uniformity,
    probe.shared_probe,
    attention.probe_line_maps,
    generations.generations,
    role_swap.role_swap,
    finetune.finetune,  # last: it trains a copy of the model, the others read the original
)
