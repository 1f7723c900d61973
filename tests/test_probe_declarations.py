"""A probe is declared once, in its own module: evaluation/probes.py finds it, the workflow declares the files it
writes, the report shows its readings, and a key that no run has is refused by name instead of reading as "not run"."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from miniformer import evaluation
from miniformer.errors import UserError
from miniformer.evaluation import probes
from miniformer.evaluation.subject import Measured, Probe, Reading
from miniformer.stages import evaluate, report
from miniformer.study.findings import Metrics

TOY_MODULE = '''
from miniformer.evaluation.subject import Measured, Probe, Reading


def toy(s):
    return Measured({"toy": 1})


def toy_scalars(ev):
    return {"toy_one": ev.get("toy")}


PROBES = (Probe(toy, toy_scalars, order=ORDER, files=("toy.json",), readings=(Reading("one", "toy_one"),)),)
'''


@pytest.fixture
def toy_package(tmp_path, monkeypatch):
    """A module dropped into the evaluation package's search path, as a newcomer's file would be."""
    monkeypatch.setattr(evaluation, "__path__", [*evaluation.__path__, str(tmp_path)])
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("miniformer.evaluation.toy")]:
        del sys.modules[name]


def test_a_module_with_probes_is_found_in_its_order_and_nothing_else_is_edited(toy_package):
    (toy_package / "toy_probe.py").write_text(TOY_MODULE.replace("ORDER", "95"))
    found = probes.discover()
    names = [p.name for p in found]
    assert "toy_probe.toy" in names
    # between the attention maps (90) and the generations (100): the order it declares, not its file name's
    assert names.index("attention.probe_line_maps") < names.index("toy_probe.toy") \
        < names.index("generations.generations")
    assert [p.order for p in found] == sorted(p.order for p in found)
    assert [p.name for p in probes.PROBES] == [n for n in names if n != "toy_probe.toy"]  # the study's own, as before


def test_the_study_probes_keep_their_order_and_fine_tuning_comes_last():
    names = [p.name for p in probes.PROBES]
    assert names[0] == "losses.split_losses" and names[-1] == "finetune.finetune"  # the fine-tune trains a copy
    assert probes.PROBE_FILES == ("attention.json", "generations.json")


@pytest.mark.parametrize("clash", ["order", "file"])
def test_two_probes_that_claim_the_same_order_or_file_are_refused(toy_package, clash):
    order = 90 if clash == "order" else 95  # 90: the attention maps'
    module = TOY_MODULE.replace("ORDER", str(order))
    if clash == "file":
        module = module.replace('"toy.json"', '"attention.json"')
    (toy_package / "toy_clash.py").write_text(module)
    with pytest.raises(UserError, match=f"the same {clash} .*toy_clash.toy.*: give each its own \\(taken: "):
        probes.discover()


def test_every_probe_gives_its_keys_when_it_did_not_apply():
    """The scalars contract the unknown-key check stands on: a probe that did not run still gives its keys (None), so
    a key no run has is a misspelling, never a probe that did not apply. (The length sweep's keys follow the study's
    eval.length_multiples and the split losses' causal-mask key its objectives: those are read with a fallback.)"""
    for probe in probes.PROBES:
        if probe.name in ("losses.length_sweep",):
            continue
        assert probe.scalars({}), f"{probe.name} gives no keys when it did not apply"
        assert all(v is None for v in probe.scalars({}).values()), probe.name


def test_role_swap_gives_every_swap_key_when_it_did_not_run():
    from miniformer.evaluation.role_swap import SWAPS, role_swap_scalars

    assert role_swap_scalars({}) == {f"role_swap_{name}": None for name in SWAPS}
    assert role_swap_scalars({"role_swap": {"intact": 1.5}})["role_swap_intact"] == 1.5


@pytest.mark.parametrize("written", [{}, {"toy.json": {}, "other.json": {}}, {"other.json": {}}])
def test_evaluate_refuses_a_probe_whose_files_differ_from_what_it_declares(written):
    probe = Probe(lambda s: Measured({}), lambda ev: {}, order=1, files=("toy.json",))
    with pytest.raises(UserError, match="declares files"):
        evaluate.check_declared_files(probe, Measured({}, files=written))
    evaluate.check_declared_files(probe, Measured({}, files={"toy.json": {}}))  # what it declares: passes


def fake_inputs(nested: dict) -> SimpleNamespace:
    return SimpleNamespace(study=SimpleNamespace(names=lambda: list(nested)), m=Metrics(nested), results=None)


def test_declared_readings_become_a_table_with_a_row_per_experiment_that_has_a_value(monkeypatch):
    toy = Probe(lambda s: Measured({}), lambda ev: {}, order=1, title="Toy",
                readings=(Reading("one", "toy_one"), Reading("two", "toy_two", "{:.1f}")))
    monkeypatch.setattr(report, "REPORTED", (toy,))
    nested = {"a": {"seed0": {"toy_one": 1.0, "toy_two": 2.0}, "seed1": {"toy_one": 2.0, "toy_two": None}},
              "b": {"seed0": {"toy_one": None, "toy_two": None}}}
    tables = report.declared_probes_section(fake_inputs(nested))["probe_tables"]
    assert tables == [{"title": "Toy", "labels": ["one", "two"], "rows": [("a", 2, ["1.500", "2.0"])]}]


def test_a_reading_or_claim_key_no_run_has_is_refused_in_one_line(monkeypatch):
    toy = Probe(lambda s: Measured({}), lambda ev: {}, order=1, readings=(Reading("one", "toy_onne"),))
    monkeypatch.setattr(report, "REPORTED", (toy,))
    monkeypatch.setattr(report, "SECTIONS", (report.declared_probes_section,))
    monkeypatch.setattr(report, "statistics_section", lambda r, found: {})
    r = fake_inputs({"a": {"seed0": {"toy_one": 1.0}}})
    r.results = report.Path("results")
    with pytest.raises(UserError, match=r"'toy_onne' \(did you mean 'toy_one'\?\) for the readings of the probe "
                                        r"'test_probe_declarations.<lambda>' from .*no run there has"):
        report.sections_context(r, [])
    monkeypatch.setattr(report, "REPORTED", ())
    assert report.sections_context(fake_inputs({"a": {"seed0": {"toy_one": 1.0}}}), []) == {"probe_tables": []}


def test_a_sections_key_no_run_has_is_refused_naming_the_section(monkeypatch):
    def toy_section(r):
        r.m.mean("a", "val_los")
        return {}

    monkeypatch.setattr(report, "SECTIONS", (toy_section,))
    monkeypatch.setattr(report, "statistics_section", lambda r, found: {})
    r = fake_inputs({"a": {"seed0": {"val_loss": 1.0}}})
    r.results = report.Path("results")
    with pytest.raises(UserError, match=r"'val_los' \(did you mean 'val_loss'\?\) for the report's toy section from"):
        report.sections_context(r, [])


def test_metrics_name_the_keys_read_that_no_run_has():
    m = Metrics({"a": {"seed0": {"val_loss": 1.0, "x": None}}})
    m.mean("a", "val_loss"), m.values("a", "x"), m.any_true("a", "diverged")
    read = m.reader("val_loss_with_causal_mask", "val_loss")  # the first may be missing, the last may not
    assert read({"val_loss": 2.0}) == 2.0 and read({"val_loss_with_causal_mask": 3.0, "val_loss": 2.0}) == 3.0
    assert m.unknown() == ["diverged"]
    m.reader("val_los")
    assert m.unknown() == ["diverged", "val_los"]
    assert Metrics({}).unknown() == []  # no runs at all: nothing to hold a key against


def test_a_key_read_is_named_with_who_read_it():
    m = Metrics({"a": {"seed0": {"val_loss": 1.0}}})
    m.values("a", "val_los")
    with m.asking("the claim 'X'"):
        m.mean("a", "val_los"), m.any_true("a", "divergd")
        with m.asking("the probe 'p'"):
            m.reader("val_los")
        m.reader("other")
    assert m.askers("val_los") == ["the claim 'X'", "the probe 'p'", "the report"]
    assert m.askers("divergd") == m.askers("other") == ["the claim 'X'"]


def test_each_claim_reads_its_keys_as_itself():
    """A claim's misspelt key is refused naming the claim: claims() reads each claim's keys under its name."""
    from miniformer.study.claims import claims
    from miniformer.study.findings import Evidence

    ev = Evidence({"baseline": {"seed0": {"val_loss": 2.0}}, "block_rmsnorm": {"seed0": {"val_loss": 2.1}}}, {})
    claims(ev)
    askers = {a for key in ev.m.asked for a in ev.m.askers(key)}
    assert askers and all(a.startswith("the claim '") for a in askers), askers
    assert "the claim 'RMSNorm ≈ LayerNorm'" in askers
