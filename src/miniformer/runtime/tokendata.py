"""The read side of prepared data: memory-mapped token files, the tokenizer, and the checks that they fit a run."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np

from miniformer.errors import UserError
from miniformer.params import DataConfig
from miniformer.tokenizer import tokenizer_from_json

SPLITS = ("train", "val", "test")


class TokenData:
    """Memory-mapped token files and the tokenizer of one prepared data folder."""

    def __init__(self, data_dir: Path) -> None:
        meta_path = Path(data_dir) / "meta.json"
        if not meta_path.exists():
            raise UserError(f"no prepared data at {str(data_dir)!r}; run `miniformer prepare` first")
        self.meta = json.loads(meta_path.read_text(encoding="utf-8"))
        self.tokenizer = tokenizer_from_json(self.meta["tokenizer_json"])
        self.splits = {n: np.memmap(Path(data_dir) / f"{n}.bin", dtype=np.uint16, mode="r") for n in SPLITS}

    def check_made_from(self, data: DataConfig, data_dir: Path) -> None:
        """Refuse token files prepared from other data params than the run asks for (before a checkpoint is touched)."""
        made_from = self.meta.get("params")
        if made_from is not None and made_from != asdict(data):
            changed = sorted(k for k in set(made_from) | set(asdict(data)) if made_from.get(k) != asdict(data).get(k))
            raise UserError(f"{str(data_dir)!r} was prepared with other data params ({', '.join(changed)}) than "
                            "params.yaml gives; run `miniformer prepare` first")

    @property
    def vocab_size(self) -> int:
        return int(self.meta["vocab_size"])


def check_same_tokenizer(ckpt: dict, meta: dict, run: str, data: str, remedy: str) -> None:
    """A checkpoint read with another tokenizer than it was trained with gives plausible nonsense: refuse it."""
    if ckpt.get("tokenizer_hash") != meta.get("tokenizer_hash"):
        raise UserError(f"run {run!r} was trained with another tokenizer than {data!r}; {remedy}")
