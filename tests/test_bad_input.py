"""Bad input: one clear line naming what is wrong, a non-zero exit, and nothing already computed lost."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from miniformer.cli import main
from miniformer.errors import UserError
from miniformer.network.positions import POSITIONS
from miniformer.params import PROFILES, Study
from tests.conftest import loads_in_a_fresh_interpreter, study_args, tiny_params

ROOT = Path(__file__).resolve().parents[1]

REPO_PARAMS = Path(__file__).resolve().parents[1] / "params.yaml"


def run_cli(tmp_path: Path, params: dict, *args: str) -> int:
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    return main([*args, *study_args(args[0], tmp_path)])


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
    ("no reference", lambda p: p["experiments"].pop("baseline") and p, "exactly one experiment must have group"),
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
    # sweep values become folder names: a space, a path, a list are refused before anything is written
    ("sweep value with a space", lambda p: edit(p, "experiments.baseline.sweep", {"eval.probe_line": ["a b"]}),
     "value 'a b' cannot name a run folder"),
    ("sweep value escaping results/",
     lambda p: edit(p, "experiments.baseline.sweep", {"eval.probe_line": ["../../../../x"]}),
     "cannot name a run folder"),
    ("sweep value '..'", lambda p: edit(p, "experiments.baseline.sweep", {"eval.probe_line": [".."]}),
     "cannot name a run folder"),
    ("sweep of a list", lambda p: edit(p, "experiments.baseline.sweep", {"eval.length_multiples": [[1, 2]]}),
     "cannot name a run folder"),
    # findings settings change verdicts: typed and in range
    ("confidence 0", lambda p: edit(p, "findings.confidence", 0), "findings.confidence = 0 must be in [0.5, 0.999]"),
    ("confidence 0.9999", lambda p: edit(p, "findings.confidence", 0.9999), "confidence = 0.9999 must be in"),
    ("confidence 1.5", lambda p: edit(p, "findings.confidence", 1.5), "findings.confidence = 1.5 must be in"),
    ("confidence as a word", lambda p: edit(p, "findings.confidence", "high"),
     "findings.confidence = 'high' has type str, expected float"),
    ("bootstrap 0", lambda p: edit(p, "findings.bootstrap", 0), "findings.bootstrap = 0 must be >= 200"),
    ("bootstrap 2.5", lambda p: edit(p, "findings.bootstrap", 2.5), "findings.bootstrap = 2.5 has type float"),
    ("negative margin", lambda p: edit(p, "findings.equivalence_margin", -0.1), "equivalence_margin = -0.1"),
    ("unknown findings key", lambda p: edit(p, "findings.confidense", 0.9), "did you mean 'confidence'"),
    # every value has a type
    ("hypothesis as a list", lambda p: edit(p, "experiments.baseline.hypothesis", ["a", ["b"]]),
     "experiments.baseline.hypothesis = a list of 2 item(s) has type list, expected str"),
    ("hypothesis too long", lambda p: edit(p, "experiments.baseline.hypothesis", "x" * 5000),
     "experiments.baseline.hypothesis is 5000 characters long; at most 2000"),
    ("all_seeds as a word", lambda p: edit(p, "experiments.pos_learned.all_seeds", "yes"),
     "all_seeds = 'yes' must be true, false or a non-empty list of the profiles"),
    ("all_seeds naming an unknown profile", lambda p: edit(p, "experiments.pos_learned.all_seeds", ["lng"]),
     "all_seeds = 'lng' must be true, false or a non-empty list of the profiles"),
    ("zero heads", lambda p: edit(p, "model.n_head", 0), "n_head=0 must be a positive integer"),
    ("zero width", lambda p: edit(p, "model.n_embd", 0), "n_embd=0 must be a positive integer"),
    ("duplicate seeds", lambda p: edit(p, "seeds", [0, 0, 1]), "lists a seed twice"),
    ("a seed that is not whole", lambda p: edit(p, "seeds", [0.5]), "seeds holds 0.5, not a whole number"),
    ("an empty file", lambda p: {}, "the file is empty"),
    ("no experiments", lambda p: {k: v for k, v in p.items() if k != "experiments"}, "no `experiments:` section"),
    ("negative seed", lambda p: edit(p, "seeds", [-1, 0]), "each seed must be between 0 and"),
    ("seeds per experiment 0", lambda p: edit(p, "profiles.default.seeds_per_experiment", 0),
     "seeds_per_experiment = 0 must be an integer >= 1"),
    ("profile lists an unknown experiment", lambda p: edit(p, "profiles.long.experiments", ["baseline", "pos_xpos"]),
     "profiles.long.experiments names 'pos_xpos', not an experiment of params.yaml"),
    ("profile drops the reference", lambda p: edit(p, "profiles.long.experiments", ["pos_learned"]),
     "profiles.long.experiments must include the reference 'baseline'"),
    ("profile sweeps not a bool", lambda p: edit(p, "profiles.long.sweeps", "no"),
     "profiles.long.sweeps = 'no' has type str, expected bool"),
    ("BPE vocab 1", lambda p: edit(edit(p, "data.tokenizer", "bpe"), "data.vocab_size", 1), "data.vocab_size = 1"),
    # every float is finite: inf and nan pass every "> 0" check (nan compares false both ways) and fail far later
    ("infinite mlp_ratio", lambda p: edit(p, "model.mlp_ratio", float("inf")),
     "model.mlp_ratio = inf is not a finite number"),
    ("nan weight decay", lambda p: edit(p, "train.weight_decay", float("nan")),
     "train.weight_decay = nan is not a finite number"),
    ("infinite lr", lambda p: edit(p, "train.lr", float("inf")), "train.lr = inf is not a finite number"),
    ("infinite temperature", lambda p: edit(p, "eval.temperature", float("inf")),
     "eval.temperature = inf is not a finite number"),
    ("infinite margin", lambda p: edit(p, "findings.generation_margin", float("inf")),
     "findings.generation_margin = inf is not a finite number"),
    ("nan chance margin", lambda p: edit(p, "findings.chance_margin", float("nan")),
     "findings.chance_margin = nan is not a finite number"),
    ("infinite lr in an experiment", lambda p: edit(p, "experiments.pos_learned.train", {"lr": float("-inf")}),
     "experiments.pos_learned.train.lr = -inf is not a finite number"),
    ("infinite lr in a sweep", lambda p: edit(p, "experiments.baseline.sweep", {"train.lr": [float("inf")]}),
     "train.lr = inf is not a finite number"),
    # the split fractions of a user corpus
    ("val_frac above 1", lambda p: edit(p, "data.val_frac", 1.5), "data.val_frac = 1.5 must be between 0 and 1"),
    ("negative val_frac", lambda p: edit(p, "data.val_frac", -0.5), "data.val_frac = -0.5 must be between 0 and 1"),
    ("zero test_frac", lambda p: edit(p, "data.test_frac", 0), "data.test_frac = 0 must be between 0 and 1"),
    ("fractions leave no train split", lambda p: edit(edit(p, "data.val_frac", 0.5), "data.test_frac", 0.5),
     "data.val_frac + data.test_frac = 1.0 must be below 1"),
    # the smallest block each objective can train and be evaluated with
    ("span objective with a block of 1",
     lambda p: edit(p, "experiments.obj_span", {"group": "objective", "train": {"objective": "span"},
                                                "model": {"block_size": 1}}),
     "experiments.obj_span: model.block_size = 1 is too small for the span objective: it needs at least 3"),
    ("prefix LM with a block of 1",
     lambda p: edit(p, "experiments.obj_prefix", {"group": "objective", "train": {"objective": "prefix"},
                                                  "model": {"block_size": 1}}),
     "experiments.obj_prefix: model.block_size = 1 is too small for the prefix objective: it needs at least 2"),
    ("ALiBi with a block of 1",
     lambda p: edit(p, "experiments.pos_alibi", {"group": "position", "model": {"pos": "alibi", "block_size": 1}}),
     "experiments.pos_alibi: model.block_size = 1 is too small for the causal objective: it needs at least 2"),
]


@pytest.mark.parametrize("name,mutate,message", CASES, ids=[c[0] for c in CASES])
def test_bad_params_one_line(tmp_path, corpus, capsys, name, mutate, message):
    params = mutate(tiny_params(corpus))
    assert run_cli(tmp_path, params, "prepare", "--out", str(tmp_path / "data")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert message in err[0], err[0]


@pytest.mark.parametrize("command", [["list"], ["train", "baseline", "--seed", "0"]])
def test_data_params_are_checked_by_every_command_that_loads_params(tmp_path, corpus, capsys, command):
    params = edit(edit(tiny_params(corpus), "data.tokenizer", "bpe"), "data.vocab_size", 1)
    assert run_cli(tmp_path, params, *command) == 2
    assert "data.vocab_size = 1" in capsys.readouterr().err


def test_an_alias_bomb_is_refused_at_load_without_expanding(tmp_path, corpus, capsys):
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefgh", "bcdefghi"))  # 10^9 strings if expanded
    text = yaml.safe_dump(tiny_params(corpus)).replace("hypothesis: reference", "hypothesis: *i")
    (tmp_path / "params.yaml").write_text("x_bomb:\n" + "".join(f"  {line}\n" for line in bomb.splitlines()) + text)
    assert main(["list", "--params", str(tmp_path / "params.yaml")]) == 2
    assert "expands to more than 100000 values" in capsys.readouterr().err
    with pytest.raises(UserError, match="expands to more than"):  # the same check for params built in code
        Study({**tiny_params(corpus), "experiments": {"baseline": {"group": "reference",
                                                                   "hypothesis": yaml.safe_load(bomb)["i"]}}})


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
    for profile in PROFILES:
        study = Study.load(REPO_PARAMS, profile)
        assert study.runs()
        assert len(study.seeds_for("baseline")) >= 3


def test_the_long_profile_trains_exactly_the_runs_the_converged_claims_read():
    """The longer budget (params.yaml `profiles.long`) lists its experiments by hand; this holds the list to the
    claims, so a new converged claim cannot be left out of it (nor a run kept that no converged claim reads)."""
    from miniformer.study.claims import CLAIMS
    study = Study.load(REPO_PARAMS, "long")
    read = {run for claim in CLAIMS if claim.converged for run in claim.runs}
    assert set(study.names()) == read  # sweeps: false, so no sweep point
    assert all(study.config(e, s).train.steps > Study.load(REPO_PARAMS, "default").config(e, s).train.steps
               for e, s in study.runs())


def test_the_ladder_profile_trains_the_warm_up_arms_at_every_rate_and_seed_and_nothing_else():
    """Xiong's ladder (params.yaml `profiles.ladder`): the reference and the four warm-up arms the claim reads, each at
    every rate of its `ladder:`, every seed; the default profile runs none of the ladder's extra points."""
    from miniformer.study.claims import WARMUP_RUNS
    study = Study.load(REPO_PARAMS, "ladder")
    assert {study.parent(n) for n in study.names()} == {"baseline", *WARMUP_RUNS.values()}
    rates = {exp: sorted(study.config(n, 0).train.lr for n in study.names() if study.parent(n) == exp)
             for exp in WARMUP_RUNS.values()}
    assert all(r == [0.002, 0.005, 0.01] for r in rates.values()), rates
    assert all(len(study.seeds_for(n)) == 3 for n in study.names())  # a cell's pass/fail over three seeds
    default = Study.load(REPO_PARAMS, "default")
    assert not set(default.names()) & (study.ladder_points - default.sweep_points)
    assert all(len(default.seeds_for(n)) == 1 for n in default.names() if n in default.points)


