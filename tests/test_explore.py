"""`miniformer runs | generate | score | attention` on tiny trained runs."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import yaml

from miniformer.cli import main
from tests.conftest import tiny_params


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("inspect")
    corpus = root / "corpus.txt"
    from tests.conftest import make_text

    corpus.write_text(make_text(), encoding="utf-8")
    (root / "params.yaml").write_text(yaml.safe_dump(tiny_params(corpus)))
    assert run(root, "prepare", "--out", str(root / "data")) == 0
    for exp in ("baseline", "pos_learned", "obj_mlm"):
        assert run(root, "train", exp, "--seed", "0") == 0
    return root


def run(root: Path, *args: str) -> int:
    return main(
        [*args, "--params", str(root / "params.yaml"), "--data", str(root / "data"), "--results", str(root / "results")]
    )


def test_runs_lists_every_trained_run(trained, capsys):
    assert run(trained, "runs") == 0
    out = capsys.readouterr().out
    for exp in ("baseline", "pos_learned", "obj_mlm"):
        assert exp in out
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert rows["baseline"][1] == "0" and rows["baseline"][2] == "30"  # seed and steps columns, not a path


def test_generate_past_block_size_for_rope(trained, capsys):
    assert run(trained, "generate", "baseline", "--prompt", "Romeo:", "--tokens", "50") == 0
    text = capsys.readouterr().out
    assert text.startswith("Romeo:") and len(text.rstrip("\n")) >= 50


def test_generate_learned_past_block_size_fails_clearly(trained, capsys):
    assert run(trained, "generate", "pos_learned", "--prompt", "Ro", "--tokens", "50") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "learned absolute positions stop at block_size=16" in err[0]


def test_score_causal_and_pseudo_likelihood(trained, capsys):
    assert run(trained, "score", "baseline", "the king hath") == 0
    out = capsys.readouterr().out
    assert out.startswith("sequence log-likelihood: mean loss") and "perplexity" in out
    head, *tokens = out.strip().splitlines()
    assert len(tokens) == len("the king hath")  # one line per character, each with its loss
    losses = [float(t.split()[-1]) for t in tokens]
    mean = float(head.split("mean loss ")[1].split()[0])
    assert mean == pytest.approx(sum(losses) / len(losses), abs=2e-3)  # the headline is the mean of the tokens
    assert run(trained, "score", "obj_mlm", "the king hath") == 0
    assert capsys.readouterr().out.startswith("pseudo-log-likelihood")


def test_score_versus_names_the_preferred_order(trained, capsys):
    assert run(trained, "score", "baseline", "the king hath", "--versus", "hath king the") == 0
    out = capsys.readouterr().out
    totals = [float(line.split(": ")[1].split()[0]) for line in out.splitlines() if line.startswith("  ")]
    preferred = "A" if totals[0] < totals[1] else "B"
    assert f"prefers {preferred} by {abs(totals[0] - totals[1]):.3f} nats" in out
    assert run(trained, "score", "obj_mlm", "the king", "--versus", "king the") == 0
    assert capsys.readouterr().out.startswith("pseudo-log-likelihood")
    assert run(trained, "score", "baseline", "the king", "--versus", "a queen") == 0
    assert "different characters" in capsys.readouterr().out


def test_score_file_writes_csv(trained, tmp_path):
    lines = tmp_path / "lines.txt"
    lines.write_text("the king\nthe queen doth\n")
    out = tmp_path / "scores.csv"
    assert run(trained, "score", "baseline", "--file", str(lines), "-o", str(out)) == 0
    rows = list(csv.DictReader(out.open()))
    assert [r["text"] for r in rows] == ["the king", "the queen doth"]
    assert all(float(r["perplexity"]) > 1 for r in rows)


def test_out_of_vocabulary_characters_are_named(trained, capsys):
    assert run(trained, "score", "baseline", "the king 我") == 0
    assert "'我'" in capsys.readouterr().err


def test_attention_figure_for_own_text(trained, tmp_path):
    out = tmp_path / "att.png"
    assert run(trained, "attention", "baseline", "--text", "thou hath", "--all", "-o", str(out)) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_unknown_run_is_one_line(trained, capsys):
    assert run(trained, "generate", "nope") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown run 'nope'" in err[0] and "baseline" in err[0]


def test_checkpoint_from_another_tokenizer(trained, tmp_path, capsys):
    other = tmp_path / "other.txt"
    other.write_text("完全不同的文字。" * 500, encoding="utf-8")
    params = tiny_params(other)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    assert main(["prepare", "--params", str(tmp_path / "params.yaml"), "--out", str(tmp_path / "data")]) == 0
    rc = main(
        [
            "generate",
            "baseline",
            "--params",
            str(trained / "params.yaml"),
            "--data",
            str(tmp_path / "data"),
            "--results",
            str(trained / "results"),
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and "another tokenizer" in err[-1]
