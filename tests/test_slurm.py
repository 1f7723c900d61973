"""The smoke study submitted to a real single-node Slurm through profiles/slurm (slow; needs Slurm + munge, root).

.ci/run installs Debian's slurmctld, slurmd, slurm-client and munge. The node has no GPU, so the profile's GPU request
for run jobs is set to 0 here (MINIFORMER_SLURM_GPUS); everything else is the project's profile as users run it, with
the test cluster's partition and account set as the profile asks.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import require_system
from tests.slurm_cluster import SlurmCluster, missing_tools
from tests.studies import BIN, project_copy

pytestmark = pytest.mark.slow


def test_smoke_study_on_a_real_slurm(tmp_path):
    missing = missing_tools()
    require_system(not missing, f"Slurm tools missing: {missing}; apt-get install slurmctld slurmd slurm-client munge")
    require_system(os.geteuid() == 0, "the single-node Slurm test runs its daemons as root (as CI does)")
    # the reference experiment alone (its seeds and its sweep point): the profile's wiring is under test here, not
    # the smoke profile's coverage (conftest.smoke_study_built builds all of it, for test_pipeline.py and others)
    study = project_copy(tmp_path / "study", keep=("baseline",))
    cluster = SlurmCluster(tmp_path / "slurm")
    cluster.start()
    try:
        env = {**cluster.env, "PYTHONPATH": str(study / "src"), "PATH": f"{BIN}:{os.environ['PATH']}",
               "MINIFORMER_SLURM_PARTITION": "debug", "MINIFORMER_SLURM_ACCOUNT": "ci", "MINIFORMER_SLURM_GPUS": "0"}
        done = subprocess.run(
            ["timeout", "-s", "KILL", "1200", str(BIN / "snakemake"), "all", "--workflow-profile", "profiles/slurm"],
            cwd=study, env=env, capture_output=True, text=True)
        tail = (done.stdout + done.stderr)[-4000:]
        assert done.returncode == 0, tail
        ctld_log = (tmp_path / "slurm" / "log" / "slurmctld.log").read_text()
    finally:
        cluster.stop()
    assert (study / "report" / "report.html").exists()
    # every job except the local target rule ran as a Slurm batch job and exited 0 (the plugin deletes the logs of
    # successful jobs, so slurmctld's own log is the record)
    from miniformer.params import Study

    # check_params, prepare, one job per run (train, then evaluate), aggregate, init probe, report
    n_jobs = 2 + len(Study.load(study / "params.yaml").runs()) + 3
    submitted = re.findall(r"_slurm_rpc_submit_batch_job: JobId=(\d+)", ctld_log)
    succeeded = re.findall(r"_job_complete: JobId=(\d+) WEXITSTATUS 0", ctld_log)
    assert len(submitted) == n_jobs, (len(submitted), n_jobs)
    assert sorted(succeeded) == sorted(submitted)
    for pid_file in ("slurmctld.pid", "slurmd.pid"):
        pid = (tmp_path / "slurm" / "run" / pid_file)
        if pid.exists():
            assert not Path(f"/proc/{pid.read_text().strip()}").exists(), f"{pid_file} still running"
