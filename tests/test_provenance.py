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


# --- issue 53's battery: every file a reader trusts carries a digest it checks ----------------------------------------

def reverse_four_bytes_inside_a_tensor(ckpt: Path) -> None:
    """Damage one weight without breaking the file: 4 bytes reversed in the middle of the largest tensor's storage
    (torch's zip stores records uncompressed and torch.load does not check their CRC, so the file still loads)."""
    import struct
    import zipfile

    with zipfile.ZipFile(ckpt) as z:
        info = max((i for i in z.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
    data = bytearray(ckpt.read_bytes())
    name_len, extra_len = struct.unpack("<HH", data[info.header_offset + 26:info.header_offset + 30])
    start = info.header_offset + 30 + name_len + extra_len + info.file_size // 2
    data[start:start + 4] = data[start:start + 4][::-1]
    assert data[start:start + 4] != ckpt.read_bytes()[start:start + 4]
    ckpt.write_bytes(bytes(data))


@pytest.mark.parametrize("command", [
    ("score", "baseline", "to be or not"), ("generate", "baseline", "--tokens", "5"),
    ("evaluate", "baseline", "--seed", "0"), ("train", "baseline", "--seed", "0"),
    ("export", "baseline", "OUT"), ("attention", "baseline", "--text", "to be", "-o", "OUT.png"),
])
def test_a_checkpoint_with_four_bytes_reversed_is_refused_by_every_reader(evaluated, capsys, command):
    """The battery's case: the damaged weights scored 3.7272 (true 3.7266), were evaluated, aggregated and exported
    with exit 0. Now every command that reads a checkpoint refuses it in one line, and writes nothing."""
    tmp_path, params = evaluated
    args = [str(tmp_path / a) if a.startswith("OUT") else a for a in command]
    before = {p: p.read_bytes() for p in (tmp_path / "results").rglob("*") if p.is_file()}
    reverse_four_bytes_inside_a_tensor(tmp_path / RUN / "ckpt.pt")
    capsys.readouterr()
    assert run_cli(tmp_path, params, *args) == 2
    assert "does not match the digest it was written with" in one_error_line(capsys)
    after = {p: p.read_bytes() for p in (tmp_path / "results").rglob("*") if p.is_file()}
    assert {p: b for p, b in after.items() if p.name != "ckpt.pt"} == {p: b for p, b in before.items()
                                                                      if p.name != "ckpt.pt"}
    assert not (tmp_path / "OUT").exists()


def test_a_checkpoint_without_its_digest_is_refused(evaluated, capsys):
    import torch

    tmp_path, params = evaluated
    state = torch.load(tmp_path / RUN / "ckpt.pt", weights_only=True)
    del state["digest"]
    torch.save(state, tmp_path / RUN / "ckpt.pt")
    capsys.readouterr()
    assert run_cli(tmp_path, params, "score", "baseline", "to be") == 2
    assert "carries no digest" in one_error_line(capsys)


@pytest.mark.parametrize(("name", "reader"), [("samples.jsonl", "samples"), ("log.tsv", "log")])
def test_the_report_refuses_an_edited_sample_or_step_log(evaluated, name, reader):
    """aggregate refused an edited samples.jsonl but the report printed it; log.tsv (the loss curves) was sealed
    nowhere. Both are now checked against the digest their run recorded, by aggregate and by the report."""
    from miniformer.errors import UserError
    from miniformer.params import Study
    from miniformer.stages.report import RunFiles

    tmp_path, params = evaluated
    files = RunFiles(Study(params), tmp_path / "results")
    assert len(getattr(files, reader)("baseline")) > 0  # as written: read
    path = tmp_path / RUN / name
    path.write_text(path.read_text(encoding="utf-8").replace("1", "7", 1), encoding="utf-8")
    with pytest.raises(UserError, match=f"{name}' is not the file .* recorded"):
        getattr(files, reader)("baseline")
    with pytest.raises(UserError, match=f"{name}' is not the file"):
        from miniformer.stages.aggregate import aggregate
        aggregate(Study(params), tmp_path / "results", tmp_path / "data")


@pytest.mark.parametrize("file", ["modeling_miniformer.py", "configuration_miniformer.py", "miniformer_network.py",
                                  "tokenizer_config.json", "generation_config.json"])
def test_an_exports_code_and_tokenizer_config_are_in_its_provenance(evaluated, file):
    """Logits halved in the modeling file loaded silently in transformers (sum −465.7 vs −931.5): every file loading
    runs or reads is recorded, and both loaders refuse an edit."""
    import miniformer
    from miniformer.errors import UserError

    tmp_path, params = evaluated
    out = tmp_path / "export"
    assert run_cli(tmp_path, params, "export", "baseline", str(out)) == 0
    assert file in read(out / "provenance.json")["files"]
    text = (out / file).read_text(encoding="utf-8")
    edited = text.replace("logits=logits", "logits=logits / 2") if file == "modeling_miniformer.py" else text + "\n"
    (out / file).write_text(edited, encoding="utf-8")
    with pytest.raises(UserError, match=f"{file}' is not the file"):
        miniformer.load(out)


def test_a_corpus_edit_within_its_characters_leaves_no_old_number_in_runs_or_an_export(evaluated, corpus, capsys):
    tmp_path, params = evaluated
    old_val = read(tmp_path / EVAL / "eval.json")["val_loss"]
    corpus.write_text(make_text(seed=7), encoding="utf-8")  # the same words, so the same character set
    assert run_cli(tmp_path, params, "prepare", "--out", str(tmp_path / "data")) == 0
    capsys.readouterr()
    assert run_cli(tmp_path, params, "runs") == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("baseline"))
    assert f"{old_val:.4f}" not in line and "trained on other prepared data" in line
    assert run_cli(tmp_path, params, "export", "baseline", str(tmp_path / "out")) == 2
    assert "trained on other prepared data" in one_error_line(capsys)
    assert not (tmp_path / "out").exists()


def test_a_killed_writers_temp_file_is_removed_by_the_next_write(evaluated):
    tmp_path, params = evaluated
    stale = tmp_path / EVAL / ".eval.json.abc123.tmp"
    stale.write_text("half")
    assert run_cli(tmp_path, params, "evaluate", "baseline", "--seed", "0") == 0
    assert not stale.exists()


@pytest.mark.parametrize("target", ["another seed", "another experiment"])
def test_a_checkpoint_copied_from_another_run_is_refused_by_score_and_export(evaluated, capsys, target):
    """The second battery: seed1's ckpt.pt copied over seed0's scored seed1's 3.0672 as seed0's (3.2020) and
    exported seed1's weights under seed0's name, with exit 0 (evaluate refused it by its fingerprint)."""
    import shutil

    tmp_path, params = evaluated
    folder = tmp_path / ("results/runs/baseline/seed5" if target == "another seed" else "results/runs/pos_alibi/seed0")
    folder.mkdir(parents=True)
    shutil.copy(tmp_path / RUN / "ckpt.pt", folder / "ckpt.pt")
    name, seed = ("baseline", "5") if target == "another seed" else ("pos_alibi", "0")
    capsys.readouterr()
    assert run_cli(tmp_path, params, "score", name, "--seed", seed, "to be") == 2
    assert "is baseline seed 0, not the run its folder names" in one_error_line(capsys)
    assert run_cli(tmp_path, params, "export", name, "--seed", seed, str(tmp_path / "out")) == 2
    assert "not the run its folder names" in one_error_line(capsys) and not (tmp_path / "out").exists()
    assert run_cli(tmp_path, params, "score", "baseline", "--seed", "0", "to be") == 0  # its own folder: read


@pytest.mark.parametrize("damage", ["missing", "a flipped bit", "another corpus"])
def test_the_report_refuses_prepared_data_that_is_not_what_the_runs_were_aggregated_on(evaluated, corpus, damage):
    """The second battery: with data/prepared deleted or one bit of val.bin flipped, `report` exited 0 and overwrote
    the finished report with one that lost the unigram floor and changed verdicts (aggregate refused the same)."""
    import shutil

    from miniformer.errors import UserError
    from miniformer.stages.report import prepared_data, read_provenance

    tmp_path, params = evaluated
    data = tmp_path / "data"
    provenance = read_provenance(tmp_path / "results")
    prepared_data(data, provenance)  # as aggregated: read
    if damage == "missing":
        shutil.rmtree(data)
    elif damage == "a flipped bit":
        val = bytearray((data / "val.bin").read_bytes())
        val[10] ^= 1
        (data / "val.bin").write_bytes(bytes(val))
    else:
        corpus.write_text(make_text(seed=7), encoding="utf-8")  # the same characters, other text
        assert run_cli(tmp_path, params, "prepare", "--out", str(data)) == 0
    with pytest.raises(UserError):
        prepared_data(data, provenance)


def test_report_refuses_damaged_prepared_data_before_it_touches_the_finished_report(evaluated, capsys):
    tmp_path, params = evaluated
    out = tmp_path / "report.html"
    assert run_cli(tmp_path, params, "report", "--out", str(out)) == 0  # whole data: the report renders
    out.write_text("the finished report")
    val = bytearray((tmp_path / "data" / "val.bin").read_bytes())
    val[10] ^= 1
    (tmp_path / "data" / "val.bin").write_bytes(bytes(val))
    capsys.readouterr()
    assert run_cli(tmp_path, params, "report", "--out", str(out)) == 2
    assert "data" in one_error_line(capsys) and out.read_text() == "the finished report"
