"""The codebase's shape, checked like lint: short functions, no module named like the standard library, no pointers to
files a user of the project does not have."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "src" / "miniformer").rglob("*.py"))
MAX_FUNCTION_LINES = 80


def functions(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(n.name, n.end_lineno - n.lineno + 1) for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def test_sources_are_found():
    assert len(SOURCES) > 20 and (ROOT / "src" / "miniformer" / "network" / "model.py") in SOURCES


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT / "src")))
def test_no_function_is_longer_than_80_lines(path):
    """A function a reader cannot see whole on one screen is split into named steps."""
    long = [f"{name} ({n} lines)" for name, n in functions(path) if n > MAX_FUNCTION_LINES]
    assert not long, f"{path.name}: {', '.join(long)}; split it (limit {MAX_FUNCTION_LINES} lines)"


def test_the_length_check_can_fail(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "long.py").write_text(f"def long():\n{body}\n")
    assert functions(tmp_path / "long.py") == [("long", MAX_FUNCTION_LINES + 1)]


def test_no_module_shadows_the_standard_library():
    """With src/miniformer on sys.path (a script run from inside it), a module named io or inspect replaces the
    standard library's for everything that imports it."""
    shadowing = [str(p.relative_to(ROOT)) for p in SOURCES if p.stem in sys.stdlib_module_names]
    assert not shadowing, f"rename {', '.join(shadowing)}: the standard library has a module of that name"


# a relative path that climbs out of the repository into another folder, or the course's own material
OUTSIDE = re.compile(r"(?<![\w.])\.\./[\w-]+/|seed notebook|the course's")


def test_the_outside_check_can_fail():
    assert OUTSIDE.search("facts in ../elsewhere/notes.md") and not OUTSIDE.search("a remote at ../../dvc-remote")


def test_no_reference_to_files_outside_the_repository():
    """Comments and docstrings cite papers and public projects, not files a user does not have."""
    tracked = [*SOURCES, *sorted((ROOT / "tests").glob("*.py")), *sorted((ROOT / "benchmarks").glob("*.py")),
               ROOT / "README.md", ROOT / "Snakefile", ROOT / "params.yaml", ROOT / "dvc.yaml"]
    hits = [f"{p.relative_to(ROOT)}:{i}" for p in tracked if p != Path(__file__)
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if OUTSIDE.search(line)]
    assert not hits, f"references outside the repository: {', '.join(hits)}"


@pytest.mark.parametrize("path", sorted((ROOT / "benchmarks").glob("*.py")), ids=lambda p: p.name)
def test_benchmarks_import(path, monkeypatch):
    """A benchmark is not run by the tests, but it must still import after the code it measures is reorganised."""
    import importlib.util

    monkeypatch.syspath_prepend(str(path.parent))
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))


def test_code_defaults_are_the_shipped_baseline():
    """One set of baseline values: every key the shipped params.yaml sets in a base section equals the code default,
    so the dataclasses and the file cannot tell a reader two different studies."""
    import dataclasses

    import yaml

    from miniformer.network.model import ModelConfig
    from miniformer.params import DataConfig, EvalConfig, FindingsConfig, TrainConfig

    shipped = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    disagree = []
    for section, cls in {"data": DataConfig, "model": ModelConfig, "train": TrainConfig, "eval": EvalConfig,
                         "findings": FindingsConfig}.items():
        defaults = {f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()
                    for f in dataclasses.fields(cls)}
        disagree += [f"{section}.{k}: params.yaml {v!r}, code {defaults[k]!r}"
                     for k, v in shipped[section].items() if defaults[k] != v]
    assert not disagree, "; ".join(disagree)


@pytest.mark.parametrize("ci,outcome", [("true", "fail"), ("", "skip")])
def test_a_missing_system_tool_skips_on_a_laptop_and_fails_under_ci(monkeypatch, ci, outcome):
    from tests.conftest import require_system

    monkeypatch.setenv("CI", ci)
    expected = pytest.fail.Exception if outcome == "fail" else pytest.skip.Exception
    with pytest.raises(expected, match="apt-get install chromium"):
        require_system(False, "needs a browser: apt-get install chromium")
    require_system(True, "present: nothing happens")


def test_version_license_and_citation_are_there(capsys):
    from importlib.metadata import version

    from miniformer.cli import main

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"miniformer {version('miniformer')}"
    assert "MIT License" in (ROOT / "LICENSE").read_text()
    import yaml

    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0" and citation["version"] == version("miniformer")


def test_every_claim_cites_a_reference_the_readme_and_report_list():
    from miniformer.study.bibliography import REFERENCES, key_of
    from miniformer.study.claims import CLAIMS

    readme = (ROOT / "README.md").read_text()
    for claim in CLAIMS:
        assert key_of(claim.source) in REFERENCES or claim.source == "first principles", claim.source
    for key, ref in REFERENCES.items():
        assert f"**{key}**: {ref}" in readme, key
        assert "arXiv:" in ref.where or "report" in ref.where
