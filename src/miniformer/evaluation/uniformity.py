"""Token uniformity of the last block's hidden states (Dong 2021: without residuals they collapse towards 1)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from miniformer.evaluation.subject import Measured, Probe, Subject
from miniformer.runtime.scoring import windows


def mean_pairwise_cosine(h: Tensor) -> float:
    """Mean cosine similarity between different positions' states within a sequence (1 = all alike), over the batch."""
    h = F.normalize(h.float(), dim=-1)
    sim = h @ h.transpose(1, 2)
    T = sim.size(1)
    off_diag = sim.sum((1, 2)) - sim.diagonal(dim1=1, dim2=2).sum(1)
    return float((off_diag / (T * (T - 1))).mean())


@torch.no_grad()
def uniformity(s: Subject) -> Measured:
    """Mean pairwise cosine similarity of the last block's token states on held-out windows."""
    tokens = windows(s.data.splits["val"], s.T + 1)[:8]
    h = s.model(tokens[:, :-1].to(s.device), return_hidden=True)["hidden"]
    return Measured({"hidden_uniformity": mean_pairwise_cosine(h)})


def uniformity_scalars(ev: dict) -> dict:
    return {"hidden_uniformity": ev.get("hidden_uniformity")}


PROBES = (Probe(uniformity, uniformity_scalars, order=60),)
