"""What a training shows and keeps of its progress: the step log (TSV and DVCLive), the progress bar, peak memory."""

from __future__ import annotations

import csv
import functools
import math
import resource
import shutil
from io import StringIO
from pathlib import Path

import torch

from miniformer.errors import UserError
from miniformer.runtime.files import atomic_write_text

LOG_FIELDS = ["step", "train_loss", "val_loss", "lr", "grad_norm", "tokens_per_s", "peak_mem_mb"]


def peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated() / 2**20
    if device.type == "mps":
        return torch.mps.driver_allocated_memory() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def write_log_tsv(path: Path, rows: list[dict]) -> None:
    fields = LOG_FIELDS + sorted({k for r in rows for k in r if k.startswith("entropy_")})
    buf = StringIO()
    w = csv.DictWriter(buf, fieldnames=fields, delimiter="\t", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
    atomic_write_text(path, buf.getvalue())


@functools.cache
def files_only_live() -> type | None:
    """DVCLive's ``Live`` as the mirror uses it: its files (plots/metrics/*.tsv, metrics.json) and nothing else, or
    None where DVCLive is not installed (the engine works without it; the pipeline installs it)."""
    try:
        from dvclive import Live
    except ImportError:
        return None

    class FilesOnlyLive(Live):
        """No repository lookup and no Studio events. ``Live`` opens the DVC repository, and through it git, to name
        an experiment and find a dvc.yaml stage: the mirror saves no experiment and writes no dvc.yaml, and the
        lookup was a share of every run job's time (benchmarks/RESULTS.md) and failed in a git repository with no
        commit. Studio would be told of a run that never ends (the mirror never calls ``end()``). dvclive is pinned
        (pyproject.toml): these two methods are those steps there."""

        def _init_dvc(self) -> None:
            pass

        def _init_studio(self) -> None:
            self._studio_events_to_skip |= {"start", "data", "done"}

    return FilesOnlyLive


class DvcLiveMirror:
    """The step log mirrored into DVCLive. Rebuilt from the checkpoint's rows on resume, so a killed-and-resumed run
    has exactly one entry per logged step (DVCLive's own resume would keep rows logged after the last checkpoint)."""

    def __init__(self, folder: Path, rows: list[dict]) -> None:
        live = files_only_live()
        self.live = None
        if live is None:
            return
        shutil.rmtree(folder, ignore_errors=True)
        self.live = live(dir=str(folder), dvcyaml=None, save_dvc_exp=False, report=None)
        for row in rows:
            self.log(row)

    def log(self, row: dict) -> None:
        if self.live is None:
            return
        self.live.step = row["step"]
        for k, v in row.items():
            if k != "step" and v is not None and math.isfinite(v):
                self.live.log_metric(k, v)
        self.live.make_summary()


class TensorBoardMirror:
    """The step log as TensorBoard event files (`tensorboard --logdir results/runs`), written offline. Like DVCLive's
    mirror it is rebuilt from the checkpoint's rows on resume: one event per logged step, whatever was killed."""

    def __init__(self, folder: Path, rows: list[dict]) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise UserError("tracking: tensorboard needs the tensorboard package: pip install -e '.[tracking]' (or "
                            "set tracking: none in params.yaml)") from None
        shutil.rmtree(folder, ignore_errors=True)
        self.writer = SummaryWriter(log_dir=str(folder))
        for row in rows:
            self.log(row)

    def log(self, row: dict) -> None:
        for k, v in row.items():
            if k != "step" and v is not None and math.isfinite(v):
                self.writer.add_scalar(k, v, row["step"])
        self.writer.flush()


class StepMirrors:
    """Every place the step log is mirrored: DVCLive always (when installed), TensorBoard into ``tensorboard`` when
    params.yaml's `tracking:` asks (a folder outside the run's outputs, so neither tool sees a change in them)."""

    def __init__(self, out: Path, rows: list[dict], tensorboard: Path | None) -> None:
        self.mirrors: list = [DvcLiveMirror(out / "dvclive", rows)]
        if tensorboard is not None:
            self.mirrors.append(TensorBoardMirror(tensorboard, rows))

    def log(self, row: dict) -> None:
        for mirror in self.mirrors:
            mirror.log(row)


class _NoBar:
    def update(self, n: int) -> None: ...
    def set_postfix_str(self, s: str) -> None: ...
    def close(self) -> None: ...


def make_bar(total: int, initial: int, enabled: bool, desc: str):
    if enabled:
        from tqdm import tqdm

        return tqdm(total=total, initial=initial, desc=desc, dynamic_ncols=True)
    return _NoBar()
