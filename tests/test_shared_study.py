"""The study several test files read is built once a session (tests/studies.built_once): by the first to ask, the
others waiting on its lock; a failed build is reported to each, never built again."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from tests.studies import built_once, copy_of


def test_many_askers_at_once_build_once_and_all_read_the_same_folder(tmp_path):
    builds: list[Path] = []
    gate = threading.Barrier(4)

    def build(folder: Path) -> None:
        builds.append(folder)
        time.sleep(0.1)  # a build takes a while: without the lock, every asker would start one
        folder.mkdir()
        (folder / "made").write_text("once")

    got: list[Path] = []

    def ask() -> None:
        gate.wait()  # all four at once: the lock, not the timing, keeps it to one build
        got.append(built_once(tmp_path, "study", build))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(builds) == 1 and got == [tmp_path / "study"] * 4
    assert (tmp_path / "study" / "made").read_text() == "once"


def test_a_failed_build_is_each_askers_error_and_is_not_tried_again(tmp_path):
    calls = []

    def build(folder: Path) -> None:
        calls.append(folder)
        raise RuntimeError("snakemake failed: rule run exited 1")

    with pytest.raises(RuntimeError, match="rule run exited 1"):
        built_once(tmp_path, "study", build)
    with pytest.raises(AssertionError, match="rule run exited 1"):
        built_once(tmp_path, "study", build)
    assert len(calls) == 1


def test_a_copy_keeps_the_files_and_their_times_and_leaves_the_original_alone(tmp_path):
    study = tmp_path / "study"
    (study / "results").mkdir(parents=True)
    out = study / "results" / "metrics.json"
    out.write_text("{}")
    os.utime(out, (1_000_000, 1_000_000))  # as Snakemake left it: a copy with fresh times would look newer
    copy = copy_of(study, tmp_path / "copy")
    assert (copy / "results" / "metrics.json").stat().st_mtime == 1_000_000
    (copy / "results" / "metrics.json").write_text("edited")
    assert out.read_text() == "{}"
