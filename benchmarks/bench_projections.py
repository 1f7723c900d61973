"""Separate q/k/v projections (what the model ships, the names LoRA targets) vs one fused C -> 3C GEMM, on CPU.

The fused contender concatenates the three weights and runs one matrix multiply, as single-file GPTs do with their
``c_attn``; everything after the projection is shared. Two instances of the baseline swap roles every trial (on this
box one instance can run a few percent faster than an identical one), medians reported.
Usage: python benchmarks/bench_projections.py [--threads 2] [--trials 6] [--rounds 5] [--steps 4]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_step import print_ab, swapped_ab  # noqa: E402

from miniformer.network.attention import SelfAttention  # noqa: E402


def fused_project(self: SelfAttention, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The three projections as one GEMM over the concatenated weights, split afterwards."""
    projections = (self.q_proj, self.k_proj, self.v_proj)
    weight = torch.cat([p.weight for p in projections])
    bias = None if self.q_proj.bias is None else torch.cat([p.bias for p in projections])
    parts = F.linear(x, weight, bias).split(self.n_embd, dim=2)
    return parts[self.role[0]], parts[self.role[1]], parts[self.role[2]] if self.value_proj else x


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--trials", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds per trial")
    ap.add_argument("--steps", type=int, default=4, help="training steps per timing")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"The baseline's whole training step, {args.threads} threads: fused qkv GEMM vs separate projections.\n")
    results = swapped_ab(SelfAttention, "project", fused_project, args.trials, args.rounds, args.steps)
    # (off, on) = (separate, fused); the table shows the speed of separate over fused
    print_ab([(t_fused, t_separate) for t_separate, t_fused in results], "fused", "separate")


if __name__ == "__main__":
    main()
