"""Bad input: one clear line naming what is wrong, a non-zero exit, and nothing already computed lost."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from miniformer.cli import main
from miniformer.params import Study
from tests.conftest import tiny_params

ROOT = Path(__file__).resolve().parents[1]

REPO_PARAMS = Path(__file__).resolve().parents[1] / "params.yaml"


def run_cli(tmp_path: Path, params: dict, *args: str) -> int:
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    return main(
        [
            *args,
            "--params",
            str(tmp_path / "params.yaml"),
            "--data",
            str(tmp_path / "data"),
            "--results",
            str(tmp_path / "results"),
        ]
    )


def edit(params: dict, path: str, value) -> dict:
    *parents, leaf = path.split(".")
    node = params
    for p in parents:
        node = node.setdefault(p, {})
    node[leaf] = value
    return params


CASES = [
    ("unknown top-level key", lambda p: edit(p, "stpes", 3), "unknown key 'stpes'"),
    ("unknown nested key", lambda p: edit(p, "train.stpes", 3), "unknown key train.'stpes' (did you mean 'steps'?)"),
    ("unknown experiment key", lambda p: edit(p, "experiments.baseline.modle", {}), "experiments.baseline.'modle'"),
    ("wrong type", lambda p: edit(p, "train.steps", "many"), "train.steps = 'many' has type str, expected int"),
    ("bool for int", lambda p: edit(p, "model.n_layer", True), "model.n_layer = True has type bool"),
    ("unknown profile", lambda p: edit(p, "profile", "huge"), "unknown profile 'huge'"),
    ("unknown position", lambda p: edit(p, "model.pos", "xpos"), "unknown pos='xpos'"),
    ("unknown norm", lambda p: edit(p, "model.norm", "batchnorm"), "unknown norm='batchnorm'"),
    ("unknown objective", lambda p: edit(p, "train.objective", "gan"), "train.objective = 'gan'"),
    (
        "heads do not divide",
        lambda p: edit(p, "experiments.pos_learned.model", {"n_head": 3}),
        "experiments.pos_learned.model: n_embd=32 is not divisible by n_head=3",
    ),
    ("non-positive lr", lambda p: edit(p, "train.lr", 0.0), "train.lr = 0.0 must be > 0"),
    ("non-positive steps", lambda p: edit(p, "train.steps", 0), "train.steps = 0 must be > 0"),
    ("unknown tokenizer", lambda p: edit(p, "data.tokenizer", "wordpiece"), "data.tokenizer = 'wordpiece'"),
    (
        "BPE vocab too large",
        lambda p: edit(edit(p, "data.tokenizer", "bpe"), "data.vocab_size", 70000),
        "data.vocab_size = 70000",
    ),
    ("no baseline", lambda p: p["experiments"].pop("baseline") and p, "must contain 'baseline'"),
    ("bad group", lambda p: edit(p, "experiments.pos_learned.group", "misc"), "group = 'misc'"),
    ("no samples", lambda p: edit(p, "train.sample_every", 0), "train.sample_every = 0 must be > 0"),
    ("no val batches", lambda p: edit(p, "train.val_batches", 0), "train.val_batches = 0 must be > 0"),
    ("no lengths", lambda p: edit(p, "eval.length_multiples", []), "eval.length_multiples = [] must be a non-empty"),
    ("zero length", lambda p: edit(p, "eval.length_multiples", [0, 1]), "eval.length_multiples = [0, 1]"),
    ("no generations", lambda p: edit(p, "eval.gen_multiples", []), "eval.gen_multiples = [] must be"),
    ("negative split", lambda p: edit(p, "eval.split_tokens", -1), "eval.split_tokens = -1 must be >= 0"),
    ("zero probe", lambda p: edit(p, "eval.probe_items", 0), "eval.order_windows and eval.order_pairs must be > 0"),
    ("zero clip", lambda p: edit(p, "train.grad_clip", 0.0), "train.grad_clip = 0.0 must be > 0"),
    ("bad init", lambda p: edit(p, "model.init", "xavier"), "unknown init='xavier'"),
    ("block larger than the val split", lambda p: edit(p, "model.block_size", 4096), "use a longer corpus"),
    ("experiment escaping results/", lambda p: p["experiments"].update({"../evil": {"group": "block"}}) or p,
     "experiment name '../evil' may use only letters, digits and '_'"),
    ("experiment with a dash", lambda p: edit(p, "experiments.pos-x", {"group": "position"}),
     "experiment name 'pos-x' may use only"),
    ("corpus that never ends", lambda p: edit(p, "data.corpus", "/dev/zero"), "is not a regular file"),
    ("sweep of an unknown key", lambda p: edit(p, "experiments.baseline.sweep", {"train.lrr": [0.1]}),
     "unknown key"),
]


@pytest.mark.parametrize("name,mutate,message", CASES, ids=[c[0] for c in CASES])
def test_bad_params_one_line(tmp_path, corpus, capsys, name, mutate, message):
    params = mutate(tiny_params(corpus))
    assert run_cli(tmp_path, params, "prepare", "--out", str(tmp_path / "data")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert message in err[0], err[0]


def test_duplicate_key_in_params_is_refused(tmp_path, corpus, capsys):
    text = yaml.safe_dump(tiny_params(corpus)) + "seeds: [5]\n"  # a second top-level 'seeds'
    (tmp_path / "params.yaml").write_text(text)
    assert main(["prepare", "--params", str(tmp_path / "params.yaml"), "--out", str(tmp_path / "data")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "key 'seeds' appears twice" in err[0]
    assert not (tmp_path / "data").exists()  # nothing written


def test_a_fifo_corpus_is_refused_without_hanging(tmp_path, corpus, capsys):
    import os

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    params = edit(tiny_params(corpus), "data.corpus", str(fifo))
    assert run_cli(tmp_path, params, "prepare", "--out", str(tmp_path / "data")) == 2
    assert "is not a regular file" in capsys.readouterr().err


def test_an_oversized_corpus_is_refused(tmp_path, corpus, capsys, monkeypatch):
    from miniformer import corpus as corpus_module

    monkeypatch.setattr(corpus_module, "MAX_CORPUS_BYTES", 1000)
    assert run_cli(tmp_path, tiny_params(corpus), "prepare", "--out", str(tmp_path / "data")) == 2
    err = capsys.readouterr().err
    assert "is larger than" in err and "use a sample of it" in err


def test_the_dag_refuses_a_corpus_outside_data_raw(tmp_path, corpus, capsys, monkeypatch):
    """`prepare --versioned` (what both tools run) takes the plays or a file under data/raw/, which both tools watch;
    by hand, any path."""
    monkeypatch.chdir(tmp_path)
    params = tiny_params(corpus)
    assert run_cli(tmp_path, params, "prepare", "--versioned", "--out", str(tmp_path / "data")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "outside data/raw/" in err[0] and "move it into data/raw/" in err[0]
    assert not (tmp_path / "data").exists()  # nothing written
    inside = tmp_path / "data" / "raw" / "corpus.txt"
    inside.parent.mkdir(parents=True)
    inside.write_text(corpus.read_text())
    params = edit(params, "data.corpus", "data/raw/corpus.txt")
    assert run_cli(tmp_path, params, "prepare", "--versioned", "--out", str(tmp_path / "prepared")) == 0


def test_the_raw_data_hash_follows_every_file_under_data_raw(tmp_path):
    from miniformer.corpus import raw_data_hash

    (tmp_path / "a.txt").write_text("one")
    first = raw_data_hash(tmp_path)
    (tmp_path / "a.txt").write_text("two")
    edited = raw_data_hash(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("x")
    assert len({first, edited, raw_data_hash(tmp_path)}) == 3
    (tmp_path / "sub" / "b.txt").unlink()
    assert raw_data_hash(tmp_path) == edited


def test_unknown_experiment_on_the_cli(tmp_path, corpus, capsys):
    assert run_cli(tmp_path, tiny_params(corpus), "train", "pos_xpos", "--seed", "0") == 2
    assert "unknown experiment 'pos_xpos'" in capsys.readouterr().err


def test_repository_params_are_valid_under_every_profile():
    for profile in ("smoke", "default", "gpu"):
        study = Study.load(REPO_PARAMS, profile)
        assert study.runs()
        assert len(study.seeds_for("baseline")) >= 3


@pytest.fixture
def trained(tmp_path, corpus):
    params = tiny_params(corpus)
    assert run_cli(tmp_path, params, "prepare", "--out", str(tmp_path / "data")) == 0
    assert run_cli(tmp_path, params, "train", "baseline", "--seed", "0") == 0
    return tmp_path, params


def test_corrupt_checkpoint(trained, capsys):
    tmp_path, params = trained
    ckpt = tmp_path / "results" / "runs" / "baseline" / "seed0" / "ckpt.pt"
    ckpt.write_bytes(b"not a checkpoint")
    metrics = (tmp_path / "results" / "runs" / "baseline" / "seed0" / "metrics.json").read_text()
    assert run_cli(tmp_path, params, "train", "baseline", "--seed", "0") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is unreadable" in err[0]
    assert (tmp_path / "results" / "runs" / "baseline" / "seed0" / "metrics.json").read_text() == metrics


def test_checkpoint_from_another_config_on_resume(trained, capsys):
    tmp_path, params = trained
    params["train"]["lr"] = 0.001
    assert run_cli(tmp_path, params, "train", "baseline", "--seed", "0", "--resume") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "trained with a different config" in err[0]
    # without --resume the old checkpoint is set aside (not deleted) and training starts fresh
    assert run_cli(tmp_path, params, "train", "baseline", "--seed", "0") == 0
    assert (tmp_path / "results" / "runs" / "baseline" / "seed0" / "ckpt.stale.pt").exists()


def test_checkpoint_from_other_training_code_is_not_resumed(trained, capsys, monkeypatch):
    """Same params, edited model/training code (say, another RoPE convention): the old weights must not be reused."""
    tmp_path, params = trained
    import miniformer.params

    monkeypatch.setattr(miniformer.params, "code_hash", lambda files: "edited-code")
    assert run_cli(tmp_path, params, "train", "baseline", "--seed", "0", "--resume") == 2
    assert "different config or training code" in capsys.readouterr().err
    assert run_cli(tmp_path, params, "train", "baseline", "--seed", "0") == 0
    assert (tmp_path / "results" / "runs" / "baseline" / "seed0" / "ckpt.stale.pt").exists()


def test_code_hash_covers_what_dvc_declares():
    """The files whose hash invalidates checkpoints and Snakemake jobs are the code deps dvc.yaml declares."""
    from miniformer.codehash import EVALUATION_CODE, TRAINING_CODE

    stage = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]["run"]["do"]
    declared = {d.removeprefix("src/miniformer/") for d in stage["deps"] if d.startswith("src/")}
    assert declared == set(TRAINING_CODE) | set(EVALUATION_CODE)


def test_unwritable_results_folder(tmp_path, corpus, capsys):
    params = tiny_params(corpus)
    assert run_cli(tmp_path, params, "prepare", "--out", str(tmp_path / "data")) == 0
    blocker = tmp_path / "file"
    blocker.write_text("a file where a folder should be")
    rc = main(
        [
            "train",
            "baseline",
            "--seed",
            "0",
            "--params",
            str(tmp_path / "params.yaml"),
            "--data",
            str(tmp_path / "data"),
            "--results",
            str(blocker / "results"),
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "cannot write" in err[0], err
