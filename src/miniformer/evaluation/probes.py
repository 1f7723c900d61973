"""The probes `evaluate` runs, in the order their values appear in eval.json, each with the numbers of its values
that metrics.json carries."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from miniformer.evaluation import (
    attention,
    finetune,
    generations,
    losses,
    order,
    position_table,
    probe,
    role_swap,
    uniformity,
)
from miniformer.evaluation.subject import Measured, Subject


@dataclass(frozen=True)
class Probe:
    """A probe, and its scalars: its eval.json values as flat numbers for metrics.json (what `dvc metrics diff`
    compares and the report's claims read). A key is there even when the probe did not apply (None), so every run of
    a study has the same keys."""

    measure: Callable[[Subject], Measured]
    scalars: Callable[[dict], dict]


PROBES: tuple[Probe, ...] = (
    Probe(losses.split_losses, losses.split_scalars),
    Probe(losses.length_sweep, losses.length_scalars),
    Probe(attention.head_stats, attention.head_scalars),
    Probe(order.order_sensitivity, order.sensitivity_scalars),
    Probe(order.minimal_pairs, order.minimal_pair_scalars),
    Probe(uniformity.uniformity, uniformity.uniformity_scalars),
    Probe(position_table.table_motion, position_table.table_motion_scalars),
    Probe(probe.shared_probe, probe.probe_scalars),
    Probe(attention.probe_line_maps, attention.line_map_scalars),
    Probe(generations.generations, generations.generation_scalars),
    Probe(role_swap.role_swap, role_swap.role_swap_scalars),
    Probe(finetune.finetune, finetune.finetune_scalars),  # last: it trains a copy of the model, the others read it
)
