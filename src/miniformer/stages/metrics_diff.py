"""`miniformer metrics-diff`: every number of your results/metrics.json beside a reference's, key by key.

`dvc metrics diff` compares one file across git revisions; the reference in docs/ is another file, which it cannot
compare (it prints "-" for every key). This compares two files, the way `dvc metrics diff` prints two revisions:
path, old value, new value, change; the keys only one side has are listed as such.
"""

from __future__ import annotations

from pathlib import Path

from miniformer.errors import UserError
from miniformer.layout import PROVENANCE
from miniformer.runtime.files import read_json
from miniformer.runtime.provenance import check_digest, read_sealed_json

REFERENCE_METRICS = "default-study-metrics.json"  # in docs/, beside the reference's claims and report


def metrics_file(path: Path) -> Path:
    """A metrics.json, or the one a folder holds (a results folder, or docs/ with the reference)."""
    if path.is_dir():
        for name in ("metrics.json", REFERENCE_METRICS):
            if (path / name).is_file():
                return path / name
        raise UserError(f"{str(path)!r} holds no metrics.json or {REFERENCE_METRICS}; pass a metrics file or a "
                        "results folder")
    return path


def flatten(tree: object, prefix: str = "") -> dict[str, float | None]:
    """Numeric leaves by their dotted path (experiment.seed.metric); booleans, text and lists left out."""
    if isinstance(tree, dict):
        out: dict[str, float | None] = {}
        for key, value in tree.items():
            out |= flatten(value, f"{prefix}.{key}" if prefix else str(key))
        return out
    if tree is None or (isinstance(tree, int | float) and not isinstance(tree, bool)):
        return {prefix: tree}
    return {}


def diff_rows(mine: dict, theirs: dict, show_all: bool = False) -> list[tuple[str, str, str, str]]:
    """(path, reference, yours, change) for every key whose value differs (every key with ``show_all``)."""
    a, b = flatten(mine), flatten(theirs)
    rows = []
    for key in sorted(set(a) | set(b)):
        new, old = a.get(key), b.get(key)
        if key in a and key in b and new == old and not show_all:
            continue
        change = f"{new - old:+.6g}" if isinstance(new, int | float) and isinstance(old, int | float) else "—"
        rows.append((key, "absent" if key not in b else _text(old), "absent" if key not in a else _text(new), change))
    return rows


def _text(x: float | None) -> str:
    return "null" if x is None else f"{x:.6g}"


def is_metrics(tree: object) -> bool:
    """The shape `miniformer aggregate` writes: experiment → seed → {metric: value}."""
    def per_seed(seeds: object) -> bool:
        return isinstance(seeds, dict) and bool(seeds) and all(isinstance(m, dict) for m in seeds.values())

    return isinstance(tree, dict) and bool(tree) and all(per_seed(seeds) for seeds in tree.values())


def read_metrics(path: Path, remedy: str) -> dict:
    """A metrics file; when it sits in a results folder beside provenance.json, only as aggregate recorded it (an
    edited number is refused, as the report refuses it)."""
    tree = read_json(path, remedy)
    if not is_metrics(tree):
        raise UserError(f"{str(path)!r} is not a metrics file (experiment → seed → metric, as `miniformer aggregate` "
                        f"writes results/metrics.json); {remedy}")
    if path.name == "metrics.json" and (path.parent / PROVENANCE).exists():
        recorded = read_sealed_json(path.parent / PROVENANCE, "re-run `miniformer aggregate`")
        check_digest(path.parent, path.name, recorded.get("files", {}), str(path.parent / PROVENANCE),
                     "re-run `miniformer aggregate`, which rewrites it")
    return tree


def run_metrics_diff(results: Path, against: Path, show_all: bool = False) -> int:
    remedy = "pass --against a metrics.json (`miniformer aggregate` writes results/metrics.json)"
    mine_path, theirs_path = metrics_file(Path(results)), metrics_file(Path(against))
    mine = read_metrics(mine_path, "run the study, or `miniformer aggregate`")
    theirs = read_metrics(theirs_path, remedy)
    rows = diff_rows(mine, theirs, show_all)
    width = max([len("Path"), *(len(r[0]) for r in rows)])
    print(f"yours: {mine_path}   reference: {theirs_path}")
    print(f"{'Path':{width}}  {'Reference':>12}  {'Yours':>12}  {'Change':>12}")
    for key, old, new, change in rows:
        print(f"{key:{width}}  {old:>12}  {new:>12}  {change:>12}")
    shared = set(flatten(mine)) & set(flatten(theirs))
    print(f"{len(rows)} of {len(set(flatten(mine)) | set(flatten(theirs)))} numbers differ or are on one side only "
          f"({len(shared)} on both sides)" if not show_all else f"{len(rows)} numbers")
    return 0
