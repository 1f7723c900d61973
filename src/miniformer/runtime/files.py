"""Atomic file writes: a reader never sees a half-written file, even if the writer is killed mid-write."""

from __future__ import annotations

import json
import math
import os
import tempfile
from glob import escape as glob_escape
from pathlib import Path
from typing import Any

import torch

from miniformer.errors import UserError

# what to run when a file a stage writes is missing: the default remedy of the readers below
STAGES_FIRST = "run its train/evaluate stage first (snakemake or dvc repro)"


def _atomic(path: Path, write) -> None:
    """Write to a temporary file beside ``path``, then rename it over ``path``: the old file stays whole until the new
    one is. A failure to write (disk full, read-only folder) is one line naming the file; the old file is kept."""
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for stale in path.parent.glob(f".{glob_escape(path.name)}.*.tmp"):  # a writer killed before its rename
            stale.unlink(missing_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600 files; results are meant to be shared
        os.replace(tmp, path)
    except (OSError, RuntimeError) as e:  # torch.save reports a full disk as a RuntimeError ("unexpected pos")
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        kept = " (the previous version is kept)" if path.exists() else ""
        if isinstance(e, OSError):
            reason = e.strerror or str(e)
        else:
            reason = f"{(str(e).strip().splitlines() or ['write failed'])[-1][:100]}: is the disk full?"
        raise UserError(f"cannot write {str(path)!r}: {reason}{kept}; free disk space or make the folder "
                        "writable, then re-run") from None
    except BaseException:
        if tmp is not None:
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


def read_json(path: Path, remedy: str = STAGES_FIRST) -> Any:
    """A JSON file the study wrote; missing or unreadable is one line naming the file and ``remedy`` (the command
    that rewrites it)."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{str(path)!r} is missing; {remedy}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) else f"not valid JSON: {str(e).splitlines()[0]}"
        raise UserError(f"{str(path)!r} cannot be read ({reason}); {remedy}") from None


def atomic_torch_save(obj: Any, path: Path) -> None:
    _atomic(path, lambda f: torch.save(obj, f))


def read_json_folder(folder: Path) -> dict:
    """Every ``*.json`` file in ``folder`` by its stem (empty when the folder does not exist)."""
    return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(Path(folder).glob("*.json"))}
