"""Where a study keeps its files: the one home for the results layout every stage and command reads.

results/runs/<run>/seed<k>/   what training writes (checkpoint, step log, curve, samples, metrics)
results/eval/<run>/seed<k>/   what evaluation writes: beside, not inside, the run folder, since DVC forbids one stage's
                              outputs inside another's
<run> is an experiment name, or <experiment>/lr=<value> for a point of its learning-rate sweep. The Snakemake rules
spell the same layout as path patterns (workflow/rules/*.smk).
"""

from __future__ import annotations

from pathlib import Path

DATA_DIR = Path("data/prepared")
RAW_DIR = Path("data/raw")  # the study's corpus when it is a file: an input both tools watch (data/raw/README.md)
RESULTS = Path("results")


def seed_folder(seed: int) -> str:
    return f"seed{seed}"


def run_root(results: Path, run: str) -> Path:
    """The folder holding every seed of a run."""
    return Path(results) / "runs" / run


def run_dir(results: Path, run: str, seed: int) -> Path:
    return run_root(results, run) / seed_folder(seed)


def eval_dir(results: Path, run: str, seed: int) -> Path:
    return Path(results) / "eval" / run / seed_folder(seed)


def trained_runs(results: Path, run: str = "") -> list[Path]:
    """Every run folder with a checkpoint (of one run, when named), sweep points included."""
    return sorted(p.parent for p in run_root(results, run).rglob("seed*/ckpt.pt"))


def run_name(results: Path, folder: Path) -> str:
    """The run a run folder belongs to (its path under results/runs, without the seed)."""
    return Path(folder).parent.relative_to(run_root(results, "")).as_posix()


def seed_of(folder: Path) -> int:
    return int(Path(folder).name.removeprefix("seed"))

# What aggregate writes under results/ and the report reads, and the sealed file that records their digests and what
# made every run's numbers (the report refuses an aggregate edited or mixed since).
AGGREGATES = ("metrics.json", "headline.json", "windows.json", "perf.json")
PROVENANCE = "provenance.json"
INIT_FILE = "init_uniformity.json"  # under results/: token uniformity against depth at init (stages/init_probe.py)
# What a missing or unreadable result file asks the user to do.


def loss_at_key(multiple: int | str) -> str:
    """The metrics.json key of the loss at ``multiple`` × block_size (aggregate writes it; findings and report read)."""
    return f"loss_at_{multiple}x"


def past_block_key(multiple: int | str) -> str:
    """The metrics.json key of the loss on the positions past block_size when reading ``multiple`` × block_size (at
    2×: the first block past the training length, positions L … 2L)."""
    return f"loss_past_block_at_{multiple}x"


def multiple_of_key(key: str) -> int | None:
    """The length multiple a metrics key holds (loss_at_<m>x -> m); None for any other key."""
    return int(key[len("loss_at_"):-1]) if key.startswith("loss_at_") and key.endswith("x") else None
