"""Hashes of the source that shapes results, so that a code change invalidates exactly what it should.

Both tools use them: a checkpoint records the training-code hash in its fingerprint (a changed model is never resumed
from an old checkpoint), and the Snakefile folds them into its per-run signature files (Snakemake re-runs what the
change touches, as DVC does through its `deps`). The lists match dvc.yaml's deps; a test keeps them in step.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # the miniformer package
# Package-relative paths; a folder stands for every .py file under it.
TRAINING_CODE = ("network", "runtime/batches.py", "runtime/optim.py", "runtime/schedule.py", "runtime/scoring.py",
                 "runtime/spikes.py", "training", "stages/train.py")
EVALUATION_CODE = ("evaluation", "runtime/ngram.py", "stages/evaluate.py")
INIT_PROBE_CODE = ("network", "evaluation/init_uniformity.py", "evaluation/uniformity.py", "stages/init_probe.py")


def source_files(entries: tuple[str, ...]) -> list[Path]:
    """The files the entries name, folders expanded to their .py files in a fixed order."""
    out: list[Path] = []
    for entry in entries:
        path = PACKAGE_DIR / entry
        out += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return out


def files_digest(root: Path, paths: list[Path]) -> str:
    """sha256 over files in the given order (root-relative name + bytes), first 16 hex digits: a rename or an edit
    changes it."""
    h = hashlib.sha256()
    for path in paths:
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


@functools.cache
def code_hash(entries: tuple[str, ...]) -> str:
    """The digest of the named package files."""
    return files_digest(PACKAGE_DIR, source_files(entries))
