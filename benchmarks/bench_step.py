"""Training-step speed: miniformer vs the single-file-GPT reference, in one process, alternating, medians.

Usage: python benchmarks/bench_step.py [--trials 3] [--rounds 5] [--steps 10] [--threads 2] [--variants] [--device cuda]
Prints a Markdown section (date, commit, ratios, MFU vs a same-process GEMM, per-variant throughput, per-job
overhead) for benchmarks/RESULTS.md. Every trial builds fresh instances of miniformer's baseline, the reference, a
second reference (the noise floor) and the same-architecture reference (RoPE), and alternates them. On CUDA all run
under bf16 autocast (as the gpu profile trains) and the GEMM rate is a bf16 one; on CPU everything is fp32.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference_gpt import RefGPT  # noqa: E402

from miniformer.network.flops import flops_per_token  # noqa: E402
from miniformer.network.model import MiniFormer  # noqa: E402
from miniformer.network.objectives import OBJECTIVES  # noqa: E402
from miniformer.params import RunConfig, Study  # noqa: E402
from miniformer.runtime.optim import make_optimizer  # noqa: E402
from miniformer.training.trainer import build_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
VOCAB = 81  # the default corpus' characters
B, T = 32, 128
DEVICE = torch.device("cpu")  # set by --device


def sync() -> None:
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def gemm_flops(threads: int, n: int = 1024, reps: int = 20) -> float:
    torch.set_num_threads(threads)
    dtype = torch.bfloat16 if DEVICE.type == "cuda" else torch.float32
    n = n * 4 if DEVICE.type == "cuda" else n
    a, b = torch.randn(n, n, device=DEVICE, dtype=dtype), torch.randn(n, n, device=DEVICE, dtype=dtype)
    for _ in range(3):
        a @ b
    sync()
    t = time.perf_counter()
    for _ in range(reps):
        a @ b
    sync()
    return 2 * n**3 * reps / (time.perf_counter() - t)


def autocast():
    return torch.autocast(DEVICE.type, dtype=torch.bfloat16, enabled=DEVICE.type == "cuda")


class Contender:
    """A model + its optimizer + one fixed batch; ``step_time(n)`` = mean seconds of n full training steps."""

    def __init__(self, name: str, model: torch.nn.Module, loss_fn, opt: torch.optim.Optimizer) -> None:
        self.name, self.model, self.loss_fn, self.opt = name, model, loss_fn, opt

    def step_time(self, n: int) -> float:
        sync()
        t = time.perf_counter()
        for _ in range(n):
            with autocast():
                loss = self.loss_fn()
            self.opt.zero_grad()  # ours sets grads to None; torch.optim.AdamW defaults to it
            loss.backward()
            self.opt.step()
        sync()
        return (time.perf_counter() - t) / n


def miniformer_contender(name: str, run: RunConfig) -> tuple[Contender, MiniFormer]:
    """The model and the optimizer exactly as the trainer builds them for ``run``."""
    torch.manual_seed(0)
    model, specials = build_model(run, VOCAB)
    model.to(DEVICE)
    objective = run.train.objective
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, VOCAB, (B, OBJECTIVES[objective].window_length(model.cfg.block_size)), generator=g)
    batch = OBJECTIVES[objective].batch(tokens, specials, g)
    x, y = batch.x.to(DEVICE), batch.y.to(DEVICE)
    mask = None if batch.mask is None else batch.mask.to(DEVICE)
    opt = make_optimizer(model, run.train, DEVICE)
    return Contender(name, model, lambda: model(x, y, attn_mask=mask)["loss"], opt), model


def reference_contender(name: str = "reference", rope: bool = False) -> Contender:
    """The bar, with PyTorch's default AdamW as the single-file GPTs use it; ``rope``: the same-architecture variant."""
    torch.manual_seed(0)
    model = RefGPT(VOCAB, T, 4, 4, 128, rope=rope).to(DEVICE)
    tokens = torch.randint(0, VOCAB, (B, T + 1), device=DEVICE)
    x, y = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    return Contender(name, model, lambda: model(x, y), torch.optim.AdamW(model.parameters(), lr=1e-3))


