"""Atomic file writes: a reader never sees a half-written file, even if the writer is killed mid-write."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import torch


def _atomic(path: Path, write) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600 files; results are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    _atomic(path, lambda f: f.write(data))


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def finite_or_none(x: Any) -> Any:
    """JSON has no NaN/inf: non-finite numbers become null (a diverged run's losses), recursively."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: finite_or_none(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [finite_or_none(v) for v in x]
    return x


def write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(finite_or_none(obj), indent=1, ensure_ascii=False, allow_nan=False) + "\n")


def atomic_torch_save(obj: Any, path: Path) -> None:
    _atomic(path, lambda f: torch.save(obj, f))
