"""No stale number: every number a command prints belongs to the model and data it names (fast, in-process).

One test per way a number went stale with exit code 0: an edited corpus of the same characters, a retrain not yet
evaluated, a missing evaluation, an evaluation mixed by a kill, timings rewritten by a resume that trained nothing,
an unfinished checkpoint used silently, and hand-edited results or exports.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import make_text, tiny_params
from tests.test_bad_input import evaluated_baseline_only, run_cli

RUN = Path("results/runs/baseline/seed0")
EVAL = Path("results/eval/baseline/seed0")


@pytest.fixture
def evaluated(tmp_path, corpus, monkeypatch):
    """A tiny study cut to baseline/seed0, prepared, trained, evaluated and aggregated."""
    params = tiny_params(corpus)
    assert run_cli(tmp_path, params, "prepare", "--out", str(tmp_path / "data")) == 0
    assert run_cli(tmp_path, params, "train", "baseline", "--seed", "0") == 0
    evaluated_baseline_only(tmp_path, params, monkeypatch)
    assert run_cli(tmp_path, params, "aggregate") == 0
    return tmp_path, params


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


def read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def test_a_corpus_edited_within_its_characters_retrains_and_is_refused_until_then(evaluated, corpus, capsys):
    tmp_path, params = evaluated
    before = read(tmp_path / RUN / "metrics.json")
    corpus.write_text(make_text(seed=7), encoding="utf-8")  # the same words, so the same character set
    assert run_cli(tmp_path, params, "prepare", "--out", str(tmp_path / "data")) == 0
    capsys.readouterr()
    assert run_cli(tmp_path, params, "aggregate") == 2  # A's numbers are not B's
    assert "trained on other prepared data" in one_error_line(capsys)
    assert run_cli(tmp_path, params, "evaluate", "baseline", "--seed", "0") == 2  # A's model is not scored on B
    assert "prepared data" in one_error_line(capsys)
    assert run_cli(tmp_path, params, "train", "baseline", "--seed", "0") == 0  # a fresh training, not a resume
    after = read(tmp_path / RUN / "metrics.json")
    assert after["data_content"] != before["data_content"]
    assert after["final_train_loss"] != before["final_train_loss"]
    assert run_cli(tmp_path, params, "evaluate", "baseline", "--seed", "0") == 0
    assert run_cli(tmp_path, params, "aggregate") == 0


def test_runs_and_the_export_card_never_show_an_earlier_trainings_evaluation(evaluated, capsys):
    tmp_path, params = evaluated
    params["train"]["steps"] = 40  # retrained further, not evaluated
    assert run_cli(tmp_path, params, "train", "baseline", "--seed", "0") == 0
    capsys.readouterr()
    assert run_cli(tmp_path, params, "runs") == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("baseline"))
    old_val = read(tmp_path / EVAL / "eval.json")["val_loss"]
    assert f"{old_val:.4f}" not in line and "evaluates an earlier training" in line
    assert run_cli(tmp_path, params, "export", "baseline", str(tmp_path / "out")) == 0
    card = (tmp_path / "out" / "README.md").read_text()
    assert f"{old_val:.4f}" not in card and "not evaluated" in card


def test_runs_does_not_pass_the_step_log_estimate_off_as_the_val_loss(evaluated, capsys):
    tmp_path, params = evaluated
    (tmp_path / EVAL / "eval.json").unlink()
    estimate = read(tmp_path / RUN / "metrics.json")["final_val_loss_estimate"]
    capsys.readouterr()
    assert run_cli(tmp_path, params, "runs") == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("baseline"))
    assert f"{estimate:.4f}" not in line and "not evaluated" in line


def test_an_evaluation_mixed_by_a_kill_is_not_aggregated(evaluated, capsys):
    """evaluate killed between windows.json (new eval params) and eval.json (still the old one)."""
    tmp_path, params = evaluated
    old_eval = (tmp_path / EVAL / "eval.json").read_text()
    params["eval"]["max_tokens"] = 512
    assert run_cli(tmp_path, params, "evaluate", "baseline", "--seed", "0") == 0
    (tmp_path / EVAL / "eval.json").write_text(old_eval)  # as if killed before its last write
    capsys.readouterr()
    assert run_cli(tmp_path, params, "aggregate") == 2
    assert "other eval params" in one_error_line(capsys)
    params["eval"]["max_tokens"] = 1024  # back to the params the old eval.json was made under: its windows are not
    assert run_cli(tmp_path, params, "aggregate") == 2
    line = one_error_line(capsys)
    assert "windows.json' is not the file" in line and "eval.json' recorded" in line


def test_an_evaluation_under_other_eval_params_is_not_aggregated(evaluated, capsys):
    tmp_path, params = evaluated
    params["eval"]["max_tokens"] = 512  # evaluation params changed, evaluate not re-run
    capsys.readouterr()
    assert run_cli(tmp_path, params, "aggregate") == 2
    assert "other eval params" in one_error_line(capsys)


def test_a_resume_that_trains_nothing_keeps_the_trainings_timings(evaluated):
    tmp_path, params = evaluated
    perf = read(tmp_path / RUN / "perf.json")
    assert perf["train_seconds"] > 0
    assert run_cli(tmp_path, params, "train", "baseline", "--seed", "0") == 0  # finished: a no-op resume
    again = read(tmp_path / RUN / "perf.json")
    assert again["train_seconds"] == perf["train_seconds"] and again["peak_mem_mb"] == perf["peak_mem_mb"]


@pytest.mark.parametrize("command", [("generate", "baseline", "--tokens", "5"), ("score", "baseline", "the king"),
                                     ("attention", "baseline", "--text", "the king")])
def test_an_unfinished_checkpoint_is_named_by_the_commands_that_use_it(evaluated, capsys, monkeypatch, command):
    from tests.test_bad_input import KilledAt, kill_training_at

    tmp_path, params = evaluated
    params["train"]["lr"] = 0.001  # another config: a fresh training, killed at step 10 of 30
    kill_training_at(monkeypatch, 10)
    with pytest.raises(KilledAt):
        run_cli(tmp_path, params, "train", "baseline", "--seed", "0")
    capsys.readouterr()
    monkeypatch.chdir(tmp_path)  # attention writes its figure into the working folder
    assert run_cli(tmp_path, params, *command) == 0
    assert "stopped at step 10 of 30 (training unfinished)" in capsys.readouterr().err


def test_unfinished_note_is_silent_for_a_finished_run(evaluated, capsys):
    tmp_path, params = evaluated
    capsys.readouterr()
    assert run_cli(tmp_path, params, "score", "baseline", "the king") == 0
    assert "unfinished" not in capsys.readouterr().err


@pytest.mark.parametrize("target", ["eval", "metrics"])
def test_a_hand_edited_run_result_is_refused_by_aggregate(evaluated, capsys, target):
    tmp_path, params = evaluated
    path = tmp_path / (EVAL / "eval.json" if target == "eval" else RUN / "metrics.json")
    d = read(path)
    key = "val_loss" if target == "eval" else "final_train_loss"
    d[key] = 2.0
    path.write_text(json.dumps(d, indent=1))
    capsys.readouterr()
    assert run_cli(tmp_path, params, "aggregate") == 2
    assert "does not match the checksum" in one_error_line(capsys)


def test_a_hand_edited_aggregate_is_refused_by_the_report(evaluated, capsys):
    from miniformer.errors import UserError
    from miniformer.stages.report import read_provenance

    tmp_path, _ = evaluated
    path = tmp_path / "results" / "metrics.json"
    d = read(path)
    d["baseline"]["seed0"]["val_loss"] = 2.0
    path.write_text(json.dumps(d, indent=1))
    with pytest.raises(UserError, match="metrics.json' is not the file .*provenance.json' recorded"):
        read_provenance(tmp_path / "results")


def swap_two_characters(tokenizer: dict) -> dict:
    vocab = tokenizer["model"]["vocab"]  # the tokenizers library's word-level model: character -> id
    a, b = sorted(vocab, key=vocab.__getitem__)[1:3]
    vocab[a], vocab[b] = vocab[b], vocab[a]
    return tokenizer


@pytest.mark.parametrize(("file", "edit"), [
    ("config.json", lambda c: {**c, "model": {**c["model"], "n_head": 1}}),
    ("config.json", lambda c: {**c, "model": {**c["model"], "pos": "alibi"}}),
    ("tokenizer.json", swap_two_characters),
])
def test_an_edited_export_is_refused_by_load(evaluated, file, edit):
    import miniformer
    from miniformer.errors import UserError

    tmp_path, params = evaluated
    out = tmp_path / "export"
    assert run_cli(tmp_path, params, "export", "baseline", str(out)) == 0
    miniformer.load(out)  # as written: loads
    (out / file).write_text(json.dumps(edit(read(out / file))))
    with pytest.raises(UserError, match=f"{file}' is not the file"):
        miniformer.load(out)


def test_edited_token_files_are_refused(evaluated, capsys):
    tmp_path, params = evaluated
    train_bin = tmp_path / "data" / "train.bin"
    data = bytearray(train_bin.read_bytes())
    data[0], data[2] = data[2], data[0]
    train_bin.write_bytes(bytes(data))
    capsys.readouterr()
    assert run_cli(tmp_path, params, "evaluate", "baseline", "--seed", "0") == 2
    assert "do not match its meta.json" in one_error_line(capsys)


def test_a_killed_prepares_temp_folder_is_removed_by_the_next_prepare(evaluated):
    tmp_path, params = evaluated
    leftover = tmp_path / ".data.new.abc123"
    leftover.mkdir()
    (leftover / "train.bin").write_bytes(b"\0" * 1000)
    assert run_cli(tmp_path, params, "prepare", "--out", str(tmp_path / "data")) == 0
    assert not leftover.exists()
