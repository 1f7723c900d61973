"""What one Snakemake job of the smoke study costs beyond its work: seconds to its first training step, and the whole
`python -m miniformer run` process, against `python -c "import torch"` in the same run (the floor no job can go under).

Each trial trains the smoke profile's baseline (seed 0) into a fresh results folder, on token files prepared once in a
temporary folder. Usage: python benchmarks/job_startup.py [--trials N]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# the job's own command, with Trainer.train_step wrapped to print the seconds since the interpreter started
FIRST_STEP = """
import sys, time, runpy
import miniformer.training.trainer as trainer
step, t0 = trainer.Trainer.train_step, float(sys.argv[1])
def first(self):
    if not getattr(first, "seen", False):
        first.seen = True
        print(f"FIRST_STEP {time.time() - t0:.3f}", file=sys.stderr, flush=True)
    return step(self)
trainer.Trainer.train_step = first
sys.argv = ["miniformer", *sys.argv[2:]]
runpy.run_module("miniformer", run_name="__main__")
"""


def seconds(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT)
    return time.perf_counter() - t


def first_step(job: list[str]) -> float:
    done = subprocess.run([sys.executable, "-c", FIRST_STEP, repr(time.time()), *job], check=True,
                          capture_output=True, text=True, cwd=ROOT)
    return float(next(line.split()[1] for line in done.stderr.splitlines() if line.startswith("FIRST_STEP")))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--trials", type=int, default=5)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="job_startup_"))
    data, common = tmp / "data", ["--profile", "smoke"]
    subprocess.run([sys.executable, "-m", "miniformer", "prepare", *common, "--out", str(data)], check=True,
                   capture_output=True, cwd=ROOT)

    def job(i: int) -> list[str]:
        return ["run", "baseline", "--seed", "0", *common, "--data", str(data), "--results", str(tmp / f"r{i}")]

    rows: dict[str, list[float]] = {"python -c 'import torch' (the floor)": [], "to the first training step": [],
                                    "the whole run job (train 20 steps, evaluate)": []}
    for i in range(args.trials):  # alternated, so a busy moment of the box spreads over all three
        rows["python -c 'import torch' (the floor)"].append(seconds([sys.executable, "-c", "import torch"]))
        rows["to the first training step"].append(first_step(job(2 * i)))
        rows["the whole run job (train 20 steps, evaluate)"].append(seconds([sys.executable, "-m", "miniformer",
                                                                             *job(2 * i + 1)]))
    shutil.rmtree(tmp)
    floor = statistics.median(rows["python -c 'import torch' (the floor)"])
    print(f"| a smoke job (median of {args.trials}) | seconds | × import torch |\n|---|---|---|")
    for name, values in rows.items():
        print(f"| {name} | {statistics.median(values):.2f} | {statistics.median(values) / floor:.2f} |")


if __name__ == "__main__":
    main()
