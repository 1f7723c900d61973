"""The probes `evaluate` runs: every evaluation module's ``PROBES``, in the order they declare (their values' order in
eval.json), and what the rest of the study reads from those declarations — the files the workflow declares beside
eval.json, the keys every run's metrics.json has. A new probe is a module in this package and nothing else: no list
here to edit."""

from __future__ import annotations

import importlib
import pkgutil

from miniformer import evaluation
from miniformer.errors import UserError
from miniformer.evaluation.subject import Probe, Reading

# The numbers a training's metrics.json gives every run, before the probes' scalars.
TRAINING_SCALARS = ("final_train_loss", "diverged", "divergence_step", "loss_spikes", "n_params")


def discover() -> tuple[Probe, ...]:
    """Every ``PROBES`` entry of the modules in miniformer.evaluation, by ``order``; refused in one line, naming both
    probes, where two share an order (their eval.json order would depend on file names) or a file name."""
    found: list[Probe] = []
    for module in pkgutil.iter_modules(evaluation.__path__):
        if module.name != __name__.rpartition(".")[2]:  # this module's PROBES is what it finds, not a declaration
            found += getattr(importlib.import_module(f"{evaluation.__name__}.{module.name}"), "PROBES", ())
    for what, held in (("order", [(p.order, p) for p in found]), ("file", [(f, p) for p in found for f in p.files])):
        values = [v for v, _ in held]
        twice = sorted({v for v in values if values.count(v) > 1}, key=str)
        if twice:
            holders = " and ".join(p.name for v, p in held if v == twice[0])
            taken = ", ".join(str(v) for v in sorted(set(values)))
            raise UserError(f"two probes declare the same {what} {twice[0]!r} ({holders}): give each its own "
                            f"(taken: {taken})")
    return tuple(sorted(found, key=lambda p: p.order))


PROBES: tuple[Probe, ...] = discover()
# the JSON files probes write beside eval.json and windows.json (the workflow's outputs of every run job)
PROBE_FILES: tuple[str, ...] = tuple(f for p in PROBES for f in p.files)
# the probes whose readings the report shows in a table of their own
REPORTED: tuple[Probe, ...] = tuple(p for p in PROBES if p.readings)

__all__ = ["PROBES", "PROBE_FILES", "REPORTED", "TRAINING_SCALARS", "Probe", "Reading", "discover"]
