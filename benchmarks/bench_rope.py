"""RoPE's cost: one layer's q/k split + rotation in isolation, and the whole training step, at the seed config.

1. In isolation, forward + backward (alternating, medians): the split alone (no rotation: what learned/none positions
   pay), the textbook rotate-half written with autograd ops (miniformer's first implementation), the hand-written
   `positions.SplitRotate` the model uses (rotated copies of q and k, gradients written into the qkv gradient), and a
   rotation in place inside qkv (measured, not adopted).
2. The baseline's training step with SplitRotate vs in place (two model instances swapping roles every trial).
Usage: python benchmarks/bench_rope.py [--threads 2] [--rounds 9] [--trials 6]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_step import ROOT, print_ab, swapped_ab  # noqa: E402

from miniformer.params import Study  # noqa: E402
from miniformer.positions import Rotary  # noqa: E402

B, T, H, D = 32, 128, 4, 32
C = H * D


def rotate_half(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """The autograd version: (first half, second half) pairs, as GPT-NeoX writes it."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


class RotateInPlace(torch.autograd.Function):
    """Measured, not adopted: rotate the q and k thirds of qkv in place (and the gradient in place), then split."""

    @staticmethod
    def forward(ctx, qkv: Tensor, rot: Tensor, slots: tuple[int, int], n_head: int):  # type: ignore[override]
        rotate_slots(qkv, rot, slots, n_head)
        ctx.mark_dirty(qkv)
        ctx.save_for_backward(rot)
        ctx.slots, ctx.n_head = slots, n_head
        return qkv

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        (rot,) = ctx.saved_tensors
        rotate_slots(grad, rot.conj(), ctx.slots, ctx.n_head)  # the split's fresh concatenation, ours alone
        return grad, None, None, None


def rotate_slots(qkv: Tensor, rot: Tensor, slots: tuple[int, int], n_head: int) -> None:
    parts = qkv.view(qkv.size(0), qkv.size(1), 3, n_head, -1)
    for slot in slots:
        torch.view_as_complex(parts[:, :, slot].unflatten(-1, (-1, 2))).mul_(rot)  # raises rather than copies


def in_place_hook(rope: Rotary, T_: int, device: torch.device, start: int = 0):
    rot = rope.rotations(start + T_, device)[start:, None, :].expand(-1, rope.n_head, -1).contiguous()

    def split_rotate(qkv: Tensor, roles: tuple[int, int, int]) -> tuple[Tensor, ...]:
        B_, T2, C3 = qkv.shape
        parts = RotateInPlace.apply(qkv, rot, roles[:2], rope.n_head).split(C3 // 3, dim=2)
        return tuple(parts[i].view(B_, T2, rope.n_head, -1) for i in roles)

    return split_rotate


def isolation(rounds: int) -> None:
    qkv = torch.randn(B, T, 3 * C, requires_grad=True)
    grads = [torch.randn(B, H, T, D) for _ in range(3)]
    rope = Rotary(D, H)
    cpu = torch.device("cpu")
    fused, in_place = rope.rotary(T, cpu), in_place_hook(rope, T, cpu)
    angles = torch.outer(torch.arange(T).float(), rope.inv_freq)
    cos, sin = angles.cos(), angles.sin()

    # Every contender starts from the same non-leaf (as the projection's output is): in place needs one.
    def views(projected: Tensor) -> list[Tensor]:
        return [t.view(B, T, H, D).transpose(1, 2) for t in projected.split(C, dim=2)]

    def autograd_rotate_half(projected: Tensor) -> list[Tensor]:
        q, k, v = views(projected)
        return [rotate_half(q, cos, sin), rotate_half(k, cos, sin), v]

    contenders = {
        "split only (no rotation)": views,
        "rotate-half, autograd": autograd_rotate_half,
        "SplitRotate (rotated copies, used)": lambda p: [t.transpose(1, 2) for t in fused(p, (0, 1, 2))],
        "in place (not adopted)": lambda p: [t.transpose(1, 2) for t in in_place(p, (0, 1, 2))],
    }

    def timed(fn, n: int = 20) -> float:
        t = time.perf_counter()
        for _ in range(n):
            torch.autograd.backward(fn(qkv * 1), grads)
        return (time.perf_counter() - t) / n

    for fn in contenders.values():
        timed(fn, 3)
    samples: dict[str, list[float]] = {k: [] for k in contenders}
    for _ in range(rounds):
        for k, fn in contenders.items():
            samples[k].append(timed(fn))
    base = statistics.median(samples["split only (no rotation)"])
    print("| q/k split + rotation, one layer, fwd+bwd | median ms | over split only (ms) |")
    print("|---|---|---|")
    for k, v in samples.items():
        m = statistics.median(v)
        print(f"| {k} | {m * 1e3:.2f} | {(m - base) * 1e3:+.2f} |")


def step_ab(trials: int, rounds: int) -> None:
    use_in_place = {"on": False}
    used = Rotary.rotary

    def rotary(self: Rotary, T_: int, device: torch.device, start: int = 0):
        return (in_place_hook if use_in_place["on"] else used)(self, T_, device, start)

    Rotary.rotary = rotary  # type: ignore[method-assign]
    try:
        cfg = Study.load(ROOT / "params.yaml", "default").config("baseline", 0)
        results = swapped_ab(cfg, lambda on: use_in_place.update(on=on), trials, rounds)
    finally:
        Rotary.rotary = used  # type: ignore[method-assign]
    print_ab(results, "SplitRotate", "in place")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--trials", type=int, default=6)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"RoPE at B={B} T={T} H={H} D={D}, {args.threads} threads.\n")
    isolation(args.rounds)
    print("\nThe baseline's whole training step, SplitRotate (used) vs in place:\n")
    step_ab(args.trials, 5)


if __name__ == "__main__":
    main()
