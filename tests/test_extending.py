"""Extending the study as a newcomer would: a new position method is one class in positions.py and one params.yaml
entry, a new probe is one module in evaluation/. In a copy of the project, a toy of each is added that way alone; the
test then checks they reach what they should with no other edit: the method trains and appears in the report's
position section, the cross-check refuses it in one line (the peer has no such method); the probe's value reaches
eval.json and its scalar metrics.json, its reading a table of the report, and its file the run job's declared outputs
(slow: a training and a report)."""

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

TOY_PROBE = '''"""A probe added for a test: one number about the subject, a file of its own, a report reading."""

from miniformer.evaluation.subject import Measured, Probe, Reading, Subject


def toy(s: Subject) -> Measured:
    return Measured({"toy": {"block_size_twice": 2 * s.T}}, files={"toy.json": {"block_size": s.T}})


def toy_scalars(ev: dict) -> dict:
    return {"toy_block_size_twice": ev.get("toy", {}).get("block_size_twice")}


PROBES = (Probe(toy, toy_scalars, order=95, files=("toy.json",), title="Toy probe: the block size, twice",
                readings=(Reading("twice the block", "toy_block_size_twice", "{:.0f}"),)),)
'''

TOY_EXPERIMENT = """  pos_toy:
    peer: true
    group: position
    hypothesis: "A toy method added by a test reaches the position section."
    model: {pos: toy}
"""


def add_toys(study: Path) -> None:
    """The newcomer's edits, and nothing else: the class and its line in POSITIONS (the file methods live in), the
    probe's own module, the experiment in params.yaml."""
    package = study / "src" / "miniformer"
    positions = package / "network" / "positions.py"
    text = positions.read_text()
    registry = "\n\nPOSITIONS: dict[str, type[PositionMethod]] = {"
    assert registry in text
    text = text.replace(registry, TOY_METHOD + registry).replace("NoPosition)\n}", "NoPosition, ToyPositions)\n}")
    assert "ToyPositions)\n}" in text
    positions.write_text(text)
    (package / "evaluation" / "toy.py").write_text(TOY_PROBE)  # its own module, no list to edit
    params = study / "params.yaml"
    params.write_text(params.read_text().replace("experiments:\n", "experiments:\n" + TOY_EXPERIMENT, 1))


def miniformer(study: Path, *args: str, check: bool = True):
    return sh(study, "python", "-m", "miniformer", *args, check=check, timeout=600)


def test_a_toy_position_method_and_a_toy_probe_reach_the_report_metrics_and_crosscheck(tmp_path):
    study = project_copy(tmp_path / "study", keep=("baseline",))
    add_toys(study)
    touched = sh(study, "git", "status", "--porcelain").stdout.split("\n")
    assert sorted(line[3:] for line in touched if line) == [
        "params.yaml", "src/miniformer/evaluation/toy.py", "src/miniformer/network/positions.py"]
    miniformer(study, "prepare")
    runs = [line.split() for line in miniformer(study, "list").stdout.splitlines()]
    assert ["pos_toy", "0"] in runs
    for experiment, seed in runs:
        miniformer(study, "run", experiment, "--seed", seed)
    miniformer(study, "aggregate")
    metrics = json.loads((study / "results" / "metrics.json").read_text())
    assert metrics["pos_toy"]["seed0"]["toy_block_size_twice"] == 2 * 32  # the smoke profile's block_size, twice
    assert all(run["toy_block_size_twice"] == 2 * 32 for run in metrics["baseline"].values())

    assert json.loads((study / "results" / "eval" / "pos_toy" / "seed0" / "toy.json").read_text()) == {"block_size": 32}

    miniformer(study, "report")
    html = (study / "report" / "report.html").read_text()
    section = html[html.index('<h2 id="3-positions">'):html.index('<h2 id="4-')]
    assert re.search(r"<t[dh][^>]*>\s*toy\s*</t[dh]>", section), "the toy method is missing from the position tables"
    start = html.index('<h2 id="more-probes">')
    probes = html[start:html.index("<h2", start + 1)]
    assert re.search(r"<h3[^>]*>Toy probe: the block size, twice</h3>", probes) and "<th>twice the block</th>" in probes
    assert "<tr><td>pos_toy (1)</td><td>64</td></tr>" in probes  # its one seed's value, in the format it declared

    # the workflow's run job declares the file the probe declares (a dry run: nothing trains)
    planned = sh(study, "snakemake", "-n", "--force", "--cores", "1", "results/eval/pos_toy/seed0/toy.json", "--config",
                 "profile=smoke", timeout=300).stdout
    job = planned[planned.index("rule run:"):]
    assert re.search(r"\n\s+output: [^\n]*results/eval/pos_toy/seed0/toy\.json", job), planned[-2000:]

    refused = miniformer(study, "crosscheck", "pos_toy", check=False)
    errors = [line for line in refused.stderr.splitlines() if line.strip()]
    assert refused.returncode == 2 and len(errors) == 1, refused.stderr
    assert "pos='toy'" in errors[0] and "peer: false" in errors[0]
