"""A real single-node Slurm (munged + slurmctld + slurmd) brought up in a folder, for the cluster test.

Configuration and start order: no accounting (the profile uses `squeue` for status),
every path under one run folder, the config reachable at /etc/slurm/slurm.conf (the plugin's `srun` inside a job drops
SLURM_CONF). Daemons are stopped by the PIDs this module started.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")

CONF = """ClusterName=ci
SlurmctldHost={host}(127.0.0.1)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={run}/munge/munge.socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation={run}/spool/ctld
SlurmdSpoolDir={run}/spool/d
SlurmctldPidFile={run}/run/slurmctld.pid
SlurmdPidFile={run}/run/slurmd.pid
SlurmctldLogFile={run}/log/slurmctld.log
SlurmdLogFile={run}/log/slurmd.log
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MinJobAge=300
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={mem} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def missing_tools() -> list[str]:
    return [t for t in (*DAEMONS, "sbatch", "squeue", "sinfo", "srun") if shutil.which(t) is None]


class SlurmCluster:
    def __init__(self, run: Path) -> None:
        self.run = Path(run)
        self.procs: list[subprocess.Popen] = []
        self.host = socket.gethostname()
        self.conf = self.run / "slurm.conf"
        self.etc_link = Path("/etc/slurm/slurm.conf")
        self.previous_etc: Path | None = None

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def start(self, timeout: float = 60) -> None:
        for sub in ("munge", "spool/ctld", "spool/d", "run", "log", "munge-key"):
            (self.run / sub).mkdir(parents=True, exist_ok=True)
        (self.run / "munge").chmod(0o755)
        (self.run / "munge-key").chmod(0o700)
        key = self.run / "munge-key" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        mem = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20 * 0.85)
        self.conf.write_text(CONF.format(host=self.host, run=self.run, cpus=os.cpu_count(), mem=mem))
        self.etc_link.parent.mkdir(parents=True, exist_ok=True)
        if self.etc_link.exists() or self.etc_link.is_symlink():
            self.previous_etc = self.run / "previous-etc-slurm.conf"
            shutil.move(str(self.etc_link), self.previous_etc)
        self.etc_link.symlink_to(self.conf)
        log = open(self.run / "log" / "daemons.out", "ab")  # noqa: SIM115 - lives as long as the daemons
        munge_socket = self.run / "munge" / "munge.socket"
        self._spawn(
            [
                "munged",
                "-F",
                "--key-file",
                str(key),
                "--socket",
                str(munge_socket),
                "--pid-file",
                str(self.run / "run" / "munged.pid"),
                "--log-file",
                str(self.run / "log" / "munged.log"),
                "--seed-file",
                str(self.run / "munge" / "seed"),
                "--force",
            ],
            log,
        )
        self._wait(lambda: munge_socket.exists(), 10, "munged did not create its socket")
        self._spawn(["slurmctld", "-D", "-f", str(self.conf)], log)
        time.sleep(1)
        self._spawn(["slurmd", "-D", "-f", str(self.conf)], log)
        self._wait(self._idle, timeout, "the node never became idle (see log/slurmctld.log, log/slurmd.log)")

    def _spawn(self, cmd: list[str], log) -> None:
        self.procs.append(subprocess.Popen(cmd, stdout=log, stderr=log, env=self.env, start_new_session=True))

    def _idle(self) -> bool:
        out = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, env=self.env)
        return out.stdout.strip() == "idle"

    def _wait(self, ok, timeout: float, message: str) -> None:
        end = time.time() + timeout
        while time.time() < end:
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{p.args[0]} exited with {p.returncode}; logs in {self.run / 'log'}")
            if ok():
                return
            time.sleep(0.5)
        raise RuntimeError(message)

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        end = time.time() + 10
        for p in reversed(self.procs):
            try:
                p.wait(timeout=max(0.1, end - time.time()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if self.etc_link.is_symlink():
            self.etc_link.unlink()
        if self.previous_etc is not None:
            shutil.move(str(self.previous_etc), self.etc_link)
