"""Dong et al. 2021's mechanism where it lives: at initialisation. Pure attention loses rank doubly exponentially with
depth, for any weights; residual connections stop it. Measured on freshly initialised models of growing depth, with
and without the skip connections — the same weights both ways (same seed: the skip has no parameters) — on random
tokens, so no training and no data are involved."""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor

from miniformer.evaluation.uniformity import mean_pairwise_cosine
from miniformer.network.model import MiniFormer, ModelConfig

DEPTHS = (1, 2, 4, 8)
INITS = 16  # random initialisations per depth and variant
BATCH = 4


def rank_one_residual(h: Tensor) -> float:
    """Dong's res(X): ‖X − 1·x̄ᵀ‖ / ‖X‖ per sequence (x̄ the mean state), averaged: 0 when every position holds the
    same state (rank collapse), larger the more the states differ."""
    h = h.float()
    centred = h - h.mean(dim=1, keepdim=True)
    return float((centred.flatten(1).norm(dim=1) / h.flatten(1).norm(dim=1).clamp_min(1e-12)).mean())


@torch.no_grad()
def uniformity_at_init(cfg: ModelConfig, depths: tuple[int, ...] = DEPTHS, inits: int = INITS) -> dict:
    """{"depths", "inits", "with_residual" / "without_residual": {"cosine", "residual"}: one list per depth, one
    value per init}."""
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, cfg.vocab_size, (BATCH, cfg.block_size), generator=g)
    out: dict = {"depths": list(depths), "inits": inits}
    for name, residual in (("with_residual", True), ("without_residual", False)):
        cos, res = [], []
        for depth in depths:
            per_init = []
            for seed in range(inits):
                torch.manual_seed(seed)
                model = MiniFormer(dataclasses.replace(cfg, n_layer=depth, residual=residual, dropout=0.0)).eval()
                h = model(tokens, return_hidden=True)["hidden"]
                per_init.append((mean_pairwise_cosine(h), rank_one_residual(h)))
            cos.append([c for c, _ in per_init])
            res.append([r for _, r in per_init])
        out[name] = {"cosine": cos, "residual": res}
    return out
