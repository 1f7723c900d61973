"""An idea measured and not adopted: an explicit causal attention with a hand-written backward, vs SDPA, on CPU.

The kernel keeps the softmax probabilities P and uses the closed-form gradient dS = P ⊙ (dP − rowsum(dO ⊙ O))
(FlashAttention's identity), where SDPA's CPU flash kernel recomputes the scores in its backward but skips the masked
half. Two measurements, contenders alternating, medians:
1. the attention alone, forward + backward, over a grid of heads × window lengths at the baseline's width;
2. the baseline's whole training step with the kernel swapped in vs SDPA — two model instances swap roles every trial,
   because on this box one instance can run a few percent faster than an identical one.
Usage: python benchmarks/bench_attention.py [--threads 2] [--rounds 7] [--trials 6] [--step-rounds 5] [--steps 4]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_step import alternate_timed, print_ab, swapped_ab  # noqa: E402

from miniformer.network.attention import SelfAttention  # noqa: E402

GRID = [(4, 32), (1, 128), (2, 128), (4, 128), (8, 128), (16, 128), (4, 256)]  # (heads, T) at B 32, width 128


class ExplicitCausal(torch.autograd.Function):
    """softmax(QKᵀ·scale + causal mask) V for q, k, v (B, H, T, D); backward written out by hand, P kept."""

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor, scale: float) -> Tensor:  # type: ignore[override]
        B, H, T, D = q.shape
        qf, kf, vf = (t.reshape(B * H, T, D) for t in (q, k, v))
        future = torch.full((T, T), float("-inf"), dtype=q.dtype).triu_(1)
        probs = torch.softmax(torch.baddbmm(future, qf, kf.transpose(1, 2), alpha=scale), dim=-1)
        out = torch.bmm(probs, vf)
        ctx.save_for_backward(qf, kf, vf, probs, out)
        ctx.scale = scale
        return out.view(B, H, T, D)

    @staticmethod
    def backward(ctx, grad_out: Tensor):  # type: ignore[override]
        qf, kf, vf, probs, out = ctx.saved_tensors
        g = grad_out.reshape(out.shape)
        grad_v = torch.bmm(probs.transpose(1, 2), g)
        g_scaled = g * ctx.scale
        grad_scores = torch.bmm(g_scaled, vf.transpose(1, 2)).sub_((g_scaled * out).sum(-1, keepdim=True)).mul_(probs)
        shape = grad_out.shape
        return (torch.bmm(grad_scores, kf).view(shape), torch.bmm(grad_scores.transpose(1, 2), qf).view(shape),
                grad_v.view(shape), None)


def check_equal_to_sdpa() -> None:
    q, k, v = (torch.randn(2, 3, 9, 8, dtype=torch.float64, requires_grad=True) for _ in range(3))
    g = torch.randn(2, 3, 9, 8, dtype=torch.float64)
    ours = ExplicitCausal.apply(q, k, v, 8**-0.5)
    sdpa = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(ours, sdpa)
    for a, b in zip(torch.autograd.grad(ours, (q, k, v), g), torch.autograd.grad(sdpa, (q, k, v), g)):
        torch.testing.assert_close(a, b)


def time_cell(H: int, T: int, D: int, rounds: int, batch: int) -> tuple[float, float]:
    """Median fwd+bwd seconds of SDPA and of the explicit kernel on one (B, H, T, D) shape."""
    q, k, v = (torch.randn(batch, H, T, D, requires_grad=True) for _ in range(3))
    grad_out = torch.randn(batch, H, T, D)
    contenders = {"sdpa": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                  "explicit": lambda: ExplicitCausal.apply(q, k, v, 1.0 / math.sqrt(D))}

    def timed(fn, n: int = 5) -> float:
        t = time.perf_counter()
        for _ in range(n):
            q.grad = k.grad = v.grad = None
            fn().backward(grad_out)
        return (time.perf_counter() - t) / n

    med = alternate_timed({name: (lambda fn=fn: timed(fn)) for name, fn in contenders.items()}, rounds)
    return med["sdpa"], med["explicit"]


def kernel_grid(rounds: int, batch: int = 32, width: int = 128) -> None:
    print("| heads | T | B·H·T² | SDPA fwd+bwd (ms) | explicit (ms) | explicit speed × SDPA |")
    print("|---|---|---|---|---|---|")
    for H, T in GRID:
        sdpa, explicit = time_cell(H, T, width // H, rounds, batch)
        scores = batch * H * T * T
        print(f"| {H} | {T} | {scores:,} | {sdpa * 1e3:.2f} | {explicit * 1e3:.2f} | {sdpa / explicit:.2f} |")


SDPA_PATH = SelfAttention._sdpa  # as shipped, captured before swapped_ab patches it


def explicit_causal_path(self: SelfAttention, q, k, v, mask, score_bias, is_causal_hint):
    """SelfAttention._sdpa with the explicit kernel serving the plain causal case."""
    if score_bias is None and is_causal_hint:
        return ExplicitCausal.apply(q, k, v, 1.0 / math.sqrt(q.size(-1)) if self.scale else 1.0)
    return SDPA_PATH(self, q, k, v, mask, score_bias, is_causal_hint)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--trials", type=int, default=6)
    ap.add_argument("--step-rounds", type=int, default=5, help="alternating rounds per trial of the training step")
    ap.add_argument("--steps", type=int, default=4, help="training steps per timing")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    check_equal_to_sdpa()
    print(f"Explicit causal attention vs SDPA, {args.threads} threads, B=32, width 128 (median of {args.rounds} "
          "alternating rounds; the explicit kernel equals SDPA's output and gradients, checked first).\n")
    kernel_grid(args.rounds)
    if args.trials:
        print("\nThe baseline's whole training step, SDPA vs the explicit kernel swapped in:\n")
        results = swapped_ab(SelfAttention, "_sdpa", explicit_causal_path, args.trials, args.step_rounds, args.steps)
        print_ab(results, "SDPA", "explicit kernel")


if __name__ == "__main__":
    main()
