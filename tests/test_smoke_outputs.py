"""The smoke study's outputs, read and rebuilt from copies: the report in a headless browser, its claims as data and
beside another budget's or design's; a corpus edit re-planned; an experiment removed, or moved out of the profile; a
deleted output re-made by either tool (slow: they read the smoke study test_pipeline.py reads too, built once for
both: conftest.smoke_study_built)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from miniformer.study.claim_table import sealed_claims_text
from tests.conftest import require_system
from tests.studies import (
    copy_of,
    digests_of,
    dvc_changed_stages,
    planned_jobs,
    result_digests,
    sh,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smk(smoke_study_built, tmp_path_factory) -> Path:
    """This file's copy of the session's smoke study, left as built: each test that edits works on a copy of it."""
    return copy_of(smoke_study_built, tmp_path_factory.mktemp("snakemake") / "study")


def test_a_corpus_edit_replans_prepare_under_both_tools(smk, tmp_path):
    """Files under data/raw are prepare's input under both tools: adding one re-plans prepare (and all downstream)."""
    study = tmp_path / "study"
    shutil.copytree(smk, study, symlinks=True, ignore=shutil.ignore_patterns("ckpt*.pt"))
    assert planned_jobs(study).get("prepare") is None
    (study / "data" / "raw" / "more.txt").write_text("A new line of the corpus.\n")
    assert "prepare" in dvc_changed_stages(study)
    assert planned_jobs(study).get("prepare") == "1"


def test_a_removed_experiment_leaves_metrics_and_report_under_both_tools(smk, tmp_path):
    """An experiment deleted from params.yaml: both tools plan aggregate and report, no run; the study re-made
    without it (in a copy: the experiment stays in the shared study)."""
    study = copy_of(smk, tmp_path / "study")
    p = study / "params.yaml"
    original = p.read_text()
    block = re.search(r"^  heads_mean:\n(    .*\n)+", original, flags=re.M).group(0)
    p.write_text(original.replace(block, ""))
    jobs = planned_jobs(study)
    assert jobs.get("aggregate") == "1" and jobs.get("report") == "1" and "run" not in jobs, jobs
    assert dvc_changed_stages(study) == {"check_params", "aggregate", "report"}
    sh(study, "snakemake", "--cores", "2", "all")
    metrics = json.loads((study / "results" / "metrics.json").read_text())
    assert "heads_mean" not in metrics and "baseline" in metrics
    assert "heads_mean" not in (study / "report" / "report.html").read_text()


def test_an_experiment_moved_out_of_the_profile_leaves_the_report_rendering(smk, tmp_path):
    """`profiles:` that no longer names the active profile: the run drops out of metrics and the report renders
    without it (the report once read every experiment's first seed, and had none for it). In a copy."""
    study = copy_of(smk, tmp_path / "study")
    p = study / "params.yaml"
    original = p.read_text()
    limited = "    model: {init: gpt2}\n    profiles: [%s]\n"
    edited = original.replace(limited % "smoke, gpu", limited % "gpu")
    assert edited != original
    p.write_text(edited)
    sh(study, "snakemake", "--cores", "2", "all")
    metrics = json.loads((study / "results" / "metrics.json").read_text())
    assert "block_gpt2_init" not in metrics and "block_post_norm_gpt2_init" in metrics
    assert "Head count has a U-shape" in (study / "report" / "report.html").read_text()


def test_report_renders_offline_in_a_headless_browser(smk, tmp_path):
    import base64
    import io

    import matplotlib.image as mpimg

    html = (smk / "report" / "report.html").read_text()
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', html)
    assert len(images) >= 10
    for img in images:
        pixels = mpimg.imread(io.BytesIO(base64.b64decode(img)), format="png")
        assert pixels.shape[0] > 50 and pixels.std() > 0  # decodes and is not blank
    assert not re.search(r'(src|href)="(https?:)?//', html), "external reference in the report"
    assert "<script" not in html
    assert 'class="hovermap"' in html and "<title>query 0 " in html  # the single-head map, hoverable
    for section in ("3. Positions", "4. Single-head attention", "5. Multi-head attention", "6. The block",
                    "7. Training the mini-former", "8. Objectives", "Claims", "Breakage log", "References",
                    "Environment"):
        assert section in html, section

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    require_system(bool(chromium), "the screenshot test needs a browser: apt-get install chromium")
    shot = tmp_path / "shot.png"
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--no-first-run",
                    f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1200,3000",
                    (smk / "report" / "report.html").as_uri()], capture_output=True, timeout=120)
    pixels = mpimg.imread(shot)
    assert pixels.shape[:2] == (3000, 1200) and pixels.std() > 0.05  # the page drew text and figures


