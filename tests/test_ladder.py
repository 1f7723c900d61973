"""`make ladder` end to end: the warm-up arms at every rate of their ladder, every seed, one Snakemake study; its report
judges Xiong's claim at each rate by each seed's pass/fail. Smoke-sized (the real ladder is 39 runs of 300 steps)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from miniformer.study.claims import WARMUP_RUNS
from tests.studies import project_copy, sh

pytestmark = pytest.mark.slow

XIONG = "Post-norm needs warm-up; pre-norm trains without"


SEEDS = 2  # the shipped ladder has three per cell; two still make every cell a count over seeds, at 2/3 the runs


def smoke_sized_ladder(study: Path) -> None:
    """The ladder profile at the smoke profile's sizes, its experiments and rates as shipped, SEEDS seeds a cell."""
    params = yaml.safe_load((study / "params.yaml").read_text())
    smoke, ladder = params["profiles"]["smoke"], params["profiles"]["ladder"]
    ladder.update({k: v for k, v in smoke.items() if k in ("model", "train", "eval")}, seeds_per_experiment=SEEDS)
    (study / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False, allow_unicode=True))


def test_the_ladder_trains_every_rate_and_seed_and_the_report_judges_each_rate(tmp_path):
    study = project_copy(tmp_path, keep=("baseline", *WARMUP_RUNS.values()))
    smoke_sized_ladder(study)
    # the README's command, with this test's environment as the Makefile's venv (a copy has none of its own)
    sh(study, "make", "ladder", "CORES=2", f"VENV={sys.prefix}", timeout=1500)
    metrics = json.loads((study / "results" / "metrics.json").read_text())
    for arm in WARMUP_RUNS.values():
        for run in (arm, f"{arm}/lr=0.002", f"{arm}/lr=0.005"):
            assert len(metrics[run]) == SEEDS, run  # every cell every seed: its pass/fail over the seeds
    claims = json.loads((study / "results" / "claims.json").read_text())
    assert claims["profile"] == "ladder"
    xiong = next(c for c in claims["claims"] if c["claim"] == XIONG)
    assert xiong["verdict"] != "not run"
    assert all(name.endswith("at lr 0.01") or name.endswith("at lr 0.005") or name.endswith("at lr 0.002")
               for name in xiong["estimates"])  # a ladder's estimates are named by the rate they read
    html = (study / "report" / "report.html").read_text()
    row = html[html.index(XIONG, html.index('<table id="claims-table">')):]
    row = row[:row.index("</tr>")]
    assert all(f"at lr {lr}" in row for lr in ("0.002", "0.005", "0.01")) and f"/{SEEDS} seeds train" in row
