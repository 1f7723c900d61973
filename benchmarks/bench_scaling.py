"""How the study's time grows with experiments × seeds: DAG planning measured, training extrapolated.

For 1×, 3× and 10× the default experiment set (copies of every experiment under new names) this measures Snakemake's
dry-run planning time in a scratch copy of the project, and extrapolates training time from a measured per-step cost
of each experiment's model (--step-ms, or measured here with a few steps).
Usage: python benchmarks/bench_scaling.py [--cores 2]
"""

from __future__ import annotations

import argparse
import copy
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_step import alternate, miniformer_contender  # noqa: E402

from miniformer.params import Study  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def planning_seconds(params: dict, workdir: Path) -> float:
    for f in ("Snakefile", "params.yaml"):
        shutil.copy(ROOT / f, workdir / f)
    shutil.copytree(ROOT / "workflow", workdir / "workflow", dirs_exist_ok=True)
    shutil.copytree(ROOT / "profiles", workdir / "profiles", dirs_exist_ok=True)
    (workdir / "params.yaml").write_text(yaml.safe_dump(params))
    snakemake = Path(sys.executable).with_name("snakemake")
    t = time.perf_counter()
    subprocess.run([str(snakemake), "-n", "--nolock", "--quiet", "all"], cwd=workdir, check=True,
                   capture_output=True, env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    args = ap.parse_args()
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw["profile"] = "default"
    study = Study(raw)
    step_s = {}
    for exp in study.experiments:  # per-step cost of each model, 1 thread (jobs run side by side on the cores)
        import torch

        torch.set_num_threads(1)
        cfg = study.config(exp, 0)
        c, _ = miniformer_contender(exp, cfg)
        step_s[exp] = alternate([c], 1, args.steps)[exp]
    steps = study.config("baseline", 0).train.steps
    one_x = sum(step_s[e] * steps for e, _ in study.runs())
    print("| experiment set | runs | DAG planning (s, measured) | training (min, extrapolated, "
          f"{args.cores} jobs side by side) |")
    print("|---|---|---|---|")
    for factor in (1, 3, 10):
        scaled = copy.deepcopy(raw)
        for k in range(1, factor):
            for name, spec in raw["experiments"].items():
                if name != "baseline":
                    scaled["experiments"][f"{name}_copy{k}"] = copy.deepcopy(spec)
        runs = len(Study(scaled).runs())
        with tempfile.TemporaryDirectory() as d:
            plan = planning_seconds(scaled, Path(d))
        train_min = (one_x * runs / len(study.runs())) / args.cores / 60
        print(f"| {factor}× | {runs} | {plan:.1f} | {train_min:.0f} |")


if __name__ == "__main__":
    main()
