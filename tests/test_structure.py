"""The codebase's shape, checked like lint: stages side by side over one runtime core, short functions and classes,
experiment names only in the claims table, a report template that only prints, no module named like the standard
library, no pointers to files a user of the project does not have."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "src" / "miniformer").rglob("*.py"))
MAX_FUNCTION_LINES = 60
MAX_CLASS_LINES = 150
PACKAGE = ROOT / "src" / "miniformer"
STAGES = PACKAGE / "stages"
CLAIMS_TABLE = (PACKAGE / "study" / "claims.py", PACKAGE / "study" / "roles.py")
TEMPLATES = sorted((STAGES / "templates").glob("*.j2"))


def functions(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(n.name, n.end_lineno - n.lineno + 1) for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def classes(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(n.name, n.end_lineno - n.lineno + 1) for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]


def imported_modules(source: str) -> set[str]:
    """Every module an import statement names, with ``from a import b`` also as a.b (b may be a module)."""
    out: set[str] = set()
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, ast.Import):
            out |= {a.name for a in n.names}
        elif isinstance(n, ast.ImportFrom) and n.module:
            out |= {n.module, *(f"{n.module}.{a.name}" for a in n.names)}
    return out


def stage_imports(path: Path, stages: set[str]) -> set[str]:
    """The stage modules (miniformer.stages.<name>) that the module at ``path`` imports, itself excluded."""
    own = f"miniformer.stages.{path.stem}"
    named = {".".join(m.split(".")[:3]) for m in imported_modules(path.read_text(encoding="utf-8"))
             if m.startswith("miniformer.stages.")}
    return {m for m in named if m.split(".")[2] in stages and m != own}


def experiment_literals(source: str, names: set[str]) -> list[tuple[int, str]]:
    """String constants that are an experiment's name or a path under one ("baseline", "baseline/seed0")."""
    return sorted((n.lineno, n.value) for n in ast.walk(ast.parse(source))
                  if isinstance(n, ast.Constant) and isinstance(n.value, str)
                  and (n.value in names or n.value.split("/")[0] in names and "/" in n.value))


def template_names(text: str, names: set[str]) -> list[str]:
    """Experiments a template names: quoted, or as an attribute (init_pair.block_post_norm)."""
    return sorted(e for e in names if re.search(rf"""['"]{e}['"]|\.{e}\b""", text))


def experiment_names() -> set[str]:
    import yaml

    return set(yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))["experiments"])


def template_calls(text: str) -> list[str]:
    """What a Jinja template calls (a method or function): the template must only print prepared values."""
    from jinja2 import Environment, nodes

    calls = Environment().parse(text).find_all(nodes.Call)
    return [f"line {c.lineno}: {getattr(c.node, 'attr', None) or getattr(c.node, 'name', '?')}()" for c in calls]


def test_no_stage_module_imports_another_stage_module():
    """Each stage stands on the runtime core, the network, training, evaluation and the study library — never on a
    sibling stage; and nothing below the stages imports one (the CLI dispatches to them; miniformer.load is
    export's)."""
    stages = {p.stem for p in STAGES.glob("*.py")} - {"__init__"}
    sideways = {f"{p.name} imports {sorted(stage_imports(p, stages))}" for p in STAGES.glob("*.py")
                if stage_imports(p, stages)}
    assert not sideways, f"stage modules importing each other: {sideways}; move the shared part to runtime/"
    # the CLI, the package root and the course notebook's lab (it prepares and trains, as the CLI does)
    entry_points = {PACKAGE / "cli.py", PACKAGE / "__init__.py", PACKAGE / "course" / "lab.py"}
    below = {str(p.relative_to(PACKAGE)) for p in SOURCES if STAGES not in p.parents and p not in entry_points
             and stage_imports(p, stages)}
    assert not below, f"modules under the stages importing one: {sorted(below)}"


def test_the_stage_import_check_can_fail(tmp_path):
    (tmp_path / "report.py").write_text("from miniformer.stages.crosscheck import read_crosscheck\n"
                                        "from miniformer.stages import train\nfrom miniformer.runtime import files\n")
    assert stage_imports(tmp_path / "report.py", {"crosscheck", "train", "report"}) == {
        "miniformer.stages.crosscheck", "miniformer.stages.train"}


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT / "src")))
def test_no_class_is_longer_than_150_lines(path):
    """A class that does many things is split by concern (as Trainer and the evaluation probes were)."""
    long = [f"{name} ({n} lines)" for name, n in classes(path) if n > MAX_CLASS_LINES]
    assert not long, f"{path.name}: {', '.join(long)}; split it (limit {MAX_CLASS_LINES} lines)"


def test_the_class_length_check_can_fail(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_CLASS_LINES))
    (tmp_path / "big.py").write_text(f"class Big:\n{body}\n")
    assert classes(tmp_path / "big.py") == [("Big", MAX_CLASS_LINES + 1)]


