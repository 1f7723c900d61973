"""RoPE's cost in isolation: one layer's q/k split + rotation, forward and backward, at the seed config's shapes.

Contenders (alternating, medians): the split alone (no rotation: what learned/none positions pay), the textbook
rotate-half written with autograd ops (miniformer's first implementation), and the fused `SplitRotate` the model uses
(one complex multiply per tensor each way, gradients written straight into the qkv gradient).
Usage: python benchmarks/bench_rope.py [--threads 2] [--rounds 9]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from miniformer.positions import Rotary

B, T, H, D = 32, 128, 4, 32
C = H * D


def rotate_half(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """The autograd version: (first half, second half) pairs, as GPT-NeoX writes it."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    qkv = torch.randn(B, T, 3 * C, requires_grad=True)
    grads = [torch.randn(B, H, T, D) for _ in range(3)]
    rope = Rotary(D, H)
    split_rotate = rope.rotary(T, torch.device("cpu"))
    angles = torch.outer(torch.arange(T).float(), rope.inv_freq)
    cos, sin = angles.cos(), angles.sin()

    def views() -> list[torch.Tensor]:
        return [t.view(B, T, H, D).transpose(1, 2) for t in qkv.split(C, dim=2)]

    def split_only() -> list[torch.Tensor]:
        return views()

    def autograd_rotate_half() -> list[torch.Tensor]:
        q, k, v = views()
        return [rotate_half(q, cos, sin), rotate_half(k, cos, sin), v]

    def fused() -> list[torch.Tensor]:
        return [t.transpose(1, 2) for t in split_rotate(qkv, (0, 1, 2))]

    contenders = {"split only (no rotation)": split_only, "rotate-half, autograd": autograd_rotate_half,
                  "SplitRotate (fused, used)": fused}

    def timed(fn, n: int = 20) -> float:
        t = time.perf_counter()
        for _ in range(n):
            torch.autograd.backward(fn(), grads)
        return (time.perf_counter() - t) / n

    for fn in contenders.values():
        timed(fn, 3)
    samples: dict[str, list[float]] = {k: [] for k in contenders}
    for _ in range(args.rounds):
        for k, fn in contenders.items():
            samples[k].append(timed(fn))
    base = statistics.median(samples["split only (no rotation)"])
    print(f"| q/k split + rotation, one layer, fwd+bwd ({args.threads} threads) | median ms | over split only (ms) |")
    print("|---|---|---|")
    for k, v in samples.items():
        m = statistics.median(v)
        print(f"| {k} | {m * 1e3:.2f} | {(m - base) * 1e3:+.2f} |")


if __name__ == "__main__":
    main()