def test_a_ladder_point_also_in_the_sweep_is_one_run_and_a_clash_is_one_line(tmp_path):
    raw = yaml.safe_load(Path(REPO_PARAMS).read_text())
    arm = raw["experiments"]["block_post_norm_no_warmup"]
    assert "block_post_norm_no_warmup/lr=0.002" in Study(raw, "ladder").ladder_points & Study(raw).sweep_points
    arm["ladder"] = {"train.lr": [0.002], "train.min_lr": [0.0003]}  # the same name, another setting
    with pytest.raises(UserError, match="its sweep and ladder both name 'block_post_norm_no_warmup/lr=0.002'"):
        Study(raw, "ladder")


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
    # without --resume the old checkpoint is set aside (not deleted) and training starts fresh; a second change sets
    # the second checkpoint aside beside the first instead of deleting it
    assert run_cli(tmp_path, params, "train", "baseline", "--seed", "0") == 0
    run = tmp_path / "results" / "runs" / "baseline" / "seed0"
    assert len(list(run.glob("ckpt.stale-*.pt"))) == 1
    params["train"]["lr"] = 0.002
    assert run_cli(tmp_path, params, "train", "baseline", "--seed", "0") == 0
    assert len(list(run.glob("ckpt.stale-*.pt"))) == 2


