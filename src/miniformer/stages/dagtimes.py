"""After `dvc pull`: give the pulled files modification times in the order the DAG made them.

DVC restores files in whatever order its cache hands them out, so a pulled evaluation can be older than the training
it read. Snakemake, which re-runs a job whose input is newer than its output, would then plan evaluations (or
trainings) again on a colleague's fresh clone although DVC itself finds nothing stale. Stamping each level of the
DAG one second after the level before (data, runs, evaluations, aggregates, report) makes the two tools agree. Only
what is there is touched; nothing is created, nothing is read.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from miniformer.errors import UserError
from miniformer.layout import AGGREGATES as AGGREGATE_FILES
from miniformer.layout import DATA_DIR, INIT_FILE, PROVENANCE, RESULTS

AGGREGATES = (*AGGREGATE_FILES, PROVENANCE, INIT_FILE, "verdicts.json", "claims.json", "claims.csv",
              "claims.tex", "tables", "plots")


def dag_levels(root: Path) -> list[list[Path]]:
    """The study's files, grouped by the DAG level that writes them, first level first."""
    results = root / RESULTS

    def files(*paths: Path) -> list[Path]:
        out: list[Path] = []
        for p in paths:
            out += sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else ([p] if p.is_file() else [])
        return out

    return [
        files(root / DATA_DIR),
        files(results / "runs"),
        files(results / "eval"),
        files(*(results / name for name in AGGREGATES)),
        files(root / "report"),
    ]


def settle(root: Path = Path("."), now: float | None = None) -> int:
    """Stamp every level one second after the one before; returns how many files were touched."""
    start = time.time() if now is None else now
    levels = dag_levels(Path(root))
    if not any(levels):  # "stamped 0 files ... the tools agree" would be a success that did nothing
        raise UserError(f"no study outputs in {str(Path(root).resolve())!r}: nothing under {DATA_DIR}/, {RESULTS}/ "
                        "or report/ to stamp; run settle-times in the study's folder, after `dvc pull`")
    touched = 0
    for level, paths in enumerate(levels):
        stamp = start + level
        for path in paths:
            os.utime(path, (stamp, stamp))
            touched += 1
    return touched