def test_experiment_names_live_in_params_and_the_claims_table_only():
    """params.yaml says "add an experiment, no code changes": code outside the claims table gets runs by role
    (study/roles.py) or by group, so renaming an experiment is an edit in params.yaml and the claims table."""
    names = experiment_names()
    hits = [f"{p.relative_to(PACKAGE)}:{line} {value!r}" for p in SOURCES if p not in CLAIMS_TABLE
            for line, value in experiment_literals(p.read_text(encoding="utf-8"), names)]
    hits += [f"{t.name}: {e}" for t in TEMPLATES for e in template_names(t.read_text(encoding="utf-8"), names)]
    assert not hits, f"experiment names outside the claims table: {hits}"


def test_the_experiment_name_check_can_fail():
    names = {"baseline", "pos_t5"}
    assert experiment_literals('x = m.get("baseline")\ny = "pos_t5/seed0"\nz = "the baseline run"', names) == [
        (1, "baseline"), (2, "pos_t5/seed0")]
    assert template_names("{{ m.mean('pos_t5', 'x') }} {{ pair.baseline }}", names) == ["baseline", "pos_t5"]
    assert template_names("the baseline's val loss", names) == []  # prose is not a name


@pytest.mark.parametrize("path", TEMPLATES, ids=lambda p: p.name)
def test_the_report_template_calls_nothing(path):
    """The report computes; the template prints (findings and report.py prepare every value it shows)."""
    assert not template_calls(path.read_text(encoding="utf-8"))


def test_the_template_call_check_can_fail():
    assert template_calls("{{ m.mean('a', 'b') or 0 }}{% for k, v in d.items() %}{% endfor %}{{ x|round(2) }}") == [
        "line 1: mean()", "line 1: items()"]


def test_sources_are_found():
    assert len(SOURCES) > 20 and (ROOT / "src" / "miniformer" / "network" / "model.py") in SOURCES


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT / "src")))
def test_no_function_is_longer_than_60_lines(path):
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


def test_the_params_schema_is_generated_from_the_dataclasses_and_fits_params_yaml():
    """workflow/schemas/params.schema.json is what miniformer.schema writes (regenerate it after changing a config
    dataclass), the shipped params.yaml fits it, and a misspelt key does not."""
    import copy

    import jsonschema
    import yaml

    from miniformer.schema import params_schema, schema_text

    path = ROOT / "workflow" / "schemas" / "params.schema.json"
    assert path.read_text(encoding="utf-8") == schema_text(), (
        "regenerate it: python -m miniformer.schema > workflow/schemas/params.schema.json")
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    jsonschema.validate(params, params_schema())
    misspelt = copy.deepcopy(params)
    misspelt["experiments"]["pos_t5"]["model"]["n_layr"] = 2
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(misspelt, params_schema())


def test_every_dvc_stage_has_a_place_in_the_record_order(tmp_path):
    """dvc-record commits the stages Snakemake ran in DAG order; a stage it does not know would stop the record."""
    import yaml

    from miniformer.stages.dvc_record import STAGE_ORDER, stages_ran

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    names = [f"{name}@pos_t5" if "foreach" in spec else name for name, spec in stages.items()]
    assert all(any(n.startswith(p) for p in STAGE_ORDER) for n in names)
    ran = tmp_path / "ran.txt"
    ran.write_text("\n".join(reversed(names)) + "\n")
    assert stages_ran(ran) == sorted(names, key=lambda n: [n.startswith(p) for p in STAGE_ORDER].index(True))
    assert stages_ran(ran)[0] == "check_params" and stages_ran(ran)[-1] == "report"


# --- the README's layout map -----------------------------------------------------------------------------------------


def layout_map() -> set[str]:
    """The modules the README's layout map names, as package-relative paths: a `folder/` line opens a folder, and every
    `name.py` until the next folder line (or a top-level line) belongs to it."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme[readme.index("```\nsrc/miniformer/\n") + 4:]
    block = block[:block.index("```")]
    named, folder = set(), ""
    for line in block.splitlines()[1:]:
        top = re.match(r"^  (\S+)", line)
        if top:
            folder = top.group(1) if top.group(1).endswith("/") else ""
        named |= {folder + name for name in re.findall(r"\b\w+\.py\b", line)}
    return named


def test_every_module_is_in_the_readme_layout_map_and_every_module_it_names_exists():
    modules = {p.relative_to(PACKAGE).as_posix() for p in SOURCES if p.name != "__init__.py"}
    named = layout_map()
    assert not modules - named, f"modules missing from the README's layout map: {sorted(modules - named)}"
    assert not named - modules, f"the README's layout map names modules that do not exist: {sorted(named - modules)}"


def test_the_readme_and_the_network_docstring_name_every_registered_position_method():
    from miniformer.network.positions import POSITIONS

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    line = next(li for li in readme.splitlines() if li.strip().startswith("positions.py"))
    said = line[line.index("(") + 1:line.index(")")].lower()
    assert {m for m in POSITIONS if m not in said} == set(), f"the README's positions line misses methods: {said}"
    table = readme[readme.index("| 3 positions ("):]
    table = table[:table.index(")")].lower()
    assert all(m in table for m in POSITIONS), f"the course table's positions row misses methods: {table}"