def test_model_samples_are_escaped_by_the_report_builder(smk, tmp_path):
    """A generated sample that looks like HTML must reach the page as text: the real builder, on a real study."""
    import shutil

    from miniformer.params import Study
    from miniformer.stages.report import build_report

    results = tmp_path / "results"
    shutil.copytree(smk / "results", results, ignore=shutil.ignore_patterns("*.pt"))
    samples = results / "runs" / "baseline" / "seed0" / "samples.jsonl"
    samples.write_text(json.dumps({"step": 1, "kind": "generation", "text": "<script>alert(1)</script>"}) + "\n")
    # as if training had written it: the run's sealed metrics.json records its digest (the report checks it)
    from miniformer.runtime.provenance import CHECKSUM, file_digest, read_sealed_json, write_sealed_json

    metrics_path = samples.parent / "metrics.json"
    metrics = read_sealed_json(metrics_path, "")
    metrics["files"]["samples.jsonl"] = file_digest(samples)
    write_sealed_json(metrics_path, {k: v for k, v in metrics.items() if k != CHECKSUM})
    out = build_report(Study.load(smk / "params.yaml"), results, tmp_path / "report.html", smk / "data" / "prepared")
    html = out.read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script>alert(1)" not in html


def test_a_deleted_or_half_written_output_is_remade_by_a_plain_rerun_of_either_tool(smk, tmp_path):
    """Holes a kill or a careless `rm` leaves: eval.json missing beside its windows.json (evaluate killed before its
    last write), a whole run folder gone. A plain `snakemake all`, then a plain `dvc repro`, re-make them (no -f) and
    the study's numbers come back byte for byte."""
    study = tmp_path / "study"
    shutil.copytree(smk, study, symlinks=True)  # the study as built: nothing to bring up to date first
    numbers = ("results/metrics.json", "results/windows.json", "results/headline.json")
    before = digests_of(study, *numbers)
    baseline_eval = study / "results/eval/baseline/seed0/eval.json"
    baseline_eval.unlink()
    shutil.rmtree(study / "results/runs/pos_t5")
    shutil.rmtree(study / "results/eval/pos_t5")
    sh(study, "snakemake", "--cores", "2", "all")
    assert baseline_eval.exists() and (study / "results/runs/pos_t5/seed0/ckpt.pt").exists()
    assert digests_of(study, *numbers) == before
    assert dvc_changed_stages(study) == set()  # what Snakemake re-made is recorded for DVC too

    # DVC's stage is the whole experiment (every seed and sweep point): the one-run experiment's eval.json this time
    t5_eval = study / "results/eval/pos_t5/seed0/eval.json"
    t5_eval.unlink()
    assert "run@pos_t5" in dvc_changed_stages(study)
    sh(study, "dvc", "repro", "-q", timeout=1200)
    assert t5_eval.exists() and digests_of(study, *numbers) == before


def test_the_ladders_claims_join_the_report_as_another_design(smk, tmp_path):
    """`make ladder`'s claims file, copied to results/budgets/ladder.json as the README says, puts its verdict beside
    the warm-up row where it judged the claim on more seeds; it joins neither the budget table nor the totals."""
    import shutil

    from miniformer.params import Study
    from miniformer.stages.report import build_report

    results = tmp_path / "results"
    shutil.copytree(smk / "results", results, ignore=shutil.ignore_patterns("*.pt"))
    document = json.loads((results / "claims.json").read_text())
    before = json.loads((results / "verdicts.json").read_text())
    # the warm-up row where the smoke study judged it, else any claim not about converged models that it judged
    judged = [r for r in document["claims"] if not r["converged"] and any(r["estimates"].values())]
    warmup = next((r for r in judged if r["claim"] == "Post-norm needs warm-up; pre-norm trains without"), judged[0])
    here = max(e["seeds"] for e in warmup["estimates"].values() if e)
    for e in warmup["estimates"].values():
        if e:
            e["seeds"] = here + 2
    warmup["verdict"] = "contradicted" if warmup["verdict"] != "contradicted" else "reproduced"
    warmup["why"] = "each seed's pass/fail"  # what that report says the verdict rests on travels with it
    document.update(profile="ladder")  # the same steps: another design, not another budget
    (results / "budgets").mkdir()
    (results / "budgets" / "ladder.json").write_text(sealed_claims_text(document))
    html = build_report(Study.load(smk / "params.yaml"), results, tmp_path / "report.html",
                        smk / "data" / "prepared").read_text()
    assert f"; {warmup['verdict']} (each seed&#39;s pass/fail) in the ladder profile on {here + 2} seeds (" in html \
        or f"; {warmup['verdict']} (each seed's pass/fail) in the ladder profile on {here + 2} seeds (" in html
    after = json.loads((results / "verdicts.json").read_text())
    assert after["budgets"] == {} and after["at the longest budget"] == before["at the longest budget"]
    assert 'id="budget-table"' not in html  # no other budget: no budget table


