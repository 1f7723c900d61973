"""What DVC's YAML parsing costs with ruamel.yaml's C parser (ruamel.yaml.clib, pinned in the `pipeline` extra) and
without it (ruamel.yaml ≥ 0.19.1 no longer installs it): DVC's reads of params.yaml in one `dvc status`, and with
`--study` a whole `dvc status` of a built study, each against the same with the C parser in the same run.

DVC reads params.yaml once per stage that names its keys (every `run@` stage), and each read parses the whole file: on
the pure-Python parser that parsing was most of a `dvc status`, and of every `dvc repro`, `dvc exp run` and
`miniformer dvc-record`. Without the C parser ruamel falls back to its own; the "pure" rows hide the extension module
from the interpreter to get that fallback. Usage: python benchmarks/dvc_status.py [--trials N] [--study DIR]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HIDE_C = "import sys; sys.modules['_ruamel_yaml'] = None\n"  # an import of a module set to None fails: ruamel's own
# DVC's reads of params.yaml in one `dvc status`: once per stage that names its keys (every experiment's `run@`)
READS = """
import sys, time, yaml
from dvc.utils.serialize import load_yaml
reads = len(yaml.safe_load(open("params.yaml"))["experiments"])
t = time.perf_counter()
for _ in range(reads):
    load_yaml("params.yaml")
print(time.perf_counter() - t)
"""
STATUS = "import sys; from dvc.cli import main; sys.exit(main(['status', '-q']))"


def in_process(code: str, cwd: Path) -> float:
    """The seconds ``code`` prints."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, check=True).stdout
    return float(out.split()[-1])


def whole_process(code: str, cwd: Path) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=cwd)  # status -q exits 1 on a change
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--study", type=Path, help="a built study (after `make smoke`): also time `dvc status` there")
    args = ap.parse_args()
    try:
        import _ruamel_yaml  # noqa: F401
    except ImportError:
        sys.exit("ruamel.yaml.clib is not installed here: pip install -e '.[pipeline]' installs it")
    runs = {"params.yaml read once per experiment, C parser": (in_process, READS, ROOT),
            "params.yaml read once per experiment, pure-Python parser": (in_process, HIDE_C + READS, ROOT)}
    if args.study:
        runs |= {"`dvc status` of the study, C parser": (whole_process, STATUS, args.study),
                 "`dvc status` of the study, pure-Python parser": (whole_process, HIDE_C + STATUS, args.study)}
    rows: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.trials):  # alternated, so a busy moment of the box spreads over every row
        for name, (measure, code, cwd) in runs.items():
            rows[name].append(measure(code, cwd))
    print(f"| DVC's YAML parsing (median of {args.trials}) | seconds | × C parser |\n|---|---|---|")
    for name, values in rows.items():
        reference = statistics.median(rows[name.replace("pure-Python", "C")])
        print(f"| {name} | {statistics.median(values):.2f} | {statistics.median(values) / reference:.2f} |")


if __name__ == "__main__":
    main()
