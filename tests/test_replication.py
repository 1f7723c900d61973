"""`miniformer replicate` end to end, as `make replication` runs it: each replication setting a Snakemake study in its
own folder, its claims copied under results/settings/, the claims × settings page rendered from them; then the
study's own report shows the same table. Smoke-sized settings (the real ones take ≈ 2 h)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from miniformer.params import REPLICATION
from tests.studies import copy_of, project_copy, sh

pytestmark = pytest.mark.slow

KEEP = ("baseline", "block_rmsnorm")  # one counted claim's arms (RMSNorm ≈ LayerNorm): the table has a verdict to show


def smoke_sized_settings(study: Path) -> None:
    """The replication profiles at the smoke profile's sizes, each still changing what it changes, over KEEP only."""
    params = yaml.safe_load((study / "params.yaml").read_text())
    smoke = params["profiles"]["smoke"]
    for name in REPLICATION:
        setting = params["profiles"][name]
        setting.update({k: v for k, v in smoke.items() if k in ("train", "eval")}, experiments=list(KEEP))
        setting["model"] = {**smoke["model"], **setting.get("model", {})}
    (study / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False, allow_unicode=True))


def test_replicate_runs_each_setting_in_its_folder_and_the_reports_show_every_claim_in_every_setting(
        tmp_path, smoke_study_built):
    study = project_copy(tmp_path / "study", keep=KEEP)
    smoke_sized_settings(study)
    done = sh(study, "python", "-m", "miniformer", "replicate", "--cores", "2", timeout=1500)
    assert "claims × settings: report/replication.html" in done.stdout
    for name in REPLICATION:
        claims = json.loads((study / "results" / "settings" / f"{name}.json").read_text())
        assert claims["profile"] == name
        assert not (study / "results" / "runs").exists()  # the default study's folders are untouched
        assert (study / "replication" / name / "report" / "report.html").exists()
    # a BPE setting's report says what its numbers are per: a token, not a character
    bpe_report = (study / "replication" / "bpe" / "report" / "report.html").read_text()
    assert re.search(r"train split's token\s+frequencies", bpe_report) and "train split's token n-grams" in bpe_report
    small_report = (study / "replication" / "small" / "report" / "report.html").read_text()
    assert re.search(r"train split's character\s+frequencies", small_report)
    bpe = json.loads((study / "results" / "settings" / "bpe.json").read_text())["setting"]
    small = json.loads((study / "results" / "settings" / "small.json").read_text())["setting"]
    assert bpe["tokenizer"] == "bpe" and small["tokenizer"] == "char" and small["n_layer"] == 2
    assert bpe["parameters"] > 0 and small["parameters"] > 0
    # without a default study here, the page reads the reference in docs/ for the default column, and says so
    page = (study / "report" / "replication.html").read_text()
    assert "docs/default-study-claims.json" in page and "<th>bpe</th>" in page and "<th>small</th>" in page
    rms = next(r for r in page.split("<tr>") if r.startswith("<td>") and "RMSNorm" in r)
    assert rms.count('class="v-') == 1 + len(REPLICATION)  # a verdict in every setting
    # the study's own run (a copy of the session's smoke study, trained already): the settings' claims where `make
    # replication` leaves them, then a plain `snakemake all` re-renders its report with the same table, this run's
    # column first
    own = copy_of(smoke_study_built, tmp_path / "own")
    for made in ("results/settings", "replication"):  # what `make replication` leaves in the checkout
        shutil.copytree(study / made, own / made, symlinks=True)
    done = sh(own, "snakemake", "--cores", "2", "all", timeout=1500)
    assert not re.search(r"^rule (run|prepare):", done.stdout + done.stderr, flags=re.M)  # nothing retrains
    html = (own / "report" / "report.html").read_text()
    table = html[html.index('id="settings-table"'):html.index("</table>", html.index('id="settings-table"'))]
    assert "<th>this run</th>" in table and "<th>bpe</th>" in table
    mine = json.loads((own / "results" / "claims.json").read_text())
    assert table.count("<tr>") == 1 + len(mine["claims"]) and mine["setting"]["n_layer"] == 2
    # a second call trains nothing new: every setting's DAG finds its outputs current
    again = sh(study, "python", "-m", "miniformer", "replicate", "--cores", "2", timeout=600)
    assert "Nothing to be done" in again.stdout + again.stderr