def test_a_longer_budgets_claims_join_the_report_and_its_totals(smk, tmp_path):
    """A `long` run's claims file under results/budgets/ puts each converged claim at both budgets side by side, and
    the totals count a converged claim at the longer budget: flip one there and the totals move by one."""
    import shutil

    from miniformer.params import Study
    from miniformer.stages.report import build_report

    results = tmp_path / "results"
    shutil.copytree(smk / "results", results, ignore=shutil.ignore_patterns("*.pt"))
    document = json.loads((results / "claims.json").read_text())
    before = json.loads((results / "verdicts.json").read_text())
    target = next(r for r in document["claims"] if r["converged"] and r["counted"] and r["verdict"] != "contradicted")
    target["verdict"] = "contradicted"
    document.update(profile="long", steps=document["steps"] + 1000)
    (results / "budgets").mkdir()
    (results / "budgets" / "long.json").write_text(sealed_claims_text(document))  # as a long run's report writes it
    study = Study.load(smk / "params.yaml")
    html = build_report(study, results, tmp_path / "report.html", smk / "data" / "prepared").read_text()
    after = json.loads((results / "verdicts.json").read_text())
    assert after["contradicted"] == before["contradicted"]  # this run's own totals are this run's
    longest = after["at the longest budget"]
    assert longest["contradicted"] == before["contradicted"] + 1 and after["budgets"] == {"long": document["steps"]}
    # the glance and claims tables say it too, with what it is worth there (a cosine run's file: not flattened)
    untested = "converged claim untested: that budget has not flattened"
    assert f"contradicted at {document['steps']} steps (long; {untested})" in html
    table = html[html.index('id="budget-table"'):html.index("</table>", html.index('id="budget-table"'))]
    assert f"{document['steps']} steps (long)" in table and table.count("<tr>") == 1 + sum(
        r["converged"] for r in document["claims"])
    assert json.loads((results / "claims.json").read_text())["steps"] == document["steps"] - 1000


