"""Helpers of the end-to-end tests: a copy of the project as a fresh study, commands run in it, edits a user makes."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


BIN = Path(sys.executable).parent


def sh(cwd: Path, *cmd: str, check: bool = True, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(cwd / "src"), "PATH": f"{BIN}:{os.environ['PATH']}"}
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    return done


def only_experiments(params_text: str, keep: tuple[str, ...]) -> str:
    """params.yaml's text with every experiment outside ``keep`` moved out of the smoke profile (`profiles: [gpu]`):
    a smaller smoke study for tests of the tools' wiring, where the profile's coverage is not what is under test."""
    import yaml

    names = list(yaml.safe_load(params_text)["experiments"])
    unknown = set(keep) - set(names)
    assert not unknown, f"no such experiments: {sorted(unknown)}"
    for name in names:
        if name in keep:
            continue
        block = re.search(rf"^  {name}:\n(?:    .*\n)*", params_text, flags=re.M).group(0)
        if "\n    profiles: " in block:
            limited = re.sub(r"^    profiles: .*$", "    profiles: [gpu]", block, flags=re.M)
        else:
            limited = block.replace(f"  {name}:\n", f"  {name}:\n    profiles: [gpu]\n", 1)
        params_text = params_text.replace(block, limited, 1)
    return params_text


def project_copy(dest: Path, keep: tuple[str, ...] | None = None) -> Path:
    """The project's files (tracked + new, not ignored) in a fresh git repo, with the smoke profile selected; with
    ``keep``, only those experiments run in it (``only_experiments``)."""
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    for f in filter(None, files):
        src = ROOT / f
        if src.is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / f)
    params = dest / "params.yaml"
    text = re.sub(r"^profile: \w+", "profile: smoke", params.read_text(), flags=re.M)
    params.write_text(text if keep is None else only_experiments(text, keep))
    sh(dest, "git", "init", "-q")
    sh(dest, "git", "add", "-A")
    sh(dest, "git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "copy")
    return dest


def set_lr(study: Path, experiment: str, lr: float) -> None:
    """Give one experiment a train.lr override (textual edit, as a user would)."""
    p = study / "params.yaml"
    text = p.read_text()
    text = (
        text.replace(f"  {experiment}:\n", f"  {experiment}:\n    train: {{lr: {lr}}}\n", 1)
        if f"  {experiment}:\n    train:" not in text
        else re.sub(rf"(  {experiment}:\n    train: \{{lr: )[0-9.]+", rf"\g<1>{lr}", text)
    )
    p.write_text(text)


def dvc_changed_stages(study: Path) -> set[str]:
    out = sh(study, "dvc", "status", "--json").stdout
    return set(json.loads(out or "{}"))


def readme_sample(heading: str) -> list[tuple[str, str]]:
    """(command, output) pairs of the README's ```text block after ``heading``: lines starting "$ " are commands."""
    text = (ROOT / "README.md").read_text(encoding="utf-8").split(heading, 1)[1]
    block = text.split("```text\n", 1)[1].split("```", 1)[0]
    pairs: list[tuple[str, str]] = []
    for line in block.splitlines(keepends=True):
        if line.startswith("$ "):
            pairs.append((line[2:].strip(), ""))
        elif pairs:
            pairs[-1] = (pairs[-1][0], pairs[-1][1] + line)
    return pairs


def planned_jobs(study: Path) -> dict[str, str]:
    out = sh(study, "snakemake", "-n", "--nolock")
    return dict(re.findall(r"^(\w+)\s+(\d+)$", out.stdout + out.stderr, flags=re.M))


def planned_reasons(study: Path, rule: str) -> dict[str, str]:
    """Snakemake's dry run: the reason it gives for every planned job of ``rule``, keyed by the job's wildcards."""
    out = sh(study, "snakemake", "-n", "--nolock")
    blocks = re.findall(rf"^rule {rule}:\n((?:    .*\n)+)", out.stdout + out.stderr, flags=re.M)
    reasons = {}
    for block in blocks:
        fields = dict(re.findall(r"^    (\w+): (.*)$", block, flags=re.M))
        reasons[fields.get("wildcards", "")] = fields.get("reason", "")
    return reasons


READS_HOOK = """
import os, runpy, sys
log = open(os.environ["READS_LOG"], "w")
def hook(event, args):
    if event == "open" and isinstance(args[0], (str, os.PathLike)):
        mode, flags = args[1], args[2]
        reading = ("r" in mode and "+" not in mode) if isinstance(mode, str) else (flags & os.O_ACCMODE) == os.O_RDONLY
        if reading:
            log.write(os.path.abspath(os.fspath(args[0])) + "\\n")
sys.addaudithook(hook)
sys.argv = ["miniformer", *sys.argv[1:]]
runpy.run_module("miniformer", run_name="__main__")
"""


def result_digests(study: Path) -> dict[str, str]:
    """sha256 of every result and report file (logs and signatures aside: each tool's bookkeeping)."""
    import hashlib

    return {str(p.relative_to(study)): hashlib.sha256(p.read_bytes()).hexdigest()
            for folder in ("results", "report") for p in sorted((study / folder).rglob("*"))
            if p.is_file() and "logs" not in p.parts and "signatures" not in p.parts}


def digests_of(study: Path, *names: str) -> dict[str, str]:
    import hashlib

    return {n: hashlib.sha256((study / n).read_bytes()).hexdigest() for n in names}


def built_once(shared: Path, name: str, build: Callable[[Path], None]) -> Path:
    """``shared / name``, made by ``build`` once in a test session by whichever pytest-xdist worker asks first: the
    others wait on a lock, then read what it made, or the error it failed with (one failed build, not one per file)."""
    import fcntl

    folder, built, failed = shared / name, shared / f"{name}.built", shared / f"{name}.failed"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not built.exists() and not failed.exists():
            shutil.rmtree(folder, ignore_errors=True)  # what a worker killed mid-build left
            try:
                build(folder)
            except Exception as error:
                failed.write_text(str(error)[-6000:])
                raise
            built.touch()
    if failed.exists():
        raise AssertionError(f"{name}, built for this session by another test file, failed:\n{failed.read_text()}")
    return folder


def copy_of(study: Path, dest: Path) -> Path:
    """A study's folder copied whole (its git repository, Snakemake's and DVC's records), times kept: both tools find
    the copy up to date, and a test edits it without touching the study another file reads."""
    shutil.copytree(study, dest, symlinks=True)
    return dest
