"""Extending the study as a newcomer would: a new position method is one class and one params.yaml entry, a new probe
is one module and one line in evaluation/probes.py. In a copy of the project, a toy of each is added that way alone;
the test then checks they reach what they should with no other edit: the method trains and appears in the report's
position section, the cross-check refuses it in one line (the peer has no such method), and the probe's value reaches
eval.json and its scalar metrics.json (slow: a training and a report)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.studies import project_copy, sh

pytestmark = pytest.mark.slow

TOY_METHOD = '''

class ToyPositions(Sinusoidal):
    """A position method added for a test: the sinusoidal table, under another name."""

    name = "toy"
'''

TOY_PROBE = '''"""A probe added for a test: one number about the subject, and the scalar it declares."""

from miniformer.evaluation.subject import Measured, Subject


def toy(s: Subject) -> Measured:
    return Measured({"toy": {"block_size_twice": 2 * s.T}})


def toy_scalars(ev: dict) -> dict:
    return {"toy_block_size_twice": ev.get("toy", {}).get("block_size_twice")}
'''

TOY_EXPERIMENT = """  pos_toy:
    peer: true
    group: position
    hypothesis: "A toy method added by a test reaches the position section."
    model: {pos: toy}
"""


def add_toys(study: Path) -> None:
    """The newcomer's edits, and nothing else: the class and its line in POSITIONS, the probe module and its line in
    PROBES, the experiment in params.yaml."""
    package = study / "src" / "miniformer"
    positions = package / "network" / "positions.py"
    text = positions.read_text()
    registry = "\n\nPOSITIONS: dict[str, type[PositionMethod]] = {"
    assert registry in text
    text = text.replace(registry, TOY_METHOD + registry).replace("NoPosition)\n}", "NoPosition, ToyPositions)\n}")
    assert "ToyPositions)\n}" in text
    positions.write_text(text)
    (package / "evaluation" / "toy.py").write_text(TOY_PROBE)
    probes = package / "evaluation" / "probes.py"
    imports = "from miniformer.evaluation import ("
    text = probes.read_text().replace(imports, imports + "\n    toy,")
    assert "    toy," in text  # the import edit took (probes.py imports its modules as one parenthesised list)
    registry = "PROBES: tuple[Probe, ...] = (\n"
    text = text.replace(registry, registry + "    Probe(toy.toy, toy.toy_scalars),\n")
    assert "Probe(toy.toy" in text
    probes.write_text(text)
    params = study / "params.yaml"
    params.write_text(params.read_text().replace("experiments:\n", "experiments:\n" + TOY_EXPERIMENT, 1))


def miniformer(study: Path, *args: str, check: bool = True):
    return sh(study, "python", "-m", "miniformer", *args, check=check, timeout=600)


def test_a_toy_position_method_and_a_toy_probe_reach_the_report_metrics_and_crosscheck(tmp_path):
    study = project_copy(tmp_path / "study", keep=("baseline",))
    add_toys(study)
    miniformer(study, "prepare")
    runs = [line.split() for line in miniformer(study, "list").stdout.splitlines()]
    assert ["pos_toy", "0"] in runs
    for experiment, seed in runs:
        miniformer(study, "run", experiment, "--seed", seed)
    miniformer(study, "aggregate")
    metrics = json.loads((study / "results" / "metrics.json").read_text())
    assert metrics["pos_toy"]["seed0"]["toy_block_size_twice"] == 2 * 32  # the smoke profile's block_size, twice
    assert all(run["toy_block_size_twice"] == 2 * 32 for run in metrics["baseline"].values())

    miniformer(study, "report")
    html = (study / "report" / "report.html").read_text()
    section = html[html.index('<h2 id="3-positions">'):html.index('<h2 id="4-')]
    assert re.search(r"<t[dh][^>]*>\s*toy\s*</t[dh]>", section), "the toy method is missing from the position tables"

    refused = miniformer(study, "crosscheck", "pos_toy", check=False)
    errors = [line for line in refused.stderr.splitlines() if line.strip()]
    assert refused.returncode == 2 and len(errors) == 1, refused.stderr
    assert "pos='toy'" in errors[0] and "peer: false" in errors[0]
