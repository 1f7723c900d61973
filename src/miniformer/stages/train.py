"""Stage `train`: one experiment × seed, in its run folder.

Outputs there: log.tsv (step log), dvclive/ (the same series for DVC), samples.jsonl, ckpt.pt, curve.json,
metrics.json and perf.json (training/outputs.py says which are deterministic).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from miniformer.network.attention import Primitives
from miniformer.network.given import GivenCode
from miniformer.params import RunConfig
from miniformer.training.lock import run_lock
from miniformer.training.outputs import write_outputs
from miniformer.training.trainer import Trainer


def train(run: RunConfig, data_dir: Path, out_dir: Path, resume: str = "auto", progress: bool | None = None,
          given: GivenCode | Primitives | None = None, tensorboard: Path | None = None) -> dict:
    """Train one run. ``given``: code to train on instead of the package's (the course notebook's: a student's own
    attention, positions and block); the run's fingerprint then names it, so it is never mistaken for a study run.
    ``tensorboard``: a folder for the step log as TensorBoard events (params.yaml's `tracking: tensorboard`)."""
    if progress is None:
        progress = sys.stderr.isatty()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    trainer = Trainer(run, data_dir, out_dir, GivenCode.of(given))
    trainer.folder.out.mkdir(parents=True, exist_ok=True)
    with run_lock(trainer.folder.out, trainer.name):
        trainer.fit(resume, progress, tensorboard)
        return write_outputs(trainer)