def test_checkpoint_from_other_training_code_is_not_resumed(trained, capsys, monkeypatch):
    """Same params, edited model/training code (say, another RoPE convention): the old weights must not be reused."""
    tmp_path, params = trained
    import miniformer.runtime.checkpoints

    monkeypatch.setattr(miniformer.runtime.checkpoints, "code_hash", lambda files: "edited-code")
    assert run_cli(tmp_path, params, "train", "baseline", "--seed", "0", "--resume") == 2
    assert "different config or training code" in capsys.readouterr().err
    assert run_cli(tmp_path, params, "train", "baseline", "--seed", "0") == 0
    assert list((tmp_path / "results" / "runs" / "baseline" / "seed0").glob("ckpt.stale-*.pt"))


# --- a run's outputs describe one finished training of one config ----------------------------------------------------


class KilledAt(Exception):
    pass


def kill_training_at(monkeypatch, step: int) -> None:
    """Stop training as a kill -9 would, right after the checkpoint of ``step`` was written."""
    from miniformer.training.folder import RunFolder

    original = RunFolder.save

    def save(self, state):
        original(self, state)
        if state["step"] == step:
            raise KilledAt

    monkeypatch.setattr(RunFolder, "save", save)


def test_evaluate_refuses_a_half_trained_checkpoint(trained, capsys, monkeypatch):
    tmp_path, params = trained
    run = tmp_path / "results" / "runs" / "baseline" / "seed1"
    kill_training_at(monkeypatch, 10)
    with pytest.raises(KilledAt):
        run_cli(tmp_path, params, "train", "baseline", "--seed", "1")
    capsys.readouterr()
    assert run_cli(tmp_path, params, "evaluate", "baseline", "--seed", "1") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "stopped at step 10 of 30" in err[-1] and "miniformer train baseline --seed 1" in err[-1]
    assert not (tmp_path / "results" / "eval" / "baseline" / "seed1" / "eval.json").exists()
    assert (run / "ckpt.pt").exists()  # nothing computed is lost: the train command resumes it


