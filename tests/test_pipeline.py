"""The smoke study end to end under Snakemake, with DVC's record of what it ran; then the edits a user makes to
params.yaml and the code, each re-planned and re-run in place under both tools, in order (slow: minutes).
test_smoke_outputs.py reads the same study, built once for both (conftest.smoke_study_built)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from markupsafe import escape

from tests.studies import (
    BIN,
    copy_of,
    dvc_changed_stages,
    planned_jobs,
    planned_reasons,
    readme_sample,
    set_lr,
    sh,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smk(smoke_study_built, tmp_path_factory) -> Path:
    """This file's copy of the session's smoke study: its tests edit it in place, one after another."""
    return copy_of(smoke_study_built, tmp_path_factory.mktemp("snakemake") / "study")


def test_snakemake_smoke_study_builds_everything(smk):
    from miniformer.params import Study

    study = Study.load(smk / "params.yaml")
    metrics = json.loads((smk / "results" / "metrics.json").read_text())
    assert {(e, f"seed{s}") for e, s in study.runs()} == {(e, s) for e in metrics for s in metrics[e]}
    assert len(metrics["baseline"]) >= 3
    html = (smk / "report" / "report.html").read_text()
    assert "Claims" in html and "data:image/png;base64," in html
    # the smoke page says first what it is: a wiring check whose verdicts are not findings
    assert html.index('id="smoke-warning"') < html.index("Claims") and "not findings" in html
    for exp, seed in study.runs():
        assert (smk / "results" / "logs" / "run" / exp / f"seed{seed}.log").exists()
    # a run told to score another number of minimal pairs (params.yaml: obj_mlm, obj_span) is named with its count
    pairs = {e: json.loads((smk / "results" / "eval" / e / "seed0" / "eval.json").read_text())["minimal_pairs"]["pairs"]
             for e in ("baseline", "obj_mlm")}
    assert pairs["obj_mlm"] != pairs["baseline"]
    assert f"Each model scores {pairs['baseline']} held-out lines" in html and f"obj_mlm {pairs['obj_mlm']}" in html
    verdicts = json.loads((smk / "results" / "verdicts.json").read_text())
    assert verdicts["not run"] == 0  # the smoke profile runs every experiment a claim reads: each claim is judged
    claims = json.loads((smk / "results" / "claims.json").read_text())["claims"]
    assert verdicts["proxy"] >= 1
    # a row reading a run at the unigram loss says so in the claims table, as claims.json records it
    for c in claims:
        row = html[html.index(escape(c["claim"]), html.index('<table id="claims-table">')):]
        assert ("reads runs at or above the unigram loss" in row[:row.index("</tr>")]) == bool(c["stuck"]), c["claim"]


def glance_and_claims(html: str) -> tuple[list[tuple[str, str, str]], dict[str, tuple[str, str]]]:
    """(number, link target, claim) per at-a-glance row; claim number -> (row anchor, claim) of the claims table."""
    glance = html[html.index('<table id="glance">'):]
    glance = glance[:glance.index("</table>")]
    rows = re.findall(r'<tr><td><a href="#claim-(\d+)">(\d+)</a></td><td>(.*?)</td>', glance, flags=re.S)
    claims = html[html.index('<table id="claims-table">'):]
    claims = claims[:claims.index("</table>")]
    table = {n: (anchor, claim) for anchor, n, claim in
             re.findall(r'<tr id="claim-(\d+)"><td>(\d+)</td><td>(.*?)</td>', claims, flags=re.S)}
    return [(number, target, claim) for target, number, claim in rows], table


def test_the_glance_tables_numbers_link_to_the_claims_of_the_same_number_and_text(smk):
    """What the browser test sees, read from the page itself: every at-a-glance row links to the claims-table row of
    its own number, and that row states the same claim."""
    glance, table = glance_and_claims((smk / "report" / "report.html").read_text())
    assert len(glance) == len(table) >= 10
    for number, target, claim in glance:
        assert target == number and table[number] == (number, claim), (number, claim[:60])


def test_the_readmes_smoke_outputs_are_what_the_commands_print(smk):
    """Every command of the README's "Real output after `make smoke`" block, run as written on a fresh smoke study,
    prints exactly what the README shows (stdout and stderr, in order)."""
    pairs = readme_sample("Real output after `make smoke`")
    assert len(pairs) >= 5
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    for command, shown in pairs:
        done = subprocess.run(["bash", "-c", f"{command} 2>&1"], cwd=smk, env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.stdout == shown, f"$ {command}\n--- README ---\n{shown}--- printed ---\n{done.stdout}"


def test_snakemake_records_exactly_what_ran_in_dvc(smk):
    assert dvc_changed_stages(smk) == set()
    out = sh(smk, "snakemake", "-n", "--nolock")
    assert "Nothing to be done" in out.stdout + out.stderr


def test_one_experiment_change_reruns_only_that_experiment_under_snakemake(smk):
    set_lr(smk, "pos_t5", 0.005)  # a one-seed experiment: one run job (train, then evaluate)
    out = sh(smk, "snakemake", "-n", "--nolock")
    text = out.stdout + out.stderr
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", text, flags=re.M))
    assert jobs.get("run") == "1", text[-2000:]
    assert "pos_t5" in text and "exp=pos_learned" not in text
    # DVC sees the same change: the run, the stages that read the run list, and the check of every key
    assert dvc_changed_stages(smk) == {"check_params", "run@pos_t5", "aggregate", "report"}
    # targeted run: only that experiment and what depends on it; DVC's record then matches again
    sh(smk, "snakemake", "--cores", "2", "all")
    assert dvc_changed_stages(smk) == set()


def test_a_hypothesis_edit_rerenders_the_report_under_both_tools(smk):
    p = smk / "params.yaml"
    original = p.read_text()
    p.write_text(original.replace('"RMSNorm is as good as LayerNorm', '"RMSNorm matches LayerNorm', 1))
    try:
        # Both tools re-plan the same: the edited experiment (DVC's params name the whole experiment entry; its
        # finished checkpoint resumes, so nothing retrains) and what reads the experiment list.
        jobs = planned_jobs(smk)
        from miniformer.params import Study

        seeds = len(Study.load(smk / "params.yaml").seeds_for("block_rmsnorm"))  # one Snakemake job per seed
        assert jobs.get("report") == "1" and jobs.get("aggregate") == "1" and jobs.get("run") == str(seeds), jobs
        assert dvc_changed_stages(smk) == {"check_params", "run@block_rmsnorm", "aggregate", "report"}
    finally:
        p.write_text(original)
    # the edit taken back: the same text, nothing left to do under either tool
    assert planned_jobs(smk) == {} and dvc_changed_stages(smk) == set()


def test_after_snakemake_a_dvc_experiment_reruns_one_experiment_and_snakemake_then_plans_nothing(smk):
    """One state for both tools: what Snakemake ran is DVC's record; `dvc exp run -S` with one override re-runs that
    experiment and the two stages after it, without warnings, and `dvc exp show` lists it by name; then Snakemake
    finds nothing to redo and leaves its signature of that experiment marked "no known change"."""
    sh(smk, "snakemake", "--cores", "2", "all")  # what the tests before left (a restored params.yaml), recorded
    assert dvc_changed_stages(smk) == set()
    sh(smk, "git", "add", "-A")
    sh(smk, "git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "after snakemake", check=False)
    done = sh(smk, "dvc", "exp", "run", "-n", "alibi-lr", "-S", "+experiments.pos_alibi.train.lr=0.006", timeout=1200)
    ran = set(re.findall(r"Running stage '([^']+)'", done.stdout))
    assert ran == {"check_params", "run@pos_alibi", "aggregate", "report"}, ran
    assert "WARNING" not in done.stdout + done.stderr, (done.stdout + done.stderr)[-2000:]
    table = json.loads(sh(smk, "dvc", "exp", "show", "--json").stdout)
    names = {run.get("name") for entry in table for e in (entry.get("experiments") or []) for run in e.get("revs", [])}
    assert "alibi-lr" in names, names
    assert dvc_changed_stages(smk) == set()
    assert planned_jobs(smk) == {}, planned_jobs(smk)
    assert (smk / "results" / "signatures" / "pos_alibi" / "seed0.json").stat().st_mtime == 0


def test_another_config_profile_is_planned_in_full_and_the_files_profile_comes_back_clean(smk):
    """A Snakemake run under `--config profile=…` other than params.yaml's is not what DVC recorded: every run of that
    profile is planned (DVC's record is never taken as its own); back on the file's profile, what DVC recorded is
    current again and nothing is planned."""
    from miniformer.params import Study

    out = sh(smk, "snakemake", "-n", "--nolock", "--config", "profile=default")
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", out.stdout + out.stderr, flags=re.M))
    assert int(jobs.get("run", 0)) == len(Study.load(smk / "params.yaml", "default").runs()), jobs
    assert planned_jobs(smk) == {}


def test_code_edits_rerun_what_they_touch(smk):
    """Evaluation code edited: every run job re-runs for its evaluation signature alone, so its finished checkpoint
    resumes and nothing retrains (test_provenance's no-op resume). Model code edited: every run job re-runs for its own
    run signature: it retrains. DVC sees the same (every `run@` stage changed). Dry runs only; the code is restored."""
    from miniformer.params import Study

    runs = Study.load(smk / "params.yaml", "smoke").runs()
    edited = {name: smk / "src" / "miniformer" / name for name in ("stages/evaluate.py", "network/positions.py")}
    originals = {name: path.read_text() for name, path in edited.items()}

    def edit(name: str) -> None:
        edited[name].write_text(originals[name] + "\n# an edit\n")

    def run_signature(wildcards: str) -> str:
        exp, seed = re.fullmatch(r"exp=(.+), seed=(\d+)", wildcards).groups()
        return f"results/signatures/{exp}/seed{seed}.json"

    try:
        edit("stages/evaluate.py")
        reasons = planned_reasons(smk, "run")
        assert len(reasons) == len(runs), reasons
        for wildcards, reason in reasons.items():
            assert "evaluation-code.json" in reason and run_signature(wildcards) not in reason, (wildcards, reason)
        changed = dvc_changed_stages(smk)
        assert changed and all(s.startswith("run@") for s in changed)
        edit("network/positions.py")
        reasons = planned_reasons(smk, "run")
        assert len(reasons) == len(runs), reasons
        for wildcards, reason in reasons.items():
            assert run_signature(wildcards) in reason, (wildcards, reason)
    finally:
        for name, path in edited.items():
            path.write_text(originals[name])
    assert planned_jobs(smk) == {}  # the signatures follow the code back: nothing is left to redo


