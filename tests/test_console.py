"""`python -m miniformer` leaves without the interpreter's teardown (cli.console): what a command prints must still all
arrive, through a pipe as into a Snakemake log, with the command's own exit status."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from miniformer.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _console(*args: str) -> subprocess.CompletedProcess:
    # block-buffered, as a job's output into a log file is: unflushed lines would be lost
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    return subprocess.run([sys.executable, "-m", "miniformer", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=env)


def test_everything_printed_reaches_a_pipe(capsys):
    main(["list"])
    in_process = capsys.readouterr().out
    done = _console("list")
    assert done.returncode == 0 and done.stdout == in_process and len(in_process.splitlines()) > 10


def test_a_refusal_keeps_its_status_and_its_one_line():
    done = _console("train", "no_such_experiment", "--seed", "0")
    assert done.returncode == 2 and done.stderr.startswith("miniformer: error:") and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_usage_error_keeps_its_status():
    done = _console("no-such-command")
    assert done.returncode == 2 and "invalid choice" in done.stderr
