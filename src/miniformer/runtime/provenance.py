"""Provenance: which training, evaluation and data made a number, and whether a file still holds what was written.

Three ideas, used by every stage that writes a number and every command that reads one:
- fingerprints name what produced a file: the training (config + training code + the prepared data's content,
  runtime/checkpoints.py), the evaluation (that training + the eval params + the evaluation code);
- a *sealed* JSON file carries a checksum of its own content, so a hand edit is found, not read as a result;
- the file a stage writes last records the digests of the files it wrote before it (eval.json records windows.json,
  attention.json, generations.json), so a stage killed half-way leaves files that do not match and are refused.
This is tamper *evidence* for honest mistakes (an edited number, a mixed folder), not security.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from miniformer.errors import UserError
from miniformer.runtime.files import finite_or_none, read_json, write_json

CHECKSUM = "checksum"  # the key a sealed JSON file keeps its own checksum under


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def content_checksum(obj: dict) -> str:
    """The checksum of a JSON object's content (its own checksum key left out), independent of key order and
    indentation: json round-trips floats exactly, so what was written and what is read back hash the same."""
    body = {k: v for k, v in obj.items() if k != CHECKSUM}
    return _digest(json.dumps(body, sort_keys=True, ensure_ascii=False, allow_nan=False).encode("utf-8"))


def write_sealed_json(path: Path, obj: dict) -> None:
    clean = finite_or_none(obj)
    write_json(path, {**clean, CHECKSUM: content_checksum(clean)})


def read_sealed_json(path: Path, remedy: str) -> dict:
    """A sealed file, refused in one line when it is missing, unreadable, unsealed or edited since it was written."""
    obj = read_json(path, remedy)
    if not isinstance(obj, dict) or CHECKSUM not in obj:
        raise UserError(f"{str(path)!r} carries no checksum (written by an older miniformer, or not by miniformer); "
                        f"{remedy}")
    if obj[CHECKSUM] != content_checksum(obj):
        raise UserError(f"{str(path)!r} does not match the checksum it was written with (edited since?); {remedy}")
    return obj


def file_digest(path: Path) -> str:
    """Digest of a file's bytes (what a sealed file records of the files written before it)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


def digests(folder: Path, names: list[str] | tuple[str, ...]) -> dict[str, str]:
    return {name: file_digest(Path(folder) / name) for name in names}


def check_digest(folder: Path, name: str, recorded: dict, recorder: str, remedy: str) -> None:
    """``folder/name`` is the file ``recorder`` recorded; otherwise one line (a stage killed between the two writes,
    or an edit, leaves them apart)."""
    path = Path(folder) / name
    if name not in recorded:
        raise UserError(f"{str(path)!r} is not recorded in {recorder!r}; {remedy}")
    if not path.exists():
        raise UserError(f"{str(path)!r} is missing; {remedy}")
    if file_digest(path) != recorded[name]:
        raise UserError(f"{str(path)!r} is not the file {recorder!r} recorded (a stage stopped between writing them, "
                        f"or an edit); {remedy}")


def combine(*parts: Any) -> str:
    """A fingerprint from parts (dicts, strings): order matters, key order inside dicts does not."""
    return _digest(json.dumps(parts, sort_keys=True, default=str).encode("utf-8"))