def test_a_changed_config_killed_mid_training_cannot_reach_the_metrics(trained, capsys, monkeypatch):
    """The issue's path: a finished, evaluated run; its lr changed; the retrain killed at step 10 of 30. The old
    step log and metrics must not stay beside the new half-trained checkpoint, evaluate must refuse it, and aggregate
    must refuse the old evaluation."""
    tmp_path, params = trained
    from miniformer.study import claims

    monkeypatch.setattr(claims, "required_experiments", lambda: set())
    for exp in ("pos_learned", "obj_mlm"):
        assert run_cli(tmp_path, params, "train", exp, "--seed", "0") == 0
    for exp in ("baseline", "pos_learned", "obj_mlm"):
        assert run_cli(tmp_path, params, "evaluate", exp, "--seed", "0") == 0
    params["seeds"] = [0]
    assert run_cli(tmp_path, params, "aggregate") == 0
    run = tmp_path / "results" / "runs" / "baseline" / "seed0"
    params["train"]["lr"] = 0.001
    kill_training_at(monkeypatch, 10)
    with pytest.raises(KilledAt):
        run_cli(tmp_path, params, "train", "baseline", "--seed", "0")
    for derived in ("metrics.json", "log.tsv", "curve.json", "samples.jsonl"):
        assert not (run / derived).exists(), derived  # the old training's files went with its checkpoint
    capsys.readouterr()
    assert run_cli(tmp_path, params, "evaluate", "baseline", "--seed", "0") == 2
    assert "stopped at step 10 of 30" in capsys.readouterr().err
    assert run_cli(tmp_path, params, "aggregate") == 2
    assert "re-run `miniformer train baseline --seed 0`" in capsys.readouterr().err


def evaluated_baseline_only(tmp_path: Path, params: dict, monkeypatch) -> None:
    """Cut the study to the trained baseline seed 0 (no claim experiments needed) and evaluate it."""
    from miniformer.study import claims

    monkeypatch.setattr(claims, "required_experiments", lambda: set())
    params["seeds"] = [0]
    params["experiments"] = {"baseline": params["experiments"]["baseline"]}
    assert run_cli(tmp_path, params, "evaluate", "baseline", "--seed", "0") == 0


def test_aggregate_refuses_an_evaluation_of_another_training(trained, capsys, monkeypatch):
    tmp_path, params = trained
    evaluated_baseline_only(tmp_path, params, monkeypatch)
    assert run_cli(tmp_path, params, "aggregate") == 0
    eval_json = tmp_path / "results" / "eval" / "baseline" / "seed0" / "eval.json"
    old_eval = eval_json.read_text()
    params["train"]["lr"] = 0.001  # retrained to the end, but not re-evaluated
    assert run_cli(tmp_path, params, "train", "baseline", "--seed", "0") == 0
    eval_json.write_text(old_eval)
    capsys.readouterr()
    assert run_cli(tmp_path, params, "aggregate") == 2
    assert "evaluates another training of run baseline/seed0" in capsys.readouterr().err
    params["train"]["lr"] = 0.002  # params edited after training: the outputs describe another config
    assert run_cli(tmp_path, params, "evaluate", "baseline", "--seed", "0") == 2
    assert "trained with another config, training code" in capsys.readouterr().err


def test_evaluate_refuses_a_checkpoint_of_another_config(trained, capsys):
    tmp_path, params = trained
    params["model"]["n_layer"] = 1
    assert run_cli(tmp_path, params, "evaluate", "baseline", "--seed", "0") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "re-train it (`miniformer train baseline --seed 0`)" in err[0]


