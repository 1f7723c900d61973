"""Checkpoints: reading one safely, rebuilding its model, and knowing whether its training finished.

Training writes them (training/folder.py); evaluate, explore and export read them through this module only.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from miniformer.errors import UserError
from miniformer.network.model import MiniFormer, ModelConfig
from miniformer.params import RunConfig
from miniformer.runtime.codehash import EVALUATION_CODE, TRAINING_CODE, code_hash
from miniformer.runtime.files import atomic_torch_save
from miniformer.runtime.provenance import combine

CHECKPOINT = "ckpt.pt"
DIGEST = "digest"  # the key a checkpoint keeps the digest of its own content under


def _feed(h: Any, key: str, value: object) -> None:
    """Hash one entry of a checkpoint: a tensor by its dtype, shape and bytes, a dict entry by entry, else its repr."""
    h.update(key.encode() + b"\0")
    if isinstance(value, Tensor):
        t = value.detach().cpu().contiguous()
        h.update(f"{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(value, dict):
        for k in sorted(value, key=str):
            _feed(h, f"{key}/{k}", value[k])
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            _feed(h, f"{key}/{i}", v)
    else:
        h.update(repr(value).encode())


def state_digest(state: dict) -> str:
    """The digest of everything a checkpoint holds (weights, optimizer moments, generators, logs), its own digest
    left out: a flipped byte in any tensor changes it."""
    h = hashlib.sha256()
    for key in sorted(k for k in state if k != DIGEST):
        _feed(h, key, state[key])
    return h.hexdigest()[:16]


def save_checkpoint(state: dict, path: Path) -> None:
    """Write a checkpoint with the digest of its content, so that every reader can tell a damaged file from a run."""
    atomic_torch_save({**state, DIGEST: state_digest(state)}, path)


def fingerprint(run: RunConfig, data_hash: str) -> str:
    """Hash of everything that shapes the trained weights: the config, the training code and the prepared data's
    content (runtime/tokendata.py). A checkpoint records it; resuming or evaluating a checkpoint of another config,
    other model/training code or other data is refused, and every file derived from it carries it."""
    shaping = {**run.shaping(), "code": code_hash(TRAINING_CODE), "data_content": data_hash}
    return hashlib.sha256(json.dumps(shaping, sort_keys=True).encode()).hexdigest()[:16]


def evaluation_fingerprint(training: str, run: RunConfig) -> str:
    """What made an evaluation: the training evaluated, the eval params and the evaluation code."""
    return combine(training, run.to_dict()["eval"], code_hash(EVALUATION_CODE))


def read_checkpoint(path: Path, device: torch.device | str, remedy: str) -> dict:
    """The checkpoint's dict; an unreadable file (truncated, not a checkpoint), one without its digest or one whose
    content no longer matches it (a damaged disk, an edit) is one line naming the remedy, never a number."""
    try:
        state = torch.load(path, map_location=device, weights_only=True)
    except Exception as e:  # noqa: BLE001 - any unreadable file is the same user problem
        raise UserError(f"checkpoint {str(path)!r} is unreadable ({type(e).__name__}); {remedy}") from None
    if not isinstance(state, dict) or DIGEST not in state:
        raise UserError(f"checkpoint {str(path)!r} carries no digest of its content (written by an older miniformer, "
                        f"or not by miniformer); {remedy}")
    if state[DIGEST] != state_digest(state):
        raise UserError(f"checkpoint {str(path)!r} does not match the digest it was written with (damaged or edited "
                        f"since); {remedy}")
    return state


def load_run_model(run_dir: Path, device: torch.device) -> tuple[MiniFormer, dict, dict]:
    """(model in eval mode, the run's config dict, the checkpoint) of a run folder."""
    path = Path(run_dir) / CHECKPOINT
    if not path.exists():
        raise UserError(f"no checkpoint at {str(path)!r}; train this run first (`miniformer train`)")
    s = read_checkpoint(path, device, "re-train this run")
    config = json.loads(s["config"])
    check_run_identity(Path(run_dir), config)
    model = MiniFormer(ModelConfig.from_dict(json.loads(s["model_config"]))).to(device)
    model.load_state_dict(renamed_state(s["model"]))
    return model.eval(), config, s


def check_run_identity(run_dir: Path, config: dict) -> None:
    """A checkpoint in a study's run folder (…/<experiment>/seed<k>/) is that experiment's seed k: one copied from
    another seed or experiment would score, generate and export under the wrong name with a plausible number."""
    seed, experiment = config.get("seed"), config.get("experiment")
    folder_seed = run_dir.name.removeprefix("seed")
    if not run_dir.name.startswith("seed") or not folder_seed.isdigit() or seed is None or not experiment:
        return  # a folder outside a study's layout (a path the user gave): nothing to hold it against
    if int(folder_seed) != seed or not f"/{run_dir.parent.as_posix()}".endswith(f"/{experiment}"):
        raise UserError(f"the checkpoint in {str(run_dir)!r} is {experiment} seed {seed}, not the run its folder "
                        f"names (copied from another run?); put it back, or re-train this run")


_OLD_NAMES = {".attn.proj.": ".attn.o_proj.", ".mlp.fc.": ".mlp.up_proj.", ".mlp.proj.": ".mlp.down_proj."}


def renamed_state(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """A checkpoint written before the attention's fused qkv was split into q_proj/k_proj/v_proj (and attn.proj,
    mlp.fc, mlp.proj renamed) under today's names, so that runs trained then still score, generate and export."""
    out: dict[str, Tensor] = {}
    for name, tensor in state.items():
        if ".attn.qkv." in name:
            for role, part in zip("qkv", tensor.chunk(3)):
                out[name.replace(".attn.qkv.", f".attn.{role}_proj.")] = part
            continue
        for old, new in _OLD_NAMES.items():
            name = name.replace(old, new)
        out[name] = tensor
    return out


def training_finished(ckpt: dict, steps: int) -> bool:
    """The checkpoint reached its last step, or recorded a divergence (a result, not an interrupted run)."""
    return ckpt.get("divergence") not in (None, "null") or ckpt.get("step", 0) >= steps


def unfinished_note(ckpt: dict, config: dict, name: str) -> str | None:
    """One line for commands that may use a checkpoint mid-training (generate, score, attention), or None."""
    steps = config["train"]["steps"]
    if training_finished(ckpt, steps):
        return None
    return (f"note: {name}'s checkpoint stopped at step {ckpt.get('step')} of {steps} (training unfinished): what "
            "follows is from that checkpoint, not the finished run")


def check_finished_training(ckpt: dict, run: RunConfig, run_dir: Path, data_hash: str) -> None:
    """Use only a finished training of the config asked for: a half-trained checkpoint, or one of another config left
    beside old outputs, would give a plausible number with nothing to say it is wrong."""
    name, command = f"{run.experiment}/seed{run.seed}", f"`miniformer train {run.experiment} --seed {run.seed}`"
    if ckpt.get("fingerprint") != fingerprint(run, data_hash):
        raise UserError(f"run {name}: the checkpoint in {str(run_dir)!r} was trained with another config, training "
                        f"code or prepared data than this run now has; re-train it ({command}), then evaluate")
    if not training_finished(ckpt, run.train.steps):
        raise UserError(f"run {name}: its checkpoint stopped at step {ckpt.get('step')} of {run.train.steps} "
                        f"(training did not finish); finish it ({command}), then evaluate")
