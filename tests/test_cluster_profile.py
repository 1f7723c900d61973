"""The Slurm profile's settings are the user's: without a partition and an account it refuses in one line before
anything is submitted; with them, every job carries them and run jobs ask for the GPUs set (a dry run, no Slurm)."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.studies import BIN, project_copy

SETTINGS = ("MINIFORMER_SLURM_PARTITION", "MINIFORMER_SLURM_ACCOUNT", "MINIFORMER_SLURM_GPUS")


def dry_run(study, **settings: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in SETTINGS} | settings
    env["PATH"] = f"{BIN}{os.pathsep}{env['PATH']}"
    return subprocess.run([str(BIN / "snakemake"), "-n", "--workflow-profile", "profiles/slurm", "all", "--config",
                           "profile=gpu"], cwd=study, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow  # a fresh interpreter (or Snakemake) per case: seconds each
def test_the_slurm_profile_refuses_until_partition_and_account_are_set(tmp_path):
    study = project_copy(tmp_path / "study")
    done = dry_run(study, MINIFORMER_SLURM_ACCOUNT="proj")
    errors = [line for line in done.stderr.splitlines() if line.startswith("miniformer: error")]
    assert done.returncode != 0 and len(errors) == 1 and "MINIFORMER_SLURM_PARTITION" in errors[0]
    assert "MINIFORMER_SLURM_ACCOUNT" not in errors[0].split(":")[2]  # it names only what is missing
    assert "Traceback" not in done.stderr
    done = dry_run(study, MINIFORMER_SLURM_PARTITION="gpuq", MINIFORMER_SLURM_ACCOUNT="<account>")  # pasted as is
    assert done.returncode != 0 and "needs MINIFORMER_SLURM_ACCOUNT" in done.stderr
    done = dry_run(study, MINIFORMER_SLURM_PARTITION="gpuq", MINIFORMER_SLURM_ACCOUNT="proj")
    assert done.returncode == 0, done.stderr[-2000:]
    resources = [line for line in done.stdout.splitlines() if "resources:" in line]
    assert resources and all("slurm_partition=gpuq, slurm_account=proj" in line for line in resources)
    assert any(line.rstrip().endswith("gpu=1") for line in resources)  # run jobs: one GPU by default
    assert "debug" not in done.stdout and "slurm_account=ci" not in done.stdout  # no test fixture left in the profile


def test_set_profile_names_the_profile_in_params_yaml_and_keeps_the_rest(tmp_path, capsys):
    from miniformer.cli import main

    params = tmp_path / "params.yaml"
    params.write_text("# a study\nprofile: default   # the size\nprofiles:\n  smoke: {}\n")
    assert main(["set-profile", "smoke", "--params", str(params)]) == 0
    assert params.read_text() == "# a study\nprofile: smoke   # the size\nprofiles:\n  smoke: {}\n"
    assert main(["set-profile", "huge", "--params", str(params)]) == 2
    assert "unknown profile 'huge'" in capsys.readouterr().err