@pytest.mark.parametrize("name", ["metrics.json", "eval.json"])
def test_an_unreadable_results_file_is_one_line(trained, capsys, monkeypatch, name):
    tmp_path, params = trained
    evaluated_baseline_only(tmp_path, params, monkeypatch)
    folder = "runs" if name == "metrics.json" else "eval"
    (tmp_path / "results" / folder / "baseline" / "seed0" / name).write_text("{not json")
    assert run_cli(tmp_path, params, "aggregate") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not valid JSON" in err[0] and name in err[0]


def test_a_second_training_of_the_same_run_is_refused_while_the_first_holds_it(trained, capsys):
    from miniformer.training.lock import LOCK_FILE, run_lock

    tmp_path, params = trained
    run = tmp_path / "results" / "runs" / "baseline" / "seed0"
    with run_lock(run, "baseline/seed0"):
        assert run_cli(tmp_path, params, "train", "baseline", "--seed", "0", "--no-resume") == 2
        err = capsys.readouterr().err
        assert f"is being trained by process {os.getpid()}" in err
    assert not (run / LOCK_FILE).exists()
    assert run_cli(tmp_path, params, "train", "baseline", "--seed", "0") == 0  # free again


def test_a_file_system_without_locks_still_trains_and_says_so(trained, capsys, monkeypatch):
    import errno
    import fcntl

    tmp_path, params = trained

    def no_locks(*a):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    assert run_cli(tmp_path, params, "train", "baseline", "--seed", "0", "--no-resume") == 0
    assert "cannot lock" in capsys.readouterr().err


def test_token_files_of_other_data_params_are_refused_before_the_checkpoint_is_touched(trained, capsys):
    tmp_path, params = trained
    ckpt = tmp_path / "results" / "runs" / "baseline" / "seed0" / "ckpt.pt"
    before = ckpt.read_bytes()
    params["data"]["val_frac"] = 0.2
    assert run_cli(tmp_path, params, "train", "baseline", "--seed", "0") == 2
    assert "was prepared with other data params (val_frac)" in capsys.readouterr().err
    assert ckpt.read_bytes() == before


@pytest.mark.parametrize("key,value", [("model.block_size", 100000), ("train.batch_size", 10**7),
                                       ("model.n_embd", 2**20)])  # 13 T parameters: estimated, never built
def test_a_config_too_big_for_the_machine_is_refused_before_the_checkpoint_is_touched(trained, capsys, key, value):
    tmp_path, params = trained
    ckpt = tmp_path / "results" / "runs" / "baseline" / "seed0" / "ckpt.pt"
    before = ckpt.read_bytes()
    edit(params, key, value)
    if key == "model.block_size":
        params["eval"]["length_multiples"] = [1]  # the corpus check would refuse first otherwise
    with pytest.MonkeyPatch.context() as m:  # the data check would refuse a longer block first; skip it
        from miniformer.runtime.tokendata import TokenData

        m.setattr(TokenData, "check_made_from", lambda *a: None)
        assert run_cli(tmp_path, params, "train", "baseline", "--seed", "0") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "GiB of memory but cpu has" in err[0]
    assert ckpt.read_bytes() == before


def test_prepare_writes_all_or_nothing(trained, capsys, monkeypatch):
    """The last split found too short after the others were encoded leaves the previous token files and meta.json
    whole (a new tokenization beside the old meta.json would crash the next training)."""
    tmp_path, params = trained
    data = tmp_path / "data"
    before = {p.name: p.read_bytes() for p in data.iterdir()}
    from miniformer.tokenizer import CharTokenizer

    real, calls = CharTokenizer.encode, []

    def encode(self, text):
        calls.append(text)
        ids = real(self, text)
        return ids[:5] if len(calls) == 3 else ids  # train, val, then a too-short test split

    monkeypatch.setattr(CharTokenizer, "encode", encode)
    params["data"]["val_frac"] = 0.2  # other splits: different token files would be written
    assert run_cli(tmp_path, params, "prepare", "--out", str(data)) == 2
    assert "test split has 5 tokens" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in data.iterdir()} == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".data.")]  # no half-made folder left