def alternate_timed(timers: dict[str, Callable[[], float]], rounds: int) -> dict[str, float]:
    """Median of each timer's seconds over ``rounds`` rounds that call them in turn, after one warm-up call each."""
    for timer in timers.values():
        timer()
    samples: dict[str, list[float]] = {name: [] for name in timers}
    for _ in range(rounds):
        for name, timer in timers.items():
            samples[name].append(timer())
    return {name: statistics.median(v) for name, v in samples.items()}


def alternate(contenders: list[Contender], rounds: int, steps: int) -> dict[str, float]:
    return alternate_timed({c.name: (lambda c=c: c.step_time(steps)) for c in contenders}, rounds)


def swapped_ab(owner: type, method: str, alternative: Callable, trials: int, rounds: int, steps: int = 4
               ) -> list[tuple[float, float]]:
    """The baseline's step with ``owner.method`` as shipped vs replaced by ``alternative``: (off, on) seconds per trial.

    Two instances of the baseline alternate, one with the alternative switched on before each of its steps, and swap
    roles every trial: on this box one instance can run a few percent faster than an identical one, so a single
    pairing would measure the instances, not the variant. ``owner.method`` is restored afterwards.
    """
    shipped = getattr(owner, method)
    use_alternative = {"on": False}

    def dispatch(*args, **kwargs):
        return (alternative if use_alternative["on"] else shipped)(*args, **kwargs)

    def with_switch(c: Contender, on: bool) -> Contender:
        def loss() -> torch.Tensor:
            use_alternative["on"] = on
            return c.loss_fn()
        return Contender("on" if on else "off", c.model, loss, c.opt)

    run = Study.load(ROOT / "params.yaml", "default").config("baseline", 0)
    instances = [miniformer_contender(name, run)[0] for name in ("X", "Y")]
    setattr(owner, method, dispatch)
    try:
        results = []
        for trial in range(trials):
            first_on = trial % 2 == 0
            pair = [with_switch(instances[0], first_on), with_switch(instances[1], not first_on)]
            med = alternate(pair, rounds, steps)
            results.append((med["off"], med["on"]))
    finally:
        setattr(owner, method, shipped)
    return results


def print_ab(results: list[tuple[float, float]], off: str, on: str) -> None:
    print(f"| trial | step, {off} (ms) | step, {on} (ms) | speed {on} × {off} |")
    print("|---|---|---|---|")
    for i, (t_off, t_on) in enumerate(results):
        print(f"| {i} | {t_off * 1e3:.1f} | {t_on * 1e3:.1f} | {t_off / t_on:.3f} |")
    ratios = [t_off / t_on for t_off, t_on in results]
    print(f"\nMedian over {len(ratios)} instance-swapped trials: **{statistics.median(ratios):.3f}×** "
          f"(range {min(ratios):.3f}–{max(ratios):.3f}).\n")


def job_overhead(trials: int = 3) -> dict[str, float]:
    """What every job pays before training: a Python process importing the CLI and the model stack."""
    def timed(cmd: list[str]) -> float:
        samples = []
        for _ in range(trials):
            t = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT)
            samples.append(time.perf_counter() - t)
        return statistics.median(samples)

    return {
        "python -c pass": timed([sys.executable, "-c", "pass"]),
        "import torch": timed([sys.executable, "-c", "import torch"]),
        "miniformer --help": timed([sys.executable, "-m", "miniformer", "--help"]),
        "import train stack (torch, dvclive, tokenizers)": timed(
            [sys.executable, "-c", "import miniformer.stages.train, dvclive, tokenizers"]),
        # torch.optim wraps its methods in torch._disable_dynamo, whose first call imports torch._dynamo
        "import torch + torch.optim.AdamW, one step (imports torch._dynamo)": timed(
            [sys.executable, "-c", FIRST_STEP.format(optimizer="torch.optim.AdamW")]),
        "import torch + miniformer's AdamW, one step (the same kernels, no torch._dynamo)": timed(
            [sys.executable, "-c", FIRST_STEP.format(optimizer="miniformer.runtime.optim.AdamW")]),
    }


# one fused update of one parameter, in a fresh interpreter
FIRST_STEP = ("import torch, miniformer.runtime.optim; p = torch.nn.Parameter(torch.zeros(1)); p.grad = torch.ones(1); "
              "{optimizer}([{{'params': [p]}}], lr=0.1, fused=True).step()")


