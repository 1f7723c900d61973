"""`miniformer metrics-diff`: the researcher's `dvc metrics diff` against the reference in docs/, which DVC cannot do
(it compares revisions of one file, and printed "-" for every key of two files)."""

from __future__ import annotations

import json

from miniformer.cli import main
from miniformer.stages.metrics_diff import diff_rows, flatten


def test_flatten_keeps_numbers_by_their_path_and_leaves_out_flags_and_text():
    tree = {"baseline": {"seed0": {"val_loss": 1.5, "diverged": False, "n_params": 10, "note": "x", "step": None}}}
    assert flatten(tree) == {"baseline.seed0.val_loss": 1.5, "baseline.seed0.n_params": 10,
                             "baseline.seed0.step": None}


def test_diff_rows_show_what_changed_and_what_one_side_lacks():
    mine = {"baseline": {"seed0": {"val_loss": 1.25, "test_loss": 2.0}}, "pos_alibi": {"seed0": {"val_loss": 3.0}}}
    ref = {"baseline": {"seed0": {"val_loss": 1.5, "test_loss": 2.0}}, "pos_t5": {"seed0": {"val_loss": 2.0}}}
    rows = diff_rows(mine, ref)
    assert ("baseline.seed0.val_loss", "1.5", "1.25", "-0.25") in rows
    assert ("pos_alibi.seed0.val_loss", "absent", "3", "—") in rows
    assert ("pos_t5.seed0.val_loss", "2", "absent", "—") in rows
    assert not any(r[0] == "baseline.seed0.test_loss" for r in rows)  # equal: shown only with --all
    assert any(r[0] == "baseline.seed0.test_loss" for r in diff_rows(mine, ref, show_all=True))


def test_the_readmes_command_reads_the_reference_in_docs_by_default(tmp_path, capsys, monkeypatch):
    """`miniformer metrics-diff`, as the README writes it, from the project root: results/ against docs/."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    reference = json.loads((root / "docs" / "default-study-metrics.json").read_text())
    mine = json.loads(json.dumps(reference))
    mine["baseline"]["seed0"]["val_loss"] += 0.5
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "metrics.json").write_text(json.dumps(mine))
    (tmp_path / "docs").symlink_to(root / "docs")
    monkeypatch.chdir(tmp_path)
    assert main(["metrics-diff"]) == 0
    out = capsys.readouterr().out
    assert "baseline.seed0.val_loss" in out and "+0.5" in out and "1 of " in out
    assert main(["metrics-diff", "--against", str(tmp_path / "nothing-here")]) == 2
    assert "is missing" in capsys.readouterr().err


def test_an_edited_aggregate_or_a_file_that_is_not_metrics_is_refused(tmp_path, capsys):
    """The second battery: `val_loss` set to 7.7777 in results/metrics.json printed as a +5.95 change with exit 0 (the
    report refused the same file); a claims file passed as the reference compared "2029 of 2029" numbers."""
    from pathlib import Path

    from miniformer.runtime.provenance import digests, write_sealed_json

    root = Path(__file__).resolve().parent.parent
    results = tmp_path / "results"
    results.mkdir()
    (results / "metrics.json").write_text((root / "docs" / "default-study-metrics.json").read_text())
    write_sealed_json(results / "provenance.json", {"files": digests(results, ("metrics.json",))})
    reference = str(root / "docs")
    assert main(["metrics-diff", "--results", str(results), "--against", reference]) == 0
    assert "0 of " in capsys.readouterr().out
    text = (results / "metrics.json").read_text()
    (results / "metrics.json").write_text(text.replace('"val_loss": 1.', '"val_loss": 7.', 1))
    assert main(["metrics-diff", "--results", str(results), "--against", reference]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "is not the file" in err
    claims = str(root / "docs" / "long-study-claims.json")
    assert main(["metrics-diff", "--results", reference, "--against", claims]) == 2
    assert "is not a metrics file" in capsys.readouterr().err
