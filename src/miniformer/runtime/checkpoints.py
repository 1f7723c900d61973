"""Checkpoints: reading one safely, rebuilding its model, and knowing whether its training finished.

Training writes them (training/folder.py); evaluate, explore and export read them through this module only.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch

from miniformer.errors import UserError
from miniformer.network.model import MiniFormer, ModelConfig
from miniformer.params import RunConfig
from miniformer.runtime.codehash import TRAINING_CODE, code_hash

CHECKPOINT = "ckpt.pt"


def fingerprint(run: RunConfig) -> str:
    """Hash of everything that shapes the trained weights: the config and the training code. A checkpoint records
    it; resuming or evaluating a checkpoint of another config or other model/training code is refused."""
    shaping = {**run.shaping(), "code": code_hash(TRAINING_CODE)}
    return hashlib.sha256(json.dumps(shaping, sort_keys=True).encode()).hexdigest()[:16]


def read_checkpoint(path: Path, device: torch.device | str, remedy: str) -> dict:
    """The checkpoint's dict; an unreadable file (truncated, not a checkpoint) is one line naming the remedy."""
    try:
        return torch.load(path, map_location=device, weights_only=True)
    except Exception as e:  # noqa: BLE001 - any unreadable file is the same user problem
        raise UserError(f"checkpoint {str(path)!r} is unreadable ({type(e).__name__}); {remedy}") from None


def load_run_model(run_dir: Path, device: torch.device) -> tuple[MiniFormer, dict, dict]:
    """(model in eval mode, the run's config dict, the checkpoint) of a run folder."""
    path = Path(run_dir) / CHECKPOINT
    if not path.exists():
        raise UserError(f"no checkpoint at {str(path)!r}; train this run first (`miniformer train`)")
    s = read_checkpoint(path, device, "re-train this run")
    model = MiniFormer(ModelConfig.from_dict(json.loads(s["model_config"]))).to(device)
    model.load_state_dict(s["model"])
    return model.eval(), json.loads(s["config"]), s


def training_finished(ckpt: dict, steps: int) -> bool:
    """The checkpoint reached its last step, or recorded a divergence (a result, not an interrupted run)."""
    return ckpt.get("divergence") not in (None, "null") or ckpt.get("step", 0) >= steps


def check_finished_training(ckpt: dict, run: RunConfig, run_dir: Path) -> None:
    """Use only a finished training of the config asked for: a half-trained checkpoint, or one of another config left
    beside old outputs, would give a plausible number with nothing to say it is wrong."""
    name, command = f"{run.experiment}/seed{run.seed}", f"`miniformer train {run.experiment} --seed {run.seed}`"
    if ckpt.get("fingerprint") != fingerprint(run):
        raise UserError(f"run {name}: the checkpoint in {str(run_dir)!r} was trained with another config or training "
                        f"code than params.yaml gives this run; re-train it ({command}), then evaluate")
    if not training_finished(ckpt, run.train.steps):
        raise UserError(f"run {name}: its checkpoint stopped at step {ckpt.get('step')} of {run.train.steps} "
                        f"(training did not finish); finish it ({command}), then evaluate")
