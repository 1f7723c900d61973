"""Hashes of the source files that shape results, so that a code change invalidates exactly what it should.

Both tools use them: a checkpoint records the training-code hash in its fingerprint (a changed model is never resumed
from an old checkpoint), and the Snakefile folds them into its per-run signature files (Snakemake re-runs what the
change touches, as DVC does through its `deps`). The file lists match dvc.yaml's deps; a test keeps them in step.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
TRAINING_CODE = ("attention.py", "positions.py", "model.py", "objectives.py", "scoring.py", "train.py")
EVALUATION_CODE = ("evaluate.py",)


@functools.cache
def code_hash(files: tuple[str, ...]) -> str:
    """sha256 over the named package files (name + bytes), first 16 hex digits."""
    h = hashlib.sha256()
    for name in files:
        h.update(name.encode() + b"\0" + (PACKAGE_DIR / name).read_bytes())
    return h.hexdigest()[:16]
