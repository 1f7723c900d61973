"""`miniformer compare` and the claims table, on hand-made claims: what counts as a changed verdict and a moved
effect, and the LaTeX a paper includes."""

from __future__ import annotations

import json
import re

import pytest

from miniformer.cli import main
from miniformer.stages.compare import compare
from miniformer.study.claim_table import claim_rows, latex_escape, moved, sealed_claims_text, to_latex


def write_claims(path, claims: list[dict], profile: str = "default", steps: int | None = 300) -> None:
    """A claims file as `miniformer report` writes it: sealed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(sealed_claims_text({"profile": profile, "steps": steps, "claims": claims}), encoding="utf-8")


def record(verdict: str, effect: float, half: float, counted: bool = True) -> dict:
    return {"claim": "RoPE beats learned", "source": "Su 2021", "test": "the paper's test", "counted": counted,
            "verdict": verdict, "converged": False, "still_changing": False,
            "estimates": {"learned − rope": {"effect": effect, "half_width": half, "spread": "own", "seeds": 3}}}


@pytest.mark.parametrize(("a", "b", "expected"), [
    ((0.10, 0.03), (0.14, 0.04), False),  # |Δ| 0.04 < √(0.03² + 0.04²) = 0.05
    ((0.10, 0.03), (0.16, 0.04), True),  # |Δ| 0.06 > 0.05
    ((0.10, 0.03), (0.05, 0.04), False),  # |Δ| 0.05 is not more than 0.05
    ((0.10, None), (0.10, 0.04), None),  # an unbounded interval cannot say
])
def test_an_effect_moved_when_the_difference_exceeds_its_own_interval(a, b, expected):
    mine, theirs = ({"effect": e, "half_width": h} for e, h in (a, b))
    assert moved(mine, theirs) is expected


def test_a_changed_verdict_is_counted_and_named():
    same = compare({"c": record("reproduced", 0.1, 0.03)}, {"c": record("reproduced", 0.1, 0.03)})
    assert (same.changed_verdicts, same.moved_effects) == (0, 0)
    changed = compare({"c": record("undecided", 0.3, 0.03)}, {"c": record("reproduced", 0.1, 0.03)})
    assert (changed.changed_verdicts, changed.moved_effects) == (1, 1)
    assert changed.lines[0].startswith("CHANGED")
    one_side = compare({}, {"c": record("reproduced", 0.1, 0.03)})
    assert one_side.only_one_side == 1 and one_side.changed_verdicts == 0


def test_compare_exits_1_on_a_changed_verdict_and_refuses_a_folder_without_claims(tmp_path, capsys):
    write_claims(tmp_path / "mine" / "claims.json", [record("undecided", 0.1, 0.03)])
    write_claims(tmp_path / "ref" / "default-study-claims.json", [record("reproduced", 0.1, 0.03)])
    assert main(["compare", "--results", str(tmp_path / "mine"), "--against", str(tmp_path / "ref")]) == 1
    assert "CHANGED  RoPE beats learned: undecided  (reference: reproduced)" in capsys.readouterr().out
    assert main(["compare", "--results", str(tmp_path / "mine"), "--against", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds no claims.json" in err and "--against" in err


def test_compare_notes_claims_measured_under_another_profile(tmp_path, capsys):
    for name, profile in (("mine", "smoke"), ("ref", "default")):
        write_claims(tmp_path / name / "claims.json", [record("reproduced", 0.1, 0.03)], profile)
    assert main(["compare", "--results", str(tmp_path / "mine"), "--against", str(tmp_path / "ref")]) == 0
    out = capsys.readouterr().out
    assert "under profile 'smoke', the other run's under 'default'" in out and "0 verdict(s) changed" in out


def test_compare_against_docs_picks_the_reference_of_your_runs_profile(tmp_path, capsys):
    """docs/ holds a default and a long reference: a long run is held to the long one, any other to the default."""
    for profile, verdict in (("default", "reproduced"), ("long", "undecided")):
        write_claims(tmp_path / "ref" / f"{profile}-study-claims.json", [record(verdict, 0.1, 0.03)], profile)
    for profile, changed in (("long", 0), ("smoke", 1)):
        write_claims(tmp_path / profile / "claims.json", [record("undecided", 0.1, 0.03)], profile)
        assert main(["compare", "--results", str(tmp_path / profile), "--against", str(tmp_path / "ref")]) == changed
        expected = "long-study-claims.json" if profile == "long" else "default-study-claims.json"
        assert expected in capsys.readouterr().out


def _edited_effect(path) -> None:
    path.write_text(path.read_text(encoding="utf-8").replace('"effect": 0.1,', '"effect": 7.7777,'), encoding="utf-8")


def _no_verdict(path) -> None:
    document = json.loads(path.read_text(encoding="utf-8"))
    del document["claims"][0]["verdict"]
    path.write_text(sealed_claims_text(document), encoding="utf-8")  # sealed, but not whole


def _string_estimate(path) -> None:
    document = json.loads(path.read_text(encoding="utf-8"))
    document["claims"][0]["estimates"]["learned − rope"]["effect"] = "0.1"
    path.write_text(sealed_claims_text(document), encoding="utf-8")


def _unsealed(path) -> None:
    document = json.loads(path.read_text(encoding="utf-8"))
    del document["checksum"]
    path.write_text(json.dumps(document), encoding="utf-8")


@pytest.mark.parametrize(("damage", "said"), [(_edited_effect, "does not match the checksum"),
                                             (_no_verdict, "has no claim text or no verdict"),
                                             (_string_estimate, "is not a number ± a number"),
                                             (_unsealed, "carries no checksum")])
@pytest.mark.parametrize("side", ["mine", "ref"])
def test_compare_refuses_an_edited_or_broken_claims_file_in_one_line(tmp_path, capsys, damage, said, side):
    """An effect edited to 7.7777 is never printed as a result; a file without a verdict or with a string estimate is
    one line, not a traceback; on either side of the comparison."""
    write_claims(tmp_path / "mine" / "claims.json", [record("reproduced", 0.1, 0.03)])
    write_claims(tmp_path / "ref" / "claims.json", [record("reproduced", 0.1, 0.03)])
    assert main(["compare", "--results", str(tmp_path / "mine"), "--against", str(tmp_path / "ref")]) == 0
    capsys.readouterr()
    damage(tmp_path / side / "claims.json")
    assert main(["compare", "--results", str(tmp_path / "mine"), "--against", str(tmp_path / "ref")]) == 2
    out, err = capsys.readouterr()
    assert "7.778" not in out and err.count("\n") == 1 and said in err and f"{side}/claims.json" in err


def test_the_committed_references_are_sealed_claims_files(capsys):
    """docs/ holds what `compare --against docs` reads: sealed, so the reference itself cannot drift unseen."""
    from pathlib import Path

    from miniformer.study.claim_table import read_claims_document

    for path in sorted(Path("docs").glob("*-study-claims.json")):
        assert read_claims_document(path, "")["claims"]


def test_the_latex_table_escapes_and_marks_proxies():
    rows = claim_rows([record("reproduced", 0.1234, 0.05), record("undecided", -0.2, 0.1, counted=False)])
    tex = to_latex(rows)
    assert r"$+0.123 \pm 0.050$" in tex and "undecided (proxy)" in tex
    assert r"learned $-$ rope" in tex and tex.count("RoPE beats learned (Su 2021)") == 1  # the repeat row is blank
    assert latex_escape("50% & T_5 #1") == r"50\% \& T\_5 \#1"
    assert latex_escape("1/√d, §3") == r"1/$\surd$d, \S{}3"


def test_the_latex_claims_table_compiles_breaks_across_pages_and_fits_the_text_width(tmp_path):
    """`\\input{claims}` of the 43-row tabular overflowed the page by 716 pt and was cut off. The reference's own
    rows, as a paper includes them: compiled, on more than one page, and no line wider than the text."""
    import shutil
    import subprocess
    from pathlib import Path

    from miniformer.study.claim_table import read_claims_document
    from tests.conftest import require_system

    require_system(shutil.which("pdflatex") is not None,
                   "a TeX to compile the claims table (apt-get install texlive-latex-base texlive-latex-recommended)")
    records = read_claims_document(Path("docs/default-study-claims.json"), "")["claims"]
    (tmp_path / "claims.tex").write_text(to_latex(claim_rows(records)), encoding="utf-8")
    (tmp_path / "paper.tex").write_text("\n".join([
        r"\documentclass{article}", r"\usepackage[T1]{fontenc}", r"\usepackage{booktabs,longtable,array}",
        r"\begin{document}", r"\input{claims}", r"\end{document}", ""]), encoding="utf-8")
    done = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "paper.tex"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    log = (tmp_path / "paper.log").read_text(encoding="latin-1")
    assert done.returncode == 0, log[-2000:]
    pages = int(re.search(r"Output written on paper\.pdf \((\d+) pages?", log).group(1))
    assert pages >= 2 and "Overfull \\hbox" not in log
