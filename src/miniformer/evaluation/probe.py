"""The shared probe: one score every objective can be given — recover a hidden token of a held-out line — plus the
continuation loss of left-to-right models."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import torch
import torch.nn.functional as F

from miniformer.evaluation.subject import Measured, Probe, Subject


def probe_items(s: Subject) -> list[tuple[list[int], int]]:
    """Held-out lines, each with one hidden position: the same items for every run."""
    lines = [ln[: max(0, s.T - 4)] for ln in s.held_out_lines]  # cut to fit a tiny model's block
    rng = random.Random(0)
    rng.shuffle(lines)
    out = []
    for ln in lines:
        ids, dropped = s.tok.encode_lossy(ln)
        if not dropped and len(ids) >= 8:
            out.append((ids, rng.randrange(2, len(ids) - 2)))
        if len(out) == s.run.eval.probe_items:
            break
    return out


def continuation_loss(s: Subject, ids: list[int]) -> float | None:
    """Loss on the second half of a line given the first (None: the objective does not read left to right)."""
    if not s.objective.left_to_right:
        return None
    half = len(ids) // 2
    x = torch.tensor([ids[:-1]], device=s.device)
    y = torch.tensor(ids[1:], device=s.device)
    logits = s.model(x, attn_mask=s.objective.context_mask(len(ids) - 1, half, s.device))["logits"][0]
    return float(F.cross_entropy(logits[half - 1 :], y[half - 1 :]))


@torch.no_grad()
def shared_probe(s: Subject) -> Measured:
    """Per-item outcomes go to windows.json, so the report can put an interval on the accuracy and compare two runs
    item by item."""
    if not s.run.eval.probe:
        return Measured({})
    items = probe_items(s)
    outcomes, in_candidates, cont_losses = [], [], []
    for ids, i in items:
        pred, proposed = s.objective.recover(s.model, ids, i, s.specials)
        outcomes.append(int(pred == ids[i]))
        in_candidates.append(proposed)
        cont = continuation_loss(s, ids)
        if cont is not None:
            cont_losses.append(cont)
    known = [c for c in in_candidates if c is not None]
    hidden = Counter(ids[i] for ids, i in items)
    return Measured({"probe": {
        "recovery_accuracy": float(np.mean(outcomes)) if outcomes else None,
        "recovery_items": len(items),
        # the floor: always guessing the commonest hidden character (a model that learned nothing scores this)
        "constant_guess": hidden.most_common(1)[0][1] / len(items) if items else None,
        "candidate_recall": float(np.mean(known)) if known else None,
        "continuation_loss": float(np.mean(cont_losses)) if cont_losses else None,
        "continuation_note": None if cont_losses else f"not defined for the {s.objective.name} objective",
    }}, {"probe": outcomes})


def probe_scalars(ev: dict) -> dict:
    probe = ev.get("probe", {})
    return {"recovery_accuracy": probe.get("recovery_accuracy"), "probe_constant_guess": probe.get("constant_guess"),
            "probe_candidate_recall": probe.get("candidate_recall"),
            "continuation_loss": probe.get("continuation_loss")}


PROBES = (Probe(shared_probe, probe_scalars, order=80),)
