"""A run folder's checkpoint as training sees it: save, resume only what matches, set aside what does not."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import torch

from miniformer.errors import UserError
from miniformer.runtime.checkpoints import CHECKPOINT, read_checkpoint, save_checkpoint

# What a training writes beside its checkpoint: removed at a fresh start, so a run folder never holds one training's
# step log beside another's checkpoint.
DERIVED_FILES = ("metrics.json", "log.tsv", "samples.jsonl", "curve.json", "perf.json")


class RunFolder:
    def __init__(self, out: Path) -> None:
        self.out = Path(out)
        self.ckpt_path = self.out / CHECKPOINT

    def save(self, state: dict) -> None:
        save_checkpoint(state, self.ckpt_path)

    def resumable(self, fingerprint: str, mode: str, device: torch.device) -> dict | None:
        """The checkpoint to resume, or None to start fresh. mode 'auto': resume a checkpoint of this config, set
        aside one of another config; 'require': a checkpoint of another config is an error; 'never': start fresh."""
        if mode == "never" or not self.ckpt_path.exists():
            return None
        s = read_checkpoint(self.ckpt_path, device, "delete it to train from scratch")
        if s.get("fingerprint") == fingerprint:
            return s
        if mode == "auto":
            self.set_aside(str(s.get("fingerprint")))
            return None
        raise UserError(
            f"checkpoint {str(self.ckpt_path)!r} was trained with a different config or training code; delete "
            "it, or restore the params and code it was made with, to resume"
        )

    def set_aside(self, old_fingerprint: str) -> None:
        """Keep a checkpoint of another config under its own name (one per fingerprint, so a second change does not
        delete the first original); its derived files go with the fresh start (clear_derived)."""
        stale = self.ckpt_path.with_name(f"ckpt.stale-{old_fingerprint}.pt")
        os.replace(self.ckpt_path, stale)
        print(f"checkpoint {self.ckpt_path} is from another config, training code or prepared data: moved to "
              f"{stale.name} (with any set aside earlier), its step log and metrics removed; training from scratch",
              file=sys.stderr)

    def clear_derived(self) -> None:
        """Remove what an earlier training wrote beside its checkpoint: a fresh start must not sit beside them."""
        for name in DERIVED_FILES:
            (self.out / name).unlink(missing_ok=True)
        shutil.rmtree(self.out / "dvclive", ignore_errors=True)

    def record_divergence(self, divergence: dict, logs: dict[str, list], perf: dict) -> None:
        """Keep the last good weights, but with the divergence (and the logs up to it) recorded, so a re-run does not
        train again."""
        s = read_checkpoint(self.ckpt_path, "cpu", "delete it and re-run to train from scratch")
        s["divergence"] = json.dumps(divergence)
        s.update({k: json.dumps(v) for k, v in logs.items()})
        s.update(perf)  # the time spent up to the divergence, not only up to the checkpoint kept
        save_checkpoint(s, self.ckpt_path)