def test_the_claims_table_is_data_and_compare_flags_a_changed_verdict(smk, tmp_path, capsys):
    """The report writes the claims as JSON, CSV and LaTeX; `compare` finds nothing changed against the run itself
    and exits 1 naming the claim when one verdict of the other side was edited."""
    import csv

    from miniformer.cli import main

    results = smk / "results"
    document = json.loads((results / "claims.json").read_text())
    records = document["claims"]
    assert document["profile"] == "smoke"
    verdicts = json.loads((results / "verdicts.json").read_text())
    assert sum(r["verdict"] == "reproduced" and r["counted"] for r in records) == verdicts["reproduced"]
    rows = list(csv.DictReader((results / "claims.csv").open()))
    assert len(rows) == sum(max(1, len(r["estimates"])) for r in records)
    tex = (results / "claims.tex").read_text()
    assert r"\toprule" in tex and r"\bottomrule" in tex and tex.count(r"\\") >= len(rows)
    assert main(["compare", "--results", str(results), "--against", str(results / "claims.json")]) == 0
    assert "0 verdict(s) changed, 0 effect(s) moved" in capsys.readouterr().out
    edited = json.loads(json.dumps(document))
    target = next(r for r in edited["claims"] if r["counted"])
    target["verdict"] = "contradicted" if target["verdict"] != "contradicted" else "reproduced"
    (tmp_path / "claims.json").write_text(sealed_claims_text(edited))  # another run's claims, as its report writes them
    assert main(["compare", "--results", str(results), "--against", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert f"CHANGED  {target['claim']}" in out and "1 verdict(s) changed" in out


def test_the_reports_anchors_resolve_and_its_glance_table_agrees_with_the_claims_in_chromium(smk, tmp_path):
    """Parsed by a browser: every link inside the page names an element that exists; the findings-at-a-glance table,
    first on the page, lists the claims table's rows in order with the same verdicts; each links to its row."""
    from html.parser import HTMLParser

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    require_system(bool(chromium), "the anchor test needs a browser: apt-get install chromium")
    done = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
                           (smk / "report" / "report.html").as_uri()], capture_output=True, text=True, timeout=120)
    dom = done.stdout
    assert "Findings at a glance" in dom, done.stderr[-1000:]

    class Page(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.ids: list[str] = []
            self.links: list[str] = []
            self.rows: dict[str, list[list[str]]] = {"glance": [], "claims-table": []}
            self.table: str | None = None
            self.cell: list[str] | None = None

        def handle_starttag(self, tag, attrs) -> None:
            a = dict(attrs)
            if "id" in a:
                self.ids.append(a["id"])
            if tag == "a" and a.get("href", "").startswith("#"):
                self.links.append(a["href"][1:])
            if tag == "table":
                self.table = a.get("id")
            if tag == "tr" and self.table in self.rows:
                self.rows[self.table].append([])
            if tag == "td" and self.table in self.rows:
                self.cell = []

        def handle_endtag(self, tag) -> None:
            if tag == "td" and self.cell is not None:
                self.rows[self.table][-1].append(" ".join("".join(self.cell).split()))
                self.cell = None
            if tag == "table":
                self.table = None

        def handle_data(self, data) -> None:
            if self.cell is not None:
                self.cell.append(data)

    page = Page()
    page.feed(dom)
    assert len(page.ids) == len(set(page.ids)), "an id used twice"
    unresolved = sorted(set(page.links) - set(page.ids))
    assert not unresolved and len(page.links) > 40, unresolved
    glance = [r for r in page.rows["glance"] if r]
    table = [r for r in page.rows["claims-table"] if r]
    assert len(glance) == len(table) >= 18
    for g, t in zip(glance, table):
        assert g[0] == t[0] and g[1] == t[1]  # number and claim
        assert t[7].startswith(g[2].removesuffix(" (proxy)"))  # the same verdict
    trends = [t[8] for t in table]  # every row says where its effect is heading, or that it is not followed
    # a cosine study's tail never reads "settled": only "flat as the rate decays (not judged)" or still changing
    moving = {"still changing", "flat as the rate decays (not judged)"}
    assert set(trends) <= moving | {"not followed", "not measured"} and "not followed" in trends, trends
    assert moving & set(trends), trends
    # the contents first, where a reader lands, not after the glance table's rows; then the glance table, the method
    assert dom.index('id="contents"') < dom.index('id="at-a-glance"') < dom.index("<b>Method.</b>")
    assert {f"claim-{i}" for i in range(1, len(table) + 1)} <= set(page.links)


def test_a_profile_without_the_head_sweep_draws_no_head_count_curve_and_says_where_it_runs(smk, tmp_path):
    """The default profile leaves 8, 16 and 32 heads to the long one: with two head counts the report draws no
    'shape' of two points, and names the sweep and where it runs; with the sweep present the curve is drawn."""
    import shutil

    from miniformer.params import Study
    from miniformer.stages.report import build_report

    results = tmp_path / "results"
    shutil.copytree(smk / "results", results, ignore=shutil.ignore_patterns("*.pt"))
    study = Study.load(smk / "params.yaml")
    html = build_report(study, results, tmp_path / "report.html", smk / "data" / "prepared").read_text()
    assert 'alt="val loss minus the reference' in html and "No head-count curve" not in html
    import yaml

    from miniformer.stages.aggregate import aggregate

    params = yaml.safe_load((smk / "params.yaml").read_text())
    for experiment in ("heads_2", "heads_8", "heads_16", "heads_32"):
        params["experiments"][experiment]["profiles"] = ["gpu"]  # as the default profile leaves them to `long`
    without = Study(params)
    aggregate(without, results, smk / "data" / "prepared")
    html = build_report(without, results, tmp_path / "report.html", smk / "data" / "prepared").read_text()
    assert 'alt="val loss minus the reference' not in html
    assert "ran 1, 4 head(s)" in html and "The other head counts (2, 8, 16, 32) run in the profiles that judge" in html
    assert "(the long profile, <code>make long</code>, runs those of Vaswani" in html  # a command, set as one


def test_an_edited_evaluation_costs_no_finished_aggregate_under_snakemake(smk, tmp_path):
    """One hand-edited eval.json, then `snakemake --cores 2 all`: aggregate refused it, and Snakemake had already
    deleted 19 finished files (metrics.json, windows.json, provenance.json, tables, plots …). Now aggregate's outputs
    are Snakemake `update()` outputs: the refusal names the file, and every finished file is as it was."""
    study = tmp_path / "edited"
    shutil.copytree(smk, study, symlinks=True)  # the study as built: nothing to bring up to date first
    eval_json = study / "results" / "eval" / "baseline" / "seed0" / "eval.json"
    eval_json.write_text(eval_json.read_text().replace('"val_loss": ', '"val_loss": 1', 1))
    before = result_digests(study)
    done = sh(study, "snakemake", "--cores", "2", "all", check=False, timeout=1500)
    assert done.returncode != 0
    log = (study / "results" / "logs" / "aggregate.log").read_text()
    assert "eval.json' does not match the checksum" in log and "miniformer evaluate baseline --seed 0" in log
    assert result_digests(study) == before
