"""How far training moved a learned position table, against how far it moved the token table.

Adam moves a stored coordinate by about the learning rate per step, whatever its scale. A table added raw at unit
scale (the vaswani init's learned positions) therefore moves a few tenths of its initial spread in 300 steps at
lr 2e-3, while the token table — stored at 1/√C and multiplied by √C — moves √C times further in the same steps. Both
are read in the scale they enter the model at, relative to their initial spread, so a reader sees whether the
learned-positions arm is still mostly its random draw.
"""

from __future__ import annotations

import torch
from torch import Tensor

from miniformer.evaluation.subject import Measured, Probe, Subject
from miniformer.network.model import MiniFormer


def relative_move(trained: Tensor, initial: Tensor) -> float:
    """RMS of the change over the RMS of the initial table (1 = moved as far as it started out spread)."""
    return float((trained - initial).pow(2).mean().sqrt() / initial.pow(2).mean().sqrt())


@torch.no_grad()
def table_motion(s: Subject) -> Measured:
    """For our learned-positions models: the initial tables again (the trainer seeds torch with the run's seed just
    before it builds the model, so the same draws come back), and how far each table moved from them."""
    model = s.model
    if not isinstance(model, MiniFormer) or not hasattr(model.position, "wpe"):
        return Measured({})
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(s.run.seed)
        initial = MiniFormer(model.cfg)
    return Measured({"table_motion": {
        "position": relative_move(model.position.wpe.weight.cpu(), initial.position.wpe.weight),
        "token": relative_move(model.wte.weight.cpu(), initial.wte.weight),
        "position_rms": float(model.position.wpe.weight.pow(2).mean().sqrt() * model.pos_scale),
        "token_rms": float(model.wte.weight.pow(2).mean().sqrt() * model.embed_scale),
    }})


def table_motion_scalars(ev: dict) -> dict:
    motion = ev.get("table_motion", {})
    return {"position_table_moved": motion.get("position"), "token_table_moved": motion.get("token")}


PROBES = (Probe(table_motion, table_motion_scalars, order=70),)
