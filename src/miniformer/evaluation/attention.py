"""Attention statistics: entropy per layer, head diversity, and the maps drawn on the probe line."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from miniformer.evaluation.subject import Measured, Probe, Subject
from miniformer.runtime.scoring import attention_entropy, windows


def js_divergence(p: Tensor, q: Tensor) -> float:
    """Jensen-Shannon divergence (nats) between two stacks of attention distributions over the last dim."""
    m = 0.5 * (p + q)

    def kl(a: Tensor, b: Tensor) -> Tensor:
        return (a * (a.clamp_min(1e-12).log() - b.clamp_min(1e-12).log())).sum(-1)

    return float((0.5 * kl(p, m) + 0.5 * kl(q, m)).mean())


@torch.no_grad()
def head_stats(s: Subject) -> Measured:
    """Entropy per layer and head diversity: mean pairwise Jensen-Shannon divergence between heads' maps."""
    tokens = windows(s.data.splits["val"], s.objective.window_length(s.T), 8 * s.T)[:8]
    b = s.objective.batch(tokens, s.specials, torch.Generator().manual_seed(0))
    mask = None if b.mask is None else b.mask.to(s.device)
    weights = s.model(b.x.to(s.device), attn_mask=mask, return_weights=True)["weights"]
    diversities = []
    for w in weights:  # (B, H, T, T)
        H = w.size(1)
        if H < 2:
            continue
        pairs = [(i, j) for i in range(H) for j in range(i + 1, H)]
        diversities.append(float(np.mean([js_divergence(w[:, i], w[:, j]) for i, j in pairs])))
    return Measured({"attention_entropy": attention_entropy(weights),
                     "head_diversity": float(np.mean(diversities)) if diversities else None})


@torch.no_grad()
def probe_line_maps(s: Subject) -> Measured:
    """Every layer's and head's map on the probe line, each model drawn as it reads (attention.json), and whether
    any weight falls above the diagonal (a causal model's must all be zero)."""
    ids, dropped = s.tok.encode_lossy(s.run.eval.probe_line)
    if len(ids) < 2:  # the probe line is in another script than the corpus: draw a held-out line instead
        lines = s.test_lines() or [s.tok.decode(s.data.splits["test"][: s.T].tolist())]
        ids, dropped = s.tok.encode_lossy(lines[0])
    ids = ids[: s.T]
    x = torch.tensor([ids], device=s.device)
    weights = s.model(x, attn_mask=s.objective.reading_mask(len(ids), s.device), return_weights=True)["weights"]
    w = torch.stack([wl[0] for wl in weights]).float().cpu()  # (L, H, T, T)
    upper = w.triu(1)
    maps = {"tokens": [s.tok.decode([i]) for i in ids], "dropped_characters": dropped, "weights": w.tolist(),
            "upper_triangle_max": float(upper.abs().max()), "upper_triangle_zero": bool((upper == 0).all())}
    return Measured({"attention_upper_triangle_zero": maps["upper_triangle_zero"],
                     "attention_upper_triangle_max": maps["upper_triangle_max"]}, files={"attention.json": maps})


def head_scalars(ev: dict) -> dict:
    entropy = ev.get("attention_entropy") or []
    return {"head_diversity": ev.get("head_diversity"),
            "attention_entropy": sum(entropy) / len(entropy) if entropy else None}


def line_map_scalars(ev: dict) -> dict:
    return {"upper_triangle_zero": ev.get("attention_upper_triangle_zero")}


PROBES = (Probe(head_stats, head_scalars, order=30),
          Probe(probe_line_maps, line_map_scalars, order=90, files=("attention.json",)))
