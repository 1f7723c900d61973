"""Where a finished Snakemake study's time went, from Snakemake's own job records (.snakemake/metadata).

Prints the wall time (first job start to last job end), job-seconds per rule, evaluation's share of all job time, and
the per-job time a training job spent outside its training loop (process start, imports, data, checkpoints), from
each run's perf.json. Usage: python benchmarks/study_time.py [PROJECT_DIR]
"""

from __future__ import annotations

import base64
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def jobs(project: Path) -> dict[int, dict]:
    """One record per job (Snakemake writes one metadata file per output file of the job)."""
    found: dict[int, dict] = {}
    for f in (project / ".snakemake" / "metadata").iterdir():
        rec = json.loads(f.read_text())
        if rec.get("starttime") and rec.get("endtime"):
            rec["output"] = base64.b64decode(f.name).decode()
            found.setdefault(rec["job_hash"], rec)
    return found


def outside_step_loop(project: Path, recs: list[dict]) -> list[float]:
    """Per training job (a `run` job, which also evaluates; `train` in studies before the two were one job): its wall
    time minus the seconds its perf.json spent inside the step loop."""
    out = []
    for r in recs:
        perf = project / Path(r["output"]).parent / "perf.json"
        if r["rule"] in ("run", "train") and perf.exists():
            out.append(r["endtime"] - r["starttime"] - json.loads(perf.read_text())["train_seconds"])
    return out


def main() -> None:
    project = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    recs = list(jobs(project).values())
    wall = max(r["endtime"] for r in recs) - min(r["starttime"] for r in recs)
    per_rule: dict[str, list[float]] = defaultdict(list)
    for r in recs:
        per_rule[r["rule"]].append(r["endtime"] - r["starttime"])
    total = sum(sum(v) for v in per_rule.values())
    print(f"Wall time (first job start → last job end): {wall / 60:.1f} min; {len(recs)} jobs, "
          f"{total / 60:.1f} job-minutes.\n")
    print("| rule | jobs | job-minutes | share of job time | median job (s) |")
    print("|---|---|---|---|---|")
    for rule, v in sorted(per_rule.items(), key=lambda kv: -sum(kv[1])):
        print(f"| {rule} | {len(v)} | {sum(v) / 60:.1f} | {sum(v) / total:.1%} | {statistics.median(v):.1f} |")
    outside = outside_step_loop(project, recs)
    if outside:
        print(f"\nRun jobs outside their step loop (process start, imports, val estimates, samples, checkpoints, and "
              f"in `run` jobs the evaluation): "
              f"median {statistics.median(outside):.1f} s, total {sum(outside) / 60:.1f} job-minutes over "
              f"{len(outside)} jobs.")


if __name__ == "__main__":
    main()
