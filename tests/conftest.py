"""Shared fixtures: a small self-made corpus and a tiny study around it (no download, seconds to train)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

# One thread: the tests' models are tiny, and on a shared 2-core box a second torch thread waiting for a busy core
# made a 10-second test take minutes.
torch.set_num_threads(1)

# No DVC usage reports from the tests: every dvc command otherwise forks a daemon that tries to send one (a test box
# has no network), a process per command for nothing.
os.environ.setdefault("DVC_NO_ANALYTICS", "1")

# Bytecode caches written, as a user's Python writes them: a box that set PYTHONDONTWRITEBYTECODE hid that DVC hashes
# every file of a folder dependency, __pycache__/ too (.dvcignore now leaves them out), and had every process compile
# the package's modules again.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

ROOT = Path(__file__).resolve().parents[1]

# The longest files first, by the CPU each used in a measured `make test` (tests/README.md): under `make test`
# (pytest-xdist, one file per worker at a time, `--no-loadscope-reorder` so xdist keeps this order rather than putting
# the files with the most tests first) each starts on a worker of its own while the short files fill in around them.
# Slurm's test mostly waits on its scheduler, so it goes early, beside the two longest. test_smoke_outputs.py reads
# the smoke study test_pipeline.py's worker builds first (smoke_study_built): it goes out once that build is likely
# done, rather than holding a worker while it waits. The sort is stable: each file keeps its own order.
LONGEST_FIRST = ("test_pipeline.py", "test_dvc_pipeline.py", "test_slurm.py", "test_notebook.py",
                 "test_smoke_outputs.py", "test_ladder.py",
                 "test_replication.py", "test_benchmarks.py", "test_hub.py", "test_course.py", "test_faults.py",
                 "test_extending.py", "test_fidelity.py", "test_provenance.py", "test_cluster_profile.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Back to one torch thread after every test: a training in the test's process sets its train.threads for the
    whole process (lab.course_params says 2), and every later test on that worker ran two threads on a shared core,
    spinning (tests/README.md: the fidelity file took twice the CPU after the notebook's in-process tests)."""
    yield
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def smoke_study_built(tmp_path_factory) -> Path:
    """The whole smoke study under Snakemake (`make smoke` in a copy of the project), built once for every test file
    that reads it: under pytest-xdist by whichever worker asks first, in the session's folder all workers share. Each
    file works on a copy of its own (tests/studies.copy_of), so the files run side by side."""
    from tests.studies import built_once, project_copy, sh

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # a worker's folder is the session's/gwN

    def build(folder: Path) -> None:
        folder.mkdir()
        project_copy(folder)
        sh(folder, "snakemake", "--cores", "2", "all", timeout=1500)  # ≈ 3 min alone; a shared CI box is slower

    return built_once(shared, "smoke-study", build)


def study_args(command: str, root: Path, params: Path | None = None) -> list[str]:
    """The study-wide flags ``command`` takes (and only those: it refuses a flag it would ignore), pointing at a
    test study under ``root``."""
    from miniformer.cli import COMMAND_FLAGS

    values = {"params": params or root / "params.yaml", "data": root / "data", "results": root / "results"}
    return [x for flag in COMMAND_FLAGS[command] if flag in values for x in (f"--{flag}", str(values[flag]))]


def loads_in_a_fresh_interpreter(code: str, module: str) -> bool:
    """Whether running ``code`` in a new Python process imports ``module`` (this process has imported too much to
    tell)."""
    code += f"\nimport sys; print({module!r} in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return out.strip().splitlines()[-1] == "True"


def require_system(present: bool, what: str) -> None:
    """A test that needs a system tool: on a laptop without it, a skip naming the package to install; under CI
    (CI=true, which .ci/run sets after installing the tools) a failure, so CI can never pass by skipping."""
    if present:
        return
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{what} (CI=true: CI installs it, so its absence is an error)")
    pytest.skip(what)

WORDS = (
    "the king queen night day love sword crown fair foul hath doth thou thee my lord lady speak hear "
    "what light through yonder window breaks soft moon sun star sea"
).split()


def make_text(n_lines: int = 3000, seed: int = 0) -> str:
    rng = random.Random(seed)
    lines = []
    for i in range(n_lines):
        if i % 6 == 0:
            lines.append(rng.choice(["Romeo:", "Juliet:", "Friar:", "Nurse:"]))
        lines.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9))).capitalize() + ".")
    return "\n".join(lines) + "\n"


def tiny_params(corpus: Path, **overrides) -> dict:
    params = {
        "profile": "default",
        "data": {"corpus": str(corpus), "tokenizer": "char", "val_frac": 0.1, "test_frac": 0.1},
        "model": {"block_size": 16, "n_layer": 2, "n_head": 2, "n_embd": 32},
        "train": {
            "steps": 30,
            "batch_size": 8,
            "lr": 0.003,
            "warmup": 5,
            "log_every": 5,
            "val_batches": 2,
            "sample_every": 15,
            "ckpt_every": 10,
            "sample_tokens": 20,
            "threads": 1,
        },
        "eval": {
            "max_tokens": 1024,
            "split_tokens": 2048,
            "probe_items": 4,
            "order_windows": 4,
            "order_pairs": 6,
            "length_multiples": [1, 2, 4],
            "probe": True,
            "gen_samples": 2,
        },
        "seeds": [0, 1],
        "profiles": {},
        "experiments": {
            "baseline": {"group": "reference", "hypothesis": "reference"},
            "pos_learned": {"group": "position", "model": {"pos": "learned"}},
            "obj_mlm": {"group": "objective", "train": {"objective": "mlm"}},
        },
    }
    for key, value in overrides.items():
        params[key] = value
    return params


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    p = tmp_path / "corpus.txt"
    p.write_text(make_text(), encoding="utf-8")
    return p


@pytest.fixture
def study_dir(tmp_path: Path, corpus: Path) -> Path:
    """A folder with a tiny params.yaml; tests chdir-free: they pass paths explicitly."""
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(tiny_params(corpus)), encoding="utf-8")
    return tmp_path
