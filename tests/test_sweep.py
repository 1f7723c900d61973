"""Learning-rate sweeps as a params feature: expansion, configs, seeds, errors, and the DVC stage that runs them."""

from __future__ import annotations

import csv
import json

import pytest
import yaml

from miniformer.errors import UserError
from miniformer.params import Study
from tests.conftest import tiny_params

SWEEP = {"train.lr": [0.0005, 0.002, 0.01], "train.min_lr": [0.00005, 0.0002, 0.001]}


def study_with(sweep, corpus, **experiment) -> Study:
    params = tiny_params(corpus)
    params["experiments"]["baseline"]["sweep"] = sweep
    params["experiments"]["baseline"].update(experiment)
    return Study(params)


def test_sweep_expands_into_points_beside_the_experiment(corpus):
    study = study_with(SWEEP, corpus)
    lr = study.config("baseline", 0).train.lr
    expected = [f"baseline/lr={v}" for v in SWEEP["train.lr"] if v != lr]
    assert study.sweep_of("baseline") == ["baseline", *expected]
    for name, lr, min_lr in zip(SWEEP["train.lr"], SWEEP["train.lr"], SWEEP["train.min_lr"]):
        run = f"baseline/lr={name}"
        if run not in study.points:
            continue
        cfg = study.config(run, study.seeds[0])
        assert (cfg.train.lr, cfg.train.min_lr) == (lr, min_lr)  # zipped, not crossed
        assert cfg.model == study.config("baseline", 0).model and cfg.group == "reference"
        assert study.seeds_for(run) == study.seeds[:1] and study.parent(run) == "baseline"
    runs = study.runs()
    assert [r for r in runs if r[0].startswith("baseline/")] == [(p, study.seeds[0]) for p in expected]
    assert len([r for r in runs if r[0] == "baseline"]) == len(study.seeds)  # the experiment keeps every seed


def test_the_point_equal_to_the_experiment_is_not_run_twice(corpus):
    study = study_with({"train.lr": [0.001, 0.003]}, corpus, train={"lr": 0.003, "min_lr": 0.0001})
    assert study.sweep_of("baseline") == ["baseline", "baseline/lr=0.001"]


@pytest.mark.parametrize("sweep,message", [
    ({"lr": [0.1]}, "must be 'section.key'"),
    ({"data.corpus": ["x"]}, "must be 'section.key'"),
    ({"train.lr": 0.1}, "must be a non-empty list"),
    ({"train.lr": []}, "must be a non-empty list"),
    ({"train.lr": [0.1, 0.2], "train.min_lr": [0.01]}, "same length"),
    ({"train.lrr": [0.1]}, "unknown key"),
    ({"train.lr": ["fast"]}, "expected float"),
    ({"train.lr": [0.001, 0.001]}, "both named"),
    ([0.1], "must map"),
])
def test_bad_sweeps_are_one_clear_line(corpus, sweep, message):
    with pytest.raises(UserError, match=message):
        study_with(sweep, corpus)


def test_a_point_that_breaks_a_rule_is_refused_before_anything_runs(corpus):
    with pytest.raises(UserError, match="min_lr"):  # min_lr 0.002 > lr 0.0005: caught when the point's config builds
        study_with({"train.lr": [0.0005]}, corpus, train={"lr": 0.004, "min_lr": 0.002})


def test_run_experiment_trains_and_evaluates_every_point(tmp_path, corpus, monkeypatch):
    """The DVC stage of an experiment covers its sweep: the same run folders Snakemake's per-run jobs write."""
    from miniformer.cli import main

    params = tiny_params(corpus)
    params["experiments"] = {"baseline": {"group": "reference", "sweep": {"train.lr": [0.004]}}}
    params["seeds"] = [0]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    common = ["--params", str(tmp_path / "params.yaml"), "--results", str(tmp_path / "results"),
              "--data", str(tmp_path / "data")]
    assert main(["prepare", "--params", str(tmp_path / "params.yaml"), "--out", str(tmp_path / "data")]) == 0
    # the tiny params lack the report's claim experiments: the stage refuses, naming them
    assert main(["run-experiment", "baseline", *common]) != 0
    from miniformer.study import claims

    monkeypatch.setattr(claims, "required_experiments", lambda: set())
    assert main(["run-experiment", "baseline", *common]) == 0
    for run in ("baseline", "baseline/lr=0.004"):
        metrics = json.loads((tmp_path / "results" / "runs" / run / "seed0" / "metrics.json").read_text())
        assert metrics["steps_done"] == params["train"]["steps"]
        assert (tmp_path / "results" / "eval" / run / "seed0" / "windows.json").exists()
        curve = json.loads((tmp_path / "results" / "runs" / run / "seed0" / "curve.json").read_text())
        assert curve["points"][-1]["step"] == params["train"]["steps"]
    def column(run: str, name: str) -> list[float]:
        rows = list(csv.DictReader((tmp_path / "results" / "runs" / run / "seed0" / "log.tsv").open(),
                                   delimiter="\t"))
        return [float(r[name]) for r in rows]

    # a different learning rate trained a different model: the schedule and the losses differ, not only timings
    assert max(column("baseline", "lr")) == pytest.approx(params["train"]["lr"], rel=0.05)
    assert max(column("baseline/lr=0.004", "lr")) == pytest.approx(0.004, rel=0.05)
    assert column("baseline", "train_loss") != column("baseline/lr=0.004", "train_loss")


def test_an_experiment_limited_to_some_profiles_runs_only_there(tmp_path, corpus):
    """`profiles: [gpu]` keeps a run out of the default study (its budget) and in the gpu profile; DVC's stage for
    it still leaves its two output folders, saying why they are empty."""
    from miniformer.cli import main
    from tests.conftest import ROOT, study_args

    params = tiny_params(corpus)
    params["experiments"]["pos_learned"]["profiles"] = ["gpu"]
    assert "pos_learned" not in {e for e, _ in Study(params).runs()}
    assert "pos_learned" in {e for e, _ in Study(params, "gpu").runs()}
    params["experiments"]["pos_learned"]["profiles"] = ["laptop"]
    with pytest.raises(UserError, match=r"experiments\.pos_learned\.profiles"):
        Study(params)
    # the shipped study: the init-control pair runs in the smoke and gpu profiles, not in the default hour
    # (the default profile named, whatever profile the user's params.yaml names: tests never read the user's profile)
    shipped = Study.load(ROOT / "params.yaml", "default")
    assert "block_gpt2_init" in shipped.experiments and "block_gpt2_init" not in shipped.names()
    args = study_args("run-experiment", tmp_path, ROOT / "params.yaml")
    assert main(["run-experiment", "block_gpt2_init", *args, "--profile", "default"]) in (0, None)
    for stage in ("runs", "eval"):
        note = tmp_path / "results" / stage / "block_gpt2_init" / "NOT_RUN"
        assert "does not run in the default profile" in note.read_text()


def test_all_seeds_may_name_the_profiles_where_an_experiment_runs_every_seed(corpus):
    params = tiny_params(corpus)
    params["experiments"]["pos_learned"]["all_seeds"] = ["long"]
    params["profiles"] = {"long": {}, "default": {}}
    for profile, expected in [("long", params["seeds"]), ("default", params["seeds"][:1])]:
        assert Study({**params, "profile": profile}).seeds_for("pos_learned") == expected
    params["experiments"]["pos_learned"]["all_seeds"] = True
    assert Study({**params, "profile": "default"}).seeds_for("pos_learned") == params["seeds"]
