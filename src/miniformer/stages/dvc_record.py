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

STAGE_ORDER = ("prepare", "run@", "aggregate", "init_probe", "report")


def stages_ran(ran_file: Path) -> list[str]:
    if not ran_file.exists():
        return []
    names = {line.strip() for line in ran_file.read_text().splitlines() if line.strip()}
    return sorted(names, key=lambda n: next(i for i, p in enumerate(STAGE_ORDER) if n.startswith(p)))


def record(ran_file: Path) -> list[str]:
    """Run `dvc commit -f` on the stages that ran; returns them. No-op outside a DVC+git project."""
    stages = stages_ran(ran_file)
    if not stages or not Path(".dvc").is_dir() or not Path(".git").exists():
        ran_file.unlink(missing_ok=True)
        return []
    dvc = shutil.which("dvc") or str(Path(sys.executable).with_name("dvc"))
    done = subprocess.run([dvc, "commit", "-f", "-q", *stages], capture_output=True, text=True)
    if done.returncode != 0:
        print(f"dvc commit of {' '.join(stages)} failed: {done.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
        return []
    ran_file.unlink(missing_ok=True)
    return stages