def test_a_full_disk_while_checkpointing_is_one_line_and_keeps_the_last_checkpoint(trained, capsys, monkeypatch):
    import errno

    import torch

    tmp_path, params = trained
    ckpt = tmp_path / "results" / "runs" / "baseline" / "seed0" / "ckpt.pt"
    before = ckpt.read_bytes()
    real_save = torch.save

    def full_disk(obj, f, *a, **k):
        real_save(obj, f, *a, **k)  # part of the file is written, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(torch, "save", full_disk)
    params["train"]["lr"] = 0.001  # a retrain: its first checkpoint write fails
    capsys.readouterr()
    assert run_cli(tmp_path, params, "train", "baseline", "--seed", "0", "--no-resume") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "No space left on device (the previous version is kept)" in err[-1]
    assert ckpt.read_bytes() == before
    assert not [p for p in ckpt.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_file_where_the_tables_folder_should_be_is_one_line(trained, capsys, monkeypatch):
    tmp_path, params = trained
    evaluated_baseline_only(tmp_path, params, monkeypatch)
    (tmp_path / "results" / "tables").write_text("in the way")
    assert run_cli(tmp_path, params, "aggregate") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "tables" in err[0]


def test_a_corpus_with_more_characters_than_uint16_holds_is_one_line(tmp_path, capsys):
    chars = "".join(chr(c) for c in range(0x20000, 0x20000 + 70000))  # CJK extension planes: 70 000 characters
    corpus = tmp_path / "wide.txt"
    corpus.write_text("\n".join(chars[i:i + 50] for i in range(0, len(chars), 50)) + "\n", encoding="utf-8")
    params = tiny_params(corpus)
    assert run_cli(tmp_path, params, "prepare", "--out", str(tmp_path / "data")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "distinct characters; token files hold at most 65535" in err[0]
    assert not list((tmp_path / "data").iterdir())  # nothing written


def test_code_hash_covers_what_dvc_declares():
    """The files whose hash invalidates checkpoints and Snakemake jobs are the code deps dvc.yaml declares."""
    from miniformer.runtime.codehash import EVALUATION_CODE, INIT_PROBE_CODE, TRAINING_CODE

    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]

    def declared(stage: dict) -> set[str]:
        return {d.removeprefix("src/miniformer/") for d in stage["deps"] if d.startswith("src/")}

    assert declared(stages["run"]["do"]) == set(TRAINING_CODE) | set(EVALUATION_CODE)
    assert declared(stages["init_probe"]) == set(INIT_PROBE_CODE)


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


# --- issue 34: inputs that ended in a traceback, or in a silent wrong run ---------------------------------------------


def one_line(capsys) -> str:
    """The only line on stderr, which must not be a traceback."""
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


def test_the_weights_of_a_config_are_estimated_before_evaluate_or_explore_build_the_model(trained, capsys):
    """A width of 2^20 is 13 T parameters: evaluate refuses it from params, `generate` from the checkpoint's config,
    before either allocates a tensor."""
    import json

    import torch

    tmp_path, params = trained
    wide = edit(copy_of(params), "model.n_embd", 2**20)
    assert run_cli(tmp_path, wide, "evaluate", "baseline", "--seed", "0") == 2
    assert "evaluating baseline/seed0 needs about" in one_line(capsys)
    ckpt = tmp_path / "results" / "runs" / "baseline" / "seed0" / "ckpt.pt"
    state = torch.load(ckpt, weights_only=True)
    state["model_config"] = json.dumps({**json.loads(state["model_config"]), "n_embd": 2**20})
    torch.save(state, ckpt)
    assert run_cli(tmp_path, params, "generate", "baseline", "--seed", "0") == 2
    line = one_line(capsys)
    assert "needs about" in line and "GiB of memory but cpu has" in line


@pytest.mark.parametrize("overrides", [{}, {"pos": "learned", "tie_weights": False}, {"pos": "t5", "bias": True},
                                       {"pos": "sinusoidal", "norm": "rmsnorm", "norm_placement": "post"},
                                       {"head_merge": "mean", "mlp_ratio": 0.25},
                                       *({"pos": m} for m in POSITIONS)])  # every registered method
def test_the_memory_estimate_counts_the_parameters_a_built_model_has(overrides):
    from miniformer.network.flops import count_params
    from miniformer.network.model import MiniFormer, ModelConfig
    from miniformer.runtime.memory import param_count

    cfg = ModelConfig(vocab_size=50, block_size=16, n_layer=2, n_head=4, n_embd=32, **overrides)
    assert param_count(cfg) == count_params(MiniFormer(cfg))


def test_the_memory_estimate_of_every_study_method_never_imports_torch_dynamo():
    """The estimate runs before every training: a count built on the meta device imports torch's compiler, which a
    job otherwise never loads (runtime/optim.py exists to avoid it). The study's methods count in closed form."""
    code = ("from miniformer.network.model import ModelConfig\n"
            "from miniformer.network.positions import POSITIONS\n"
            "from miniformer.runtime.memory import training_bytes\n"
            "for pos in POSITIONS:\n"
            "    training_bytes(ModelConfig(vocab_size=50, block_size=16, n_head=4, n_embd=32, pos=pos), 8)")
    assert not loads_in_a_fresh_interpreter(code, "torch._dynamo")


def copy_of(params: dict) -> dict:
    import copy

    return copy.deepcopy(params)


def test_curve_tokens_past_the_val_split_are_refused_before_the_checkpoint_is_touched(trained, capsys):
    tmp_path, params = trained
    ckpt = tmp_path / "results" / "runs" / "baseline" / "seed0" / "ckpt.pt"
    before = ckpt.read_bytes()
    params["train"]["curve_tokens"] = 10**12  # its evenly spread window starts alone were 226 GiB
    assert run_cli(tmp_path, params, "train", "baseline", "--seed", "0") == 2
    line = one_line(capsys)
    assert "train.curve_tokens = 1000000000000" in line and "at most" in line
    assert ckpt.read_bytes() == before


def test_a_corpus_without_line_breaks_trains_and_evaluates(tmp_path, corpus, capsys):
    """One very long line (the README supports it): the demos and the long generations start from a line break,
    which such a vocabulary does not have."""
    flat = tmp_path / "flat.txt"
    flat.write_text(corpus.read_text().replace("\n", " "), encoding="utf-8")
    params = tiny_params(flat)
    assert run_cli(tmp_path, params, "prepare", "--out", str(tmp_path / "data")) == 0
    assert run_cli(tmp_path, params, "train", "baseline", "--seed", "0") == 0
    run = tmp_path / "results" / "runs" / "baseline" / "seed0"
    assert (run / "metrics.json").exists() and (run / "samples.jsonl").read_text().strip()
    assert run_cli(tmp_path, params, "evaluate", "baseline", "--seed", "0") == 0
    capsys.readouterr()
    # `generate` with no prompt starts from a line break too: say the default prompt is unknown and the flag to give
    assert run_cli(tmp_path, params, "generate", "baseline") == 2
    line = one_line(capsys)
    assert "line break" in line and "--prompt" in line
    assert run_cli(tmp_path, params, "score", "baseline", "t") == 2  # no line break to read a lone token after
    assert "the sentence is one token long" in one_line(capsys)


@pytest.mark.parametrize("content", ["{bad", "{}", "[]", '{"inits": 3}'])
def test_an_unreadable_crosscheck_result_is_one_line_naming_it(tmp_path, capsys, content):
    from miniformer.stages.report import read_crosscheck

    folder = tmp_path / "results" / "crosscheck"
    folder.mkdir(parents=True)
    (folder / "baseline.json").write_text('{"inits": {"own": {"val_loss": 2.0}}}')
    assert read_crosscheck(tmp_path / "results")["baseline"]["inits"]["own"]["val_loss"] == 2.0
    (folder / "pos_t5.json").write_text(content)
    with pytest.raises(UserError) as e:
        read_crosscheck(tmp_path / "results")
    message = str(e.value)
    assert len(message.splitlines()) == 1 and "pos_t5.json" in message
    assert "snakemake crosscheck" in message and "delete it" in message


def test_a_prompt_past_the_score_limit_is_refused(trained, capsys):
    tmp_path, params = trained
    prompt = "the king hath a crown " * 20  # 440 characters, past 16 blocks of 16 tokens
    assert run_cli(tmp_path, params, "generate", "baseline", "--prompt", prompt, "--tokens", "1") == 2
    line = one_line(capsys)
    assert "the prompt has 440 tokens; at most 256" in line


@pytest.mark.parametrize("flag,value", [("--temperature", "nan"), ("--temperature", "inf"),
                                        ("--sample-seed", str(2**70))])
def test_sampling_flags_out_of_range_are_refused(tmp_path, capsys, flag, value):
    assert main(["generate", "baseline", flag, value, "--results", str(tmp_path)]) == 2
    line = one_line(capsys)
    assert f"argument {flag}" in line and value in line


@pytest.mark.parametrize("experiment,seed,seeds", [("baseline", 7, "0, 1"), ("pos_learned", 1, "0")])
def test_train_refuses_a_seed_the_study_does_not_run(tmp_path, corpus, capsys, experiment, seed, seeds):
    params = tiny_params(corpus)
    assert run_cli(tmp_path, params, "prepare", "--out", str(tmp_path / "data")) == 0
    capsys.readouterr()
    assert run_cli(tmp_path, params, "train", experiment, "--seed", str(seed)) == 2
    line = one_line(capsys)
    assert f"seed {seed} is not a seed of {experiment}" in line and f"it runs seed(s) {seeds}" in line
    assert not (tmp_path / "results" / "runs" / experiment / f"seed{seed}").exists()


def test_attention_refuses_head_beside_all(tmp_path, capsys):
    assert main(["attention", "baseline", "--text", "hi", "--head", "1", "--all", "--results", str(tmp_path)]) == 2
    line = one_line(capsys)
    assert "--all" in line and "--head" in line


def test_a_corpus_of_blank_lines_says_so(tmp_path, capsys):
    blank = tmp_path / "blank.txt"
    blank.write_text("\n" * 200_000)
    assert run_cli(tmp_path, tiny_params(blank), "prepare", "--out", str(tmp_path / "data")) == 2
    line = one_line(capsys)
    assert "has no text, only whitespace" in line and "is empty" not in line


def test_an_empty_attention_text_names_the_flag(trained, capsys):
    tmp_path, params = trained
    assert run_cli(tmp_path, params, "attention", "baseline", "--text", "") == 2
    assert "the text is empty; pass the text to draw with --text" in one_line(capsys)


def test_settle_times_outside_a_study_says_there_is_none(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["settle-times"]) == 2
    line = one_line(capsys)
    assert "no study outputs" in line and "data/prepared" in line


@pytest.mark.parametrize("command", [["list"], ["check-params"], ["prepare"], ["set-profile", "smoke"]])
def test_a_params_file_that_is_not_utf8_is_one_line(tmp_path, capsys, command):
    """Every command reading params.yaml ended in a UnicodeDecodeError traceback."""
    params = tmp_path / "params.yaml"
    params.write_bytes("profile: default\nseeds: [0]\n# caf\u00e9\n".encode("latin-1"))
    assert main([*command, "--params", str(params)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not UTF-8 text" in err[0] and "git checkout params.yaml" in err[0]


def test_run_experiment_of_an_unknown_experiment_is_one_line(tmp_path, corpus, capsys, monkeypatch):
    from miniformer.study import claims

    monkeypatch.setattr(claims, "required_experiments", lambda: set())  # a tiny study without the claims' runs
    assert run_cli(tmp_path, tiny_params(corpus), "run-experiment", "nosuch") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown experiment 'nosuch'" in err[0] and "baseline" in err[0]


def test_set_profile_on_a_missing_params_file_says_it_is_missing(tmp_path, capsys):
    assert main(["set-profile", "smoke", "--params", str(tmp_path / "nope.yaml")]) == 2
    assert "no params file at" in capsys.readouterr().err


def test_check_params_refuses_a_typo_key_by_name_and_writes_no_stamp(tmp_path, corpus, capsys, monkeypatch):
    """DVC's first stage: a typo key at the top of params.yaml changed no stage's params, so `dvc repro` ran and
    validated nothing; check-params tracks every key and refuses it the way Snakemake does."""
    from miniformer.study import claims

    monkeypatch.setattr(claims, "required_experiments", lambda: set())  # a tiny study without the claims' runs
    params = tiny_params(corpus)
    stamp = tmp_path / "results" / "params-checked.txt"
    assert run_cli(tmp_path, params, "check-params", "--out", str(stamp)) == 0 and stamp.exists()
    stamp.unlink()
    params["lerning_rate_typo"] = 3
    assert run_cli(tmp_path, params, "check-params", "--out", str(stamp)) == 2
    assert "lerning_rate_typo" in capsys.readouterr().err and not stamp.exists()


def test_report_out_an_existing_folder_is_refused_before_any_work(tmp_path, capsys):
    """`report --out <folder>` ran 27 s before "Is a directory"."""
    assert main(["report", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is a folder" in err[0] and "report.html" in err[0]


def test_score_takes_its_sentence_after_the_seed_flag(trained, capsys):
    """`score baseline --seed 0 "a sentence"` said "unrecognized arguments": argparse fills the optional sentence
    before it reads --seed. The sentence after the flag is the sentence; a second one is still refused."""
    tmp_path, params = trained
    assert run_cli(tmp_path, params, "score", "baseline", "--seed", "0", "to be or not") == 0
    assert "mean loss" in capsys.readouterr().out
    assert run_cli(tmp_path, params, "score", "baseline", "--seed", "0", "to be", "or not") == 2
    assert "unrecognized arguments" in capsys.readouterr().err


def test_dvc_record_says_in_words_why_nothing_was_recorded(tmp_path, capsys, monkeypatch):
    """Snakemake and `dvc repro` at once: "dvc commit of … failed: []". Now the line says what holds DVC and how to
    record the stages later."""
    import subprocess

    from miniformer.stages import dvc_record

    monkeypatch.chdir(tmp_path)
    (tmp_path / ".dvc").mkdir()
    (tmp_path / ".git").mkdir()
    ran = tmp_path / "ran.txt"
    ran.write_text("prepare\n")
    monkeypatch.setattr(dvc_record, "commit_together", lambda stages: (_ for _ in ()).throw(RuntimeError("busy")))
    lock = "ERROR: Unable to acquire lock. Most likely another DVC process is running or was terminated abruptly."
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 1, "", lock))
    assert dvc_record.record(ran) == []
    err = capsys.readouterr().err
    assert "another DVC command holds its lock" in err and "miniformer dvc-record" in err and ran.exists()
