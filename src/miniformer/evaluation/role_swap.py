"""What the learned Q/K/V roles are worth: the trained model scored with two roles swapped in every layer.

Training with the roles permuted (`qkv_order`) is a relabelling and must tie (the three projections are drawn as one
matrix with one init). Swapping them in a model already trained asks the other question: does each projection
now do a job the others cannot? Only for runs with `eval.role_swap`, and only where the model's own mask applies."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from miniformer.evaluation.subject import Measured, Probe, Reading, Subject
from miniformer.runtime.scoring import mean_loss, window_losses, windows

# name -> the new (query, key, value) as positions in the old (query, key, value)
SWAPS = {"intact": (0, 1, 2), "swap_qk": (1, 0, 2), "swap_qv": (2, 1, 0), "swap_kv": (0, 2, 1)}
SWAP_TOKENS = 16384  # val tokens per variant: the same windows for each, so differences are paired


@contextmanager
def roles_permuted(model: torch.nn.Module, order: tuple[int, int, int]) -> Iterator[None]:
    """Every attention layer reads its projections with roles permuted by ``order``; restored on exit."""
    layers = [block.attn for block in model.blocks]
    saved = [attn.role for attn in layers]
    try:
        for attn, role in zip(layers, saved):
            attn.role = tuple(role[i] for i in order)
        yield
    finally:
        for attn, role in zip(layers, saved):
            attn.role = role


@torch.no_grad()
def role_swap(s: Subject) -> Measured:
    if not s.run.eval.role_swap or not s.objective.uses_model_mask:
        return Measured({})
    tokens = windows(s.data.splits["val"], s.objective.window_length(s.T), SWAP_TOKENS)
    values, samples = {}, {}
    for name, order in SWAPS.items():
        with roles_permuted(s.model, order):
            sums, counts = window_losses(s.model, tokens, s.objective, s.specials, s.device)
        values[name] = mean_loss(sums, counts)
        samples[name] = {"sum": sums.round(4).tolist(), "count": counts.tolist()}
    return Measured({"role_swap": values}, {"role_swap": samples})


def role_swap_scalars(ev: dict) -> dict:
    return {f"role_swap_{name}": ev.get("role_swap", {}).get(name) for name in SWAPS}


PROBES = (Probe(role_swap, role_swap_scalars, order=110,
                title="Roles swapped in the trained model (runs with eval.role_swap): val loss",
                readings=(Reading("intact", "role_swap_intact"), Reading("Q ↔ K", "role_swap_swap_qk"),
                          Reading("Q ↔ V", "role_swap_swap_qv"), Reading("K ↔ V", "role_swap_swap_kv"))),)
