"""The read side of prepared data: memory-mapped token files, the tokenizer, and the checks that they fit a run."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

import numpy as np

from miniformer.errors import UserError
from miniformer.params import DataConfig
from miniformer.runtime.files import read_json
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
        self.data_hash = check_content(Path(data_dir), self.meta)
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


def content_hash(files: dict[str, bytes], tokenizer_json: str) -> str:
    """Digest of the token files (in split order) and the tokenizer: what the prepared data *is*, not its params."""
    h = hashlib.sha256()
    for name in SPLITS:
        h.update(name.encode() + b"\0" + files[f"{name}.bin"])
    h.update(tokenizer_json.encode("utf-8"))
    return h.hexdigest()[:16]


def data_hash_of(data_dir: Path) -> str:
    """The prepared data's content hash as meta.json records it (cheap: no token file is read)."""
    meta_path = Path(data_dir) / "meta.json"
    meta = read_json(meta_path, "run `miniformer prepare` first (or pass --data)")
    if "content_hash" not in meta:
        raise UserError(f"{str(meta_path)!r} was prepared by an older miniformer (no content hash); run "
                        "`miniformer prepare` again")
    return meta["content_hash"]


def check_content(data_dir: Path, meta: dict) -> str:
    """The token files hold what prepare wrote (their content hash is in every training fingerprint): an edited or
    half-copied token file would otherwise train or score a model on other data under the same name."""
    if "content_hash" not in meta:
        raise UserError(f"{str(data_dir)!r} was prepared by an older miniformer (no content hash); run "
                        "`miniformer prepare` again")
    try:
        files = {f"{n}.bin": (Path(data_dir) / f"{n}.bin").read_bytes() for n in SPLITS}
    except OSError as e:
        raise UserError(f"cannot read the token files in {str(data_dir)!r} ({e.strerror}); run `miniformer prepare` "
                        "again") from None
    if content_hash(files, meta["tokenizer_json"]) != meta["content_hash"]:
        raise UserError(f"the token files in {str(data_dir)!r} do not match its meta.json (edited, or copied in part); "
                        "run `miniformer prepare` again")
    return meta["content_hash"]


def check_same_tokenizer(ckpt: dict, meta: dict, run: str, data: str, remedy: str) -> None:
    """A checkpoint read with another tokenizer than it was trained with gives plausible nonsense: refuse it."""
    if ckpt.get("tokenizer_hash") != meta.get("tokenizer_hash"):
        raise UserError(f"run {run!r} was trained with another tokenizer than {data!r}; {remedy}")
