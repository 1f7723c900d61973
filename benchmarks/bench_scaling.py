"""How the study's time grows with experiments × seeds: DAG planning measured, training extrapolated.

For 1×, 3× and 10× the default experiment set (copies of every experiment under new names) this measures Snakemake's
dry-run planning time in a scratch copy of the project, and extrapolates the study's time from each experiment's
measured per-step cost (1 thread, a few steps here). With --study DIR (a finished default study) it adds what a run
costs besides its steps, measured there: the median training job's time outside its step loop and the median
evaluation job.
Usage: python benchmarks/bench_scaling.py [--cores 2] [--study DIR]
"""

from __future__ import annotations

import argparse
import copy
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_step import alternate, miniformer_contender  # noqa: E402
from study_time import jobs, outside_step_loop  # noqa: E402

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
    ap.add_argument("--factors", type=int, nargs="+", default=[1, 3, 10], help="experiment sets, × the default's")
    ap.add_argument("--study", type=Path, default=None, help="a finished default study, for per-run overheads")
    args = ap.parse_args()
    extra_s, extra_note = 0.0, "steps only"
    if args.study:
        recs = list(jobs(args.study).values())
        evals = [r["endtime"] - r["starttime"] for r in recs if r["rule"] == "evaluate"]  # before `run` jobs
        outside = outside_step_loop(args.study, recs)
        extra_s = statistics.median(outside) + (statistics.median(evals) if evals else 0.0)
        extra_note = (f"steps + {statistics.median(outside):.0f} s per run job outside its step loop"
                      + (f" + {statistics.median(evals):.0f} s per evaluation job" if evals else "")
                      + f", medians of {args.study.name}")
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
    # a sweep point (baseline/lr=0.01) costs its experiment's step, for its own number of steps
    one_x = sum(step_s[study.parent(e)] * study.config(e, s).train.steps + extra_s for e, s in study.runs())
    print(f"Extrapolated from: {extra_note}; {args.cores} jobs side by side, no contention.\n")
    print("| experiment set | runs | DAG planning (s, measured) | study incl. planning (min, extrapolated) |")
    print("|---|---|---|---|")
    for factor in args.factors:
        scaled = copy.deepcopy(raw)
        for k in range(1, factor):
            for name, spec in raw["experiments"].items():
                if name != "baseline":
                    scaled["experiments"][f"{name}_copy{k}"] = copy.deepcopy(spec)
        runs = len(Study(scaled).runs())
        with tempfile.TemporaryDirectory() as d:
            plan = planning_seconds(scaled, Path(d))
        study_min = (plan + one_x * runs / len(study.runs()) / args.cores) / 60  # planning included
        print(f"| {factor}× | {runs} | {plan:.1f} | {study_min:.0f} |")


if __name__ == "__main__":
    main()
