"""Every benchmark script runs, for one tiny round: `make bench` broke unseen (AdamW.zero_grad(set_to_none=...)),
and bench_rope.py and bench_scaling.py with it, because nothing ran them. Their numbers are not checked here (speed is
measured in benchmarks/RESULTS.md, never asserted); that each still runs to its table is."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TINY = {  # the smallest round of each script that still reaches its table, on one thread (the suite runs beside it)
    "bench_step.py": ["--trials", "1", "--rounds", "1", "--steps", "1", "--overhead-trials", "1", "--threads", "1"],
    "bench_attention.py": ["--rounds", "1", "--trials", "1", "--step-rounds", "1", "--steps", "1", "--threads", "1"],
    "bench_rope.py": ["--rounds", "1", "--threads", "1"],
    "bench_projections.py": ["--trials", "1", "--rounds", "1", "--steps", "1", "--threads", "1"],
}
SLOW = {  # these start Snakemake or whole run jobs: seconds each, so with the slow tests
    "bench_scaling.py": ["--steps", "1", "--factors", "1", "2"],  # 2: the copies are planned too
    "job_startup.py": ["--trials", "1"],
    "dvc_status.py": ["--trials", "1"],  # the project root: DVC's reads of params.yaml only
}
NOT_RUN_HERE = {  # what each needs that a test has not: said, so a new script is never left out silently
    "finetune_rate.py": "the trained models of a finished study",
    "study_time.py": "a finished study's Snakemake job records",
    "reference_gpt.py": "nothing: it is the reference model bench_step.py imports (run through it)",
}


def run(script: str, args: list[str]) -> str:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_every_benchmark_script_is_run_here_or_says_why_not():
    scripts = {p.name for p in (ROOT / "benchmarks").glob("*.py")}
    assert scripts == set(TINY) | set(SLOW) | set(NOT_RUN_HERE)


@pytest.mark.parametrize("script", sorted(TINY))
def test_a_benchmark_runs_one_tiny_round_to_its_table(script):
    assert "|" in run(script, TINY[script])  # a markdown table row, as RESULTS.md quotes it


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(SLOW))
def test_a_slow_benchmark_runs_one_tiny_round_to_its_table(script):
    assert "|" in run(script, SLOW[script])


def test_make_bench_calls_the_step_benchmark():
    dry = subprocess.run(["make", "-n", "bench"], capture_output=True, text=True, cwd=ROOT)
    assert "benchmarks/bench_step.py" in dry.stdout


@pytest.mark.parametrize("target", ["smoke", "study", "long"])
def test_make_names_its_profile_on_the_command_line_and_never_writes_params_yaml(target):
    """`make smoke` wrote `profile: smoke` into the tracked params.yaml: `git status` dirty, and a test that read the
    working tree's file failed after it. The targets now pass the profile to Snakemake; nothing writes the file."""
    dry = subprocess.run(["make", "-n", "-W", ".venv/.installed", target], capture_output=True, text=True, cwd=ROOT)
    assert f"--config profile={target if target != 'study' else 'default'}" in dry.stdout
    assert "set-profile" not in dry.stdout and "params.yaml" not in dry.stdout


def test_make_test_hands_the_test_files_out_longest_first():
    """pytest-xdist's file schedule sorts the files by their number of tests unless told not to: the one-test
    end-to-end files (minutes each) went out last and were the suite's tail, whatever conftest's LONGEST_FIRST said.
    `make test` and `make test-fast` keep the conftest's order; every file it names exists (a rename would drop it)."""
    from tests.conftest import LONGEST_FIRST

    for target in ("test", "test-fast"):
        dry = subprocess.run(["make", "-n", "-W", ".venv/.installed", target], capture_output=True, text=True, cwd=ROOT)
        assert "--dist loadfile --no-loadscope-reorder" in dry.stdout, (target, dry.stdout)
    assert [name for name in LONGEST_FIRST if not (ROOT / "tests" / name).is_file()] == []
