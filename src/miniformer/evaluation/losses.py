"""Held-out losses: per split, with the causal mask restored for the no-mask breakage, and at each length multiple."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from miniformer.evaluation.subject import Measured, Probe, Subject
from miniformer.layout import loss_at_key, past_block_key
from miniformer.network.attention import make_causal_mask
from miniformer.network.positions import POSITIONS
from miniformer.runtime.scoring import BATCH, mean_loss, window_losses, windows

PER_POSITION_BINS = 32


@torch.no_grad()
def split_loss(s: Subject, split: str, causal_override: bool = False) -> tuple[float, dict]:
    """Mean loss over every target token of a split (random masks from a fixed seed for MLM/span), and its
    per-window sums and counts (the report's intervals)."""
    tokens = windows(s.data.splits[split], s.objective.window_length(s.T), s.run.eval.split_tokens or None)
    mask = make_causal_mask(tokens.size(1) - 1) if causal_override else None
    sums, counts = window_losses(s.model, tokens, s.objective, s.specials, s.device, mask)
    return mean_loss(sums, counts), {"sum": sums.round(4).tolist(), "count": counts.tolist()}


def split_losses(s: Subject) -> Measured:
    val, val_windows = split_loss(s, "val")
    test, _ = split_loss(s, "test")
    out = Measured({"val_loss": val, "test_loss": test}, {"val": val_windows})
    if s.objective.uses_model_mask and not s.run.model.causal:  # the no-mask breakage, scored with the mask back
        out.values["val_loss_with_causal_mask"], out.samples["val_with_causal_mask"] = split_loss(s, "val", True)
    return out


def length_sweep(s: Subject) -> Measured:
    """Causal loss and per-position loss at m × block_size for each m, where the position method and the objective
    define one."""
    out, per_length = {}, {}
    for m in s.run.eval.length_multiples:
        L = m * s.T
        reason = POSITIONS[s.run.model.pos].undefined_past_block
        if reason and L > s.T:
            out[str(m)] = {"applicable": False, "reason": reason}
        elif not s.objective.left_to_right:
            out[str(m)] = {"applicable": False, "reason": f"{s.objective.name} is not a left-to-right objective"}
        else:
            out[str(m)], per_length[str(m)] = loss_at_length(s, m)
    return Measured({"lengths": out}, {"lengths": per_length} if per_length else {})


@torch.no_grad()
def loss_at_length(s: Subject, m: int) -> tuple[dict, list[float]]:
    L = m * s.T
    tokens = windows(s.data.splits["val"], L + 1, s.run.eval.max_tokens, stride=L)
    pos_sum, per_window = torch.zeros(L), []
    step = max(1, BATCH // m)
    for i in range(0, len(tokens), step):
        chunk = tokens[i : i + step].to(s.device)
        logits = s.model(chunk[:, :-1])["logits"]
        nll = F.cross_entropy(logits.flatten(0, 1), chunk[:, 1:].flatten(), reduction="none")
        nll = nll.view(chunk.size(0), L).float().cpu()
        pos_sum += nll.sum(0)
        per_window.extend(nll.mean(1).tolist())
    per_pos = (pos_sum / len(tokens)).tolist()
    bins = np.array_split(np.array(per_pos), min(PER_POSITION_BINS * m // max(s.run.eval.length_multiples), L))
    return {
        "applicable": True,
        "loss": float(np.mean(per_pos)),
        "loss_beyond_block": float(np.mean(per_pos[s.T :])) if L > s.T else None,
        "per_position": [float(b.mean()) for b in bins],
        "windows": len(tokens),
    }, [round(v, 4) for v in per_window]


def split_scalars(ev: dict) -> dict:
    out = {"val_loss": ev.get("val_loss"), "test_loss": ev.get("test_loss")}
    if "val_loss_with_causal_mask" in ev:
        out["val_loss_with_causal_mask"] = ev["val_loss_with_causal_mask"]
    return out


def length_scalars(ev: dict) -> dict:
    """The loss at each multiple of block_size, and past the block beyond 1× (None where the method has none)."""
    out = {}
    for m, r in ev.get("lengths", {}).items():
        out[loss_at_key(m)] = r.get("loss") if r.get("applicable") else None
        if int(m) > 1:
            out[past_block_key(m)] = r.get("loss_beyond_block") if r.get("applicable") else None
    return out


PROBES = (Probe(split_losses, split_scalars, order=10), Probe(length_sweep, length_scalars, order=20))
