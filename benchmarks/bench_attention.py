"""Causal attention for training: SDPA vs the hand-written `attention.CausalAttention`, forward + backward.

Both get the same q, k, v (B, H, T, D) and output gradient; contenders alternate, medians are reported, over a grid
of heads × window lengths at the baseline's width. The table shows where the explicit kernel wins (its scores fit in
cache) and where SDPA's flash kernel does; `attention.EXPLICIT_MAX_SCORES` is the crossover the model uses.
Usage: python benchmarks/bench_attention.py [--threads 2] [--rounds 7] [--batch 32] [--width 128]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import torch
import torch.nn.functional as F

from miniformer.attention import EXPLICIT_MAX_SCORES, EXPLICIT_MIN_THREADS, CausalAttention

GRID = [(4, 32), (1, 128), (2, 128), (4, 128), (8, 128), (16, 128), (4, 256), (4, 512)]  # (heads, T)


def time_pair(B: int, H: int, T: int, D: int, rounds: int) -> tuple[float, float]:
    q, k, v = (torch.randn(B, H, T, D, requires_grad=True) for _ in range(3))
    grad_out = torch.randn(B, H, T, D)
    scale = 1.0 / math.sqrt(D)

    def sdpa() -> None:
        F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(grad_out)

    def explicit() -> None:
        CausalAttention.apply(q, k, v, scale).backward(grad_out)

    def timed(fn, n: int = 5) -> float:
        t = time.perf_counter()
        for _ in range(n):
            q.grad = k.grad = v.grad = None
            fn()
        return (time.perf_counter() - t) / n

    for fn in (sdpa, explicit):
        timed(fn, 2)
    samples: dict[str, list[float]] = {"sdpa": [], "explicit": []}
    for _ in range(rounds):
        samples["sdpa"].append(timed(sdpa))
        samples["explicit"].append(timed(explicit))
    return statistics.median(samples["sdpa"]), statistics.median(samples["explicit"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--width", type=int, default=128)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    B = args.batch
    print(f"Causal attention forward + backward, B={B}, width {args.width}, {args.threads} threads, "
          f"median of {args.rounds} alternating rounds; the model uses the explicit kernel when B·H·T² ≤ "
          f"{EXPLICIT_MAX_SCORES:,} and torch has ≥ {EXPLICIT_MIN_THREADS} threads.\n")
    print("| heads | T | head dim | B·H·T² | SDPA (ms) | explicit (ms) | explicit speed × SDPA | model uses |")
    print("|---|---|---|---|---|---|---|---|")
    for H, T in GRID:
        D = args.width // H
        sdpa, explicit = time_pair(B, H, T, D, args.rounds)
        scores = B * H * T * T
        used = "explicit" if scores <= EXPLICIT_MAX_SCORES and args.threads >= EXPLICIT_MIN_THREADS else "SDPA"
        print(f"| {H} | {T} | {D} | {scores:,} | {sdpa * 1e3:.2f} | {explicit * 1e3:.2f} | {sdpa / explicit:.2f} "
              f"| {used} |")


if __name__ == "__main__":
    main()
