"""The Slurm profile's settings are the user's: without a partition and an account it refuses in one line before
anything is submitted; with them, every job carries them and run jobs ask for the GPUs set (a dry run, no Slurm)."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.studies import BIN, project_copy

SETTINGS = ("MINIFORMER_SLURM_PARTITION", "MINIFORMER_SLURM_ACCOUNT", "MINIFORMER_SLURM_GPUS",
            "MINIFORMER_SLURM_CPU_PARTITION")


def dry_run(study, *extra: str, **settings: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in SETTINGS} | settings
    env["PATH"] = f"{BIN}{os.pathsep}{env['PATH']}"
    return subprocess.run([str(BIN / "snakemake"), "-n", "--workflow-profile", "profiles/slurm", "all", "--config",
                           "profile=gpu", *extra], cwd=study, env=env, capture_output=True, text=True, timeout=300)


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


@pytest.mark.slow
def test_the_readmes_cluster_knobs_reach_the_jobs_and_a_bad_gpu_count_is_refused(tmp_path):
    """A CPU partition for the jobs that do not train, memory and time per rule from the command line (the README's
    lines), and MINIFORMER_SLURM_GPUS=abc or -5 refused in one line instead of reaching sbatch."""
    study = project_copy(tmp_path / "study")
    base = {"MINIFORMER_SLURM_PARTITION": "gpuq", "MINIFORMER_SLURM_ACCOUNT": "proj"}
    done = dry_run(study, "--set-resources", "run:mem_mb=16000", "run:runtime=600",
                   MINIFORMER_SLURM_CPU_PARTITION="cpuq", **base)
    assert done.returncode == 0, done.stderr[-2000:]
    jobs = done.stdout.split("rule ")[1:]
    by_rule = {}
    for job in jobs:
        by_rule.setdefault(job.split(":")[0], []).append(next(x for x in job.splitlines() if "resources:" in x))
    assert all("slurm_partition=gpuq" in r and "mem_mb=16000" in r and "runtime=600" in r for r in by_rule["run"])
    for rule in ("prepare", "aggregate", "report", "init_probe", "check_params"):
        assert all("slurm_partition=cpuq" in r and "mem_mb=2000" in r for r in by_rule[rule]), rule
    for bad in ("abc", "-5"):
        done = dry_run(study, MINIFORMER_SLURM_GPUS=bad, **base)
        errors = [line for line in done.stderr.splitlines() if line.startswith("miniformer: error")]
        assert done.returncode != 0 and len(errors) == 1 and "not a whole number of GPUs" in errors[0]


def test_set_profile_names_the_profile_in_params_yaml_and_keeps_the_rest(tmp_path, capsys):
    from miniformer.cli import main

    params = tmp_path / "params.yaml"
    params.write_text("# a study\nprofile: default   # the size\nprofiles:\n  smoke: {}\n")
    assert main(["set-profile", "smoke", "--params", str(params)]) == 0
    assert params.read_text() == "# a study\nprofile: smoke   # the size\nprofiles:\n  smoke: {}\n"
    assert main(["set-profile", "huge", "--params", str(params)]) == 2
    assert "unknown profile 'huge'" in capsys.readouterr().err