def device_line() -> str:
    if DEVICE.type == "cuda":
        return f"{torch.cuda.get_device_name(DEVICE)}, bf16 autocast"
    return f"CPU, {torch.get_num_threads()} threads, fp32"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--overhead-trials", type=int, default=3, help="fresh interpreters per per-job overhead row")
    ap.add_argument("--variants", action="store_true", help="also time every experiment's model of params.yaml")
    ap.add_argument("--device", default="cpu", help="cpu | cuda (bf16 autocast for both contenders)")
    args = ap.parse_args()
    global DEVICE
    DEVICE = torch.device(args.device)
    torch.set_num_threads(args.threads)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    print(f"## Run of {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, commit {commit.stdout.strip()}, "
          f"torch {torch.__version__}, {device_line()}, B={B} T={T}\n")

    study = Study.load(ROOT / "params.yaml", "default")
    # Fresh instances every trial (one instance can run a few percent faster than an identical one on this box), and
    # a second reference in each: the reference against itself is the trial's noise floor. "reference, RoPE" is the
    # same reference with miniformer's baseline architecture (RoPE instead of learned positions), written LLaMA-style.
    trials: list[dict[str, float]] = []
    gemms: list[float] = []
    for _ in range(args.trials):
        ours, model = miniformer_contender("miniformer", study.config("baseline", 0))
        contenders = [reference_contender(), ours, reference_contender("twin"),
                      reference_contender("reference, RoPE", rope=True)]
        gemms.append(gemm_flops(args.threads))
        torch.set_num_threads(args.threads)
        trials.append(alternate(contenders, args.rounds, args.steps))
    gemm = statistics.median(gemms)
    fpt = flops_per_token(model)
    names = ("reference", "reference, RoPE", "miniformer")
    med = {name: statistics.median(t[name] for t in trials) for name in names}
    print("| contender | median step (ms) | tokens/s | FLOPs/step (G) | MFU vs GEMM |")
    print("|---|---|---|---|---|")
    for name, s in med.items():
        print(f"| {name} | {s * 1e3:.1f} | {B * T / s:,.0f} | {fpt * B * T / 1e9:.2f} | {fpt * B * T / s / gemm:.2f} |")

    def per_trial(a: str, b: str) -> list[float]:
        return [t[a] / t[b] for t in trials]

    def listed(ratios: list[float]) -> str:
        return ", ".join(f"{r:.3f}" for r in ratios)

    ratios, rope_ratios, floors = (per_trial("reference", "miniformer"), per_trial("reference, RoPE", "miniformer"),
                                   per_trial("reference", "twin"))
    print(f"\nSpeed ratio miniformer / reference = **{statistics.median(ratios):.3f}×**, median of {args.trials} "
          f"trials, each {args.rounds} alternating rounds of {args.steps} steps on fresh instances: {listed(ratios)}. "
          f"Noise floor, the reference against a second instance of itself: {listed(floors)}. "
          f"Against the same architecture (reference, RoPE): **{statistics.median(rope_ratios):.3f}×** "
          f"({listed(rope_ratios)}). Same-process GEMM ({'bf16 4096³' if DEVICE.type == 'cuda' else 'fp32 1024³'}, "
          f"median of the trials): {gemm / 1e9:.0f} GFLOP/s. FLOPs counted by "
          f"`miniformer.network.flops` (same shapes).\n")

    if args.variants:
        # Each variant alternates with the baseline model: the ratio is robust to the box's drift, the times are not.
        # The "baseline" row pairs the baseline with a second instance of itself: the table's noise floor.
        print("| experiment | median step (ms) | tokens/s | speed × baseline (paired) |")
        print("|---|---|---|---|")
        for exp in study.experiments:
            c, _ = miniformer_contender(exp, study.config(exp, 0))
            pair = alternate([ours, c], max(2, args.rounds // 2), args.steps)
            print(f"| {exp} | {pair[exp] * 1e3:.1f} | {B * T / pair[exp]:,.0f} | {pair[ours.name] / pair[exp]:.2f} |")
        print()

    print(f"| per-job overhead (median of {args.overhead_trials}) | seconds |")
    print("|---|---|")
    for k, v in job_overhead(args.overhead_trials).items():
        print(f"| {k} | {v:.2f} |")


if __name__ == "__main__":
    main()
