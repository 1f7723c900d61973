"""After a Snakemake run: make DVC's record (dvc.lock) match exactly the stages whose jobs ran.

Snakemake jobs append their DVC stage name to a 'ran' file; this commits those stages, in DAG order, and nothing else.
This runs on Snakemake's success, when every output exists (an experiment's `run` stage covers all of its
seeds, trained and evaluated).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

STAGE_ORDER = ("check_params", "prepare", "run@", "aggregate", "init_probe", "report")


def stages_ran(ran_file: Path) -> list[str]:
    if not ran_file.exists():
        return []
    names = {line.strip() for line in ran_file.read_text().splitlines() if line.strip()}
    return sorted(names, key=lambda n: next(i for i, p in enumerate(STAGE_ORDER) if n.startswith(p)))


def commit_together(names: list[str]) -> None:
    """What `dvc commit -f NAME...` does, with dvc.lock read and written once instead of once per stage.

    The command commits its targets one at a time, and each re-reads and re-writes the whole lock file (thousands of
    lines of params): 35 stages of the smoke study took 45 s, longer than all its training. Here every stage is
    collected from one index, saved (its deps, params and outs hashed) and committed to the cache in DAG order, and
    the lock file is written once.
    """
    from dvc.repo import Repo

    with Repo() as repo, repo.lock:
        by_name = {stage.addressing: stage for stage in repo.index.stages}
        missing = [name for name in names if name not in by_name]
        if missing:
            raise KeyError(f"not stages of dvc.yaml: {' '.join(missing)}")
        stages = [by_name[name] for name in names]
        for stage in stages:
            stage.save()
            stage.commit()
        for path in dict.fromkeys(stage.dvcfile.path for stage in stages):
            group = [stage for stage in stages if stage.dvcfile.path == path]
            group[0].dvcfile.dump_stages(group, update_pipeline=False)


def record(ran_file: Path) -> list[str]:
    """Commit to DVC the stages that ran; returns them. No-op outside a DVC+git project."""
    stages = stages_ran(ran_file)
    if not stages or not Path(".dvc").is_dir() or not Path(".git").exists():
        ran_file.unlink(missing_ok=True)
        return []
    try:
        commit_together(stages)
    except Exception as e:  # noqa: BLE001 — DVC's own command below reports what is wrong in its words
        print(f"dvc-record: committing together failed ({type(e).__name__}: {e}); committing stage by stage",
              file=sys.stderr)
    else:
        ran_file.unlink(missing_ok=True)
        return stages
    dvc = shutil.which("dvc") or str(Path(sys.executable).with_name("dvc"))
    done = subprocess.run([dvc, "commit", "-f", "-q", *stages], capture_output=True, text=True)
    if done.returncode != 0:
        said = " ".join((done.stderr + done.stdout).split()) or "DVC gave no reason"
        busy = "lock" in said.lower()  # `dvc repro` (or another dvc command) running beside Snakemake holds it
        why = ("another DVC command holds its lock (a `dvc repro` running?)" if busy else said[-300:])
        print(f"dvc-record: the stages Snakemake ran ({' '.join(stages)}) are not recorded in DVC yet: {why}; run "
              f"`miniformer dvc-record` again once it is free (they stay listed in {ran_file})", file=sys.stderr)
        return []
    ran_file.unlink(missing_ok=True)
    return stages
