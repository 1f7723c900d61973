"""RoPE's cost: one layer's q/k split + rotation in isolation, and the whole training step, at the seed config.

1. In isolation, forward + backward (alternating, medians): the split alone (no rotation: what learned/none positions
   pay), the textbook rotate-half written with autograd ops (miniformer's first implementation), rotated copies of q
   and k from one hand-written Function, the in-place rotation of a later hand-written Function (both kept here to be
   measured), and what the model uses: one complex multiply per q and k, differentiated by autograd.
The whole-step comparison of the in-place Function is gone with the fused projection it rotated: the model now
projects q, k and v separately and rotates q and k with ``Rotary.rotary``'s function, which is what "used" times here.
Usage: python benchmarks/bench_rope.py [--threads 2] [--rounds 9]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from torch import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_step import alternate_timed  # noqa: E402

from miniformer.network.positions import Rotary, apply_rotary, complex_pairs  # noqa: E402

B, T, H, D = 32, 128, 4, 32
C = H * D


def rotate_half(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """The autograd version: (first half, second half) pairs, as GPT-NeoX writes it."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


class RotatedCopies(torch.autograd.Function):
    """The previous implementation: new rotated q, k (B, T, H, D), v a view; gradients written into a new qkv grad."""

    @staticmethod
    def forward(ctx, qkv: Tensor, rot: Tensor, roles: tuple[int, int, int], n_head: int):  # type: ignore[override]
        B_, T_, C3 = qkv.shape
        parts = qkv.view(B_, T_, 3, n_head, C3 // (3 * n_head))
        q, k = (torch.view_as_real(complex_pairs(parts[:, :, i]) * rot).flatten(-2) for i in roles[:2])
        ctx.save_for_backward(rot)
        ctx.roles, ctx.shape = roles, parts.shape
        return q, k, parts[:, :, roles[2]]

    @staticmethod
    def backward(ctx, grad_q: Tensor, grad_k: Tensor, grad_v: Tensor):  # type: ignore[override]
        (rot,) = ctx.saved_tensors
        grad = grad_q.new_empty(ctx.shape)
        for slot, g in zip(ctx.roles[:2], (grad_q, grad_k)):
            torch.mul(complex_pairs(g), rot.conj(), out=complex_pairs(grad[:, :, slot]))
        grad[:, :, ctx.roles[2]] = grad_v
        return grad.view(ctx.shape[0], ctx.shape[1], -1), None, None, None


class RotateQK(torch.autograd.Function):
    """The previous implementation: rotate the query and key thirds of the fused (B, T, 3C) projection in place, and
    the gradient likewise in the backward; kept here to be measured against the plain autograd rotation."""

    @staticmethod
    def forward(ctx, qkv: Tensor, rot: Tensor, slots: tuple[int, int], n_head: int):  # type: ignore[override]
        _rotate_slots(qkv, rot, slots, n_head)
        ctx.mark_dirty(qkv)
        ctx.save_for_backward(rot)
        ctx.slots, ctx.n_head = slots, n_head
        return qkv

    @staticmethod
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        # A rotation's transpose is the rotation by the opposite angle: multiply by the conjugate. The gradient is
        # the fresh concatenation that the split's backward built for this Function alone, so it is rotated in place.
        (rot,) = ctx.saved_tensors
        grad = grad.contiguous()  # a no-op for the concatenation; a copy only if autograd ever hands us another layout
        _rotate_slots(grad, rot.conj(), ctx.slots, ctx.n_head)
        return grad, None, None, None


def _rotate_slots(qkv: Tensor, rot: Tensor, slots: tuple[int, int], n_head: int) -> None:
    """Multiply the channel pairs of the given thirds of qkv (B, T, 3C) by rot (T, H, D/2), in place."""
    B, T, C3 = qkv.shape
    parts = qkv.view(B, T, 3, n_head, C3 // (3 * n_head))
    for slot in slots:
        part = parts[:, :, slot]
        if qkv.dtype in (torch.float32, torch.float64):  # view_as_complex raises rather than copies: truly in place
            torch.view_as_complex(part.unflatten(-1, (-1, 2))).mul_(rot)
        else:  # bf16/fp16 under autocast: no complex view; rotate in fp32, store back
            part.copy_(apply_rotary(part, rot))


def in_place_hook(rope: Rotary, T_: int, device: torch.device, start: int = 0):
    rot = rope.rotations(start + T_, device)[start:, None, :].expand(-1, rope.n_head, -1).contiguous()

    def split_rotate(qkv: Tensor, roles: tuple[int, int, int]):
        batch, length, width3 = qkv.shape
        parts = RotateQK.apply(qkv, rot, roles[:2], rope.n_head).split(width3 // 3, dim=2)
        return tuple(parts[i].view(batch, length, rope.n_head, rope.head_dim) for i in roles)

    return split_rotate


def rotated_copies_hook(rope: Rotary, T_: int, device: torch.device, start: int = 0):
    rot = rope.rotations(start + T_, device)[start:, None, :].expand(-1, rope.n_head, -1).contiguous()
    return lambda qkv, roles: RotatedCopies.apply(qkv, rot, roles, rope.n_head)


def isolation(rounds: int) -> None:
    qkv = torch.randn(B, T, 3 * C, requires_grad=True)
    grads = [torch.randn(B, H, T, D) for _ in range(3)]
    rope = Rotary(D, H)
    cpu = torch.device("cpu")
    plain, in_place, copies = rope.rotary(T, cpu), in_place_hook(rope, T, cpu), rotated_copies_hook(rope, T, cpu)
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
        "rotated copies (hand-written, previous)": lambda p: [t.transpose(1, 2) for t in copies(p, (0, 1, 2))],
        "in place (hand-written, previous)": lambda p: [t.transpose(1, 2) for t in in_place(p, (0, 1, 2))],
        "complex multiply, autograd (used)": lambda p: used(p),
    }

    def used(projected: Tensor) -> list[Tensor]:
        q, k, v = (t.view(B, T, H, D) for t in projected.split(C, dim=2))
        return [t.transpose(1, 2) for t in (*plain(q, k), v)]

    def timed(fn, n: int = 20) -> float:
        t = time.perf_counter()
        for _ in range(n):
            torch.autograd.backward(fn(qkv * 1), grads)
        return (time.perf_counter() - t) / n

    med = alternate_timed({name: (lambda fn=fn: timed(fn)) for name, fn in contenders.items()}, rounds)
    base = med["split only (no rotation)"]
    print("| q/k split + rotation, one layer, fwd+bwd | median ms | over split only (ms) |")
    print("|---|---|---|")
    for name, m in med.items():
        print(f"| {name} | {m * 1e3:.2f} | {(m - base) * 1e3:+.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"RoPE at B={B} T={T} H={H} D={D}, {args.threads} threads.\n")
    isolation(args.rounds)


if __name__ == "__main__":
    main()
