"""A study built by `dvc repro`, DVC's loop on it (metrics diff, push/pull), and the two tools agreeing (slow:
minutes). `dvc exp run` and `dvc exp show` are test_pipeline.py's, run once, after Snakemake: DVC's experiment on
what the other tool made."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.studies import (
    READS_HOOK,
    copy_of,
    dvc_changed_stages,
    project_copy,
    result_digests,
    set_lr,
    sh,
)

pytestmark = pytest.mark.slow


DVC_STUDY = ("baseline", "pos_alibi", "pos_t5")


@pytest.fixture(scope="module")
def dvc(tmp_path_factory) -> Path:
    study = project_copy(tmp_path_factory.mktemp("dvc"), keep=DVC_STUDY)
    sh(study, "dvc", "repro", "-q", timeout=2400)
    return study


def test_dvc_repro_smoke_study(dvc):
    assert dvc_changed_stages(dvc) == set()
    assert (dvc / "report" / "report.html").exists()
    shown = json.loads(sh(dvc, "dvc", "metrics", "show", "--json").stdout)
    files = next(iter(shown.values()))["data"]
    headline = files["results/headline.json"]["data"]
    assert headline["runs"] == sum(len(r) for r in json.loads((dvc / "results" / "metrics.json").read_text()).values())
    verdicts = files["results/verdicts.json"]["data"]
    counted = sum(verdicts[v] for v in ("reproduced", "contradicted", "undecided", "not run"))
    assert counted + verdicts["proxy"] >= 18  # one per claim, proxies counted apart (most are not run in this study)


def test_both_tools_produce_the_same_runs_to_the_last_digit(dvc, smoke_study_built):
    """The same experiments built from nothing by each tool — this file's `dvc repro`, and the smoke study Snakemake
    built for test_pipeline.py (read here, never edited) — give the same files for every run and metrics identical
    to the last digit (same params and seeds on the CPU), whichever tool ran them: the reference's learning-rate
    sweep too (each point has its own folder)."""
    from miniformer.params import Study

    def files(root: Path) -> set[str]:
        skip = {"logs", "dvclive", "signatures"}  # per-tool bookkeeping, not study outputs
        return {str(p.relative_to(root)) for folder in ("runs", "eval") for experiment in DVC_STUDY
                for p in (root / "results" / folder / experiment).rglob("*")
                if p.is_file() and not skip & set(p.parts) and not p.name.startswith(".snakemake")}

    assert files(dvc) and files(dvc) == files(smoke_study_built)
    by_dvc = json.loads((dvc / "results" / "metrics.json").read_text())
    by_snakemake = json.loads((smoke_study_built / "results" / "metrics.json").read_text())
    points = {e for e, _ in Study.load(dvc / "params.yaml").runs() if "/" in e}  # the learning-rate sweep
    assert points and points <= set(by_dvc) and {e.split("/")[0] for e in by_dvc} == set(DVC_STUDY)
    same_runs = {e: by_snakemake.get(e) for e in by_dvc}
    differ = [f"{e}/{r}/{k}: {by_dvc[e][r][k]!r} vs {(same_runs[e] or {}).get(r, {}).get(k)!r}" for e in by_dvc
              for r in by_dvc[e] for k in by_dvc[e][r] if by_dvc[e][r][k] != (same_runs[e] or {}).get(r, {}).get(k)]
    assert by_dvc == same_runs, differ[:10]


def test_snakemake_remakes_an_experiment_in_a_dvc_built_study_as_dvc_made_it(dvc, tmp_path):
    """A copy of the DVC-built study with one experiment's outputs deleted: Snakemake re-makes them (its own job's
    log says it ran) with DVC's files and metrics to the last digit, and records them for DVC (`dvc status` clean)."""
    smk = copy_of(dvc, tmp_path / "snakemake")
    for folder in ("runs", "eval"):
        shutil.rmtree(smk / "results" / folder / "pos_t5")  # a one-run experiment: one job to re-make
    sh(smk, "snakemake", "--cores", "2", "all", timeout=1500)
    assert (smk / "results" / "logs" / "run" / "pos_t5" / "seed0.log").exists()  # Snakemake's job made it

    def files(root: Path) -> set[str]:
        made = [p for folder in ("runs", "eval") for p in (root / "results" / folder / "pos_t5").rglob("*")]
        return {str(p.relative_to(root)) for p in made
                if p.is_file() and "dvclive" not in p.parts and not p.name.startswith(".snakemake")}

    assert files(smk) and files(smk) == files(dvc)
    remade, made = (json.loads((root / "results" / "metrics.json").read_text())["pos_t5"] for root in (smk, dvc))
    assert remade == made
    assert dvc_changed_stages(smk) == set()


def test_snakemake_does_not_retrain_after_dvc_repro(dvc):
    out = sh(dvc, "snakemake", "-n", "--nolock")
    assert "Nothing to be done" in out.stdout + out.stderr


def test_dvc_change_one_experiment_and_diff_metrics(dvc):
    sh(dvc, "git", "add", "-A")
    sh(dvc, "git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "smoke results")
    set_lr(dvc, "pos_t5", 0.005)
    # the experiment's run, what reads the run list, and check_params (it tracks every key; its stamp does not change,
    # so nothing re-runs for it)
    assert dvc_changed_stages(dvc) == {"check_params", "run@pos_t5", "aggregate", "report"}
    out = sh(dvc, "dvc", "repro", "-q").stdout
    assert "run@pos_learned" not in out
    diff = json.loads(sh(dvc, "dvc", "metrics", "diff", "--json", "--targets", "results/metrics.json").stdout)
    changed = {k.split(".")[0] for k in next(iter(diff.values()))}
    assert changed == {"pos_t5"}, changed


def test_a_pushed_study_is_read_on_a_fresh_clone_without_training(dvc, tmp_path):
    """dvc push to the default (local-folder) remote; a fresh clone pulls, finds nothing stale, renders the report."""
    remote = tmp_path / "remote"
    sh(dvc, "dvc", "remote", "modify", "local", "url", str(remote))
    sh(dvc, "git", "add", "-A")
    sh(dvc, "git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "study with its remote")
    sh(dvc, "dvc", "push", "-q")
    clone = tmp_path / "clone"
    sh(tmp_path, "git", "clone", "-q", str(dvc), str(clone))
    sh(clone, "dvc", "pull", "-q")
    # every trained and evaluated run arrives; only files kept out of the cache (timings, the HTML) are missing
    assert dvc_changed_stages(clone) <= {"aggregate", "report"}
    assert (clone / "results" / "runs" / "baseline" / "seed0" / "ckpt.pt").exists()
    for stage in ("aggregate", "report"):  # what `make report` runs: aggregate + render, no training
        sh(clone, sys.executable, "-m", "miniformer", stage)
    assert "Claims" in (clone / "report" / "report.html").read_text()
    # nothing that trains or evaluates is stale; the HTML (kept out of the cache) is re-rendered, not restored
    assert dvc_changed_stages(clone) <= {"report"}
    # and Snakemake agrees once the pulled files carry their DAG order (DVC restores them in any order)
    sh(clone, sys.executable, "-m", "miniformer", "settle-times")
    planned = sh(clone, "snakemake", "-n", "--cores", "1", "all").stdout
    for rule in ("prepare", "run"):
        assert not re.search(rf"^rule {rule}:", planned, flags=re.M), planned[-2000:]


def test_dvc_plots_draw_every_run(dvc):
    """`dvc plots show` draws one figure per group and loss with a line per run: every run of the study appears."""
    from miniformer.params import Study

    shown = json.loads(sh(dvc, "dvc", "plots", "show", "--json").stdout)["data"]
    runs = {f"{e}/seed{s}" for e, s in Study.load(dvc / "params.yaml").runs()}
    for column in ("val_loss", "train_loss"):
        drawn = {row["run"] for path, plots in shown.items() if f"/{column}/" in path
                 for plot in plots for row in plot["content"]["data"]["values"]}
        assert drawn == runs, sorted(runs ^ drawn)[:5]


def test_no_stage_reads_a_file_it_does_not_declare(dvc, tmp_path):
    """Each DVC stage's command, run with an audit hook on open(): every project file it reads (code and params
    aside) lies under one of the stage's declared deps or outs (a resumed checkpoint is the stage's own output)."""
    import yaml

    stages = yaml.safe_load((dvc / "dvc.yaml").read_text())["stages"]
    run = {k: [d.replace("${key}", "pos_alibi") if isinstance(d, str) else {
        kk.replace("${key}", "pos_alibi"): vv for kk, vv in d.items()} for d in v] if isinstance(v, list) else v
        for k, v in stages["run"]["do"].items()}
    run["cmd"] = run["cmd"].replace("${key}", "pos_alibi")
    hook = tmp_path / "reads.py"
    hook.write_text(READS_HOOK)
    for name, stage in {"prepare": stages["prepare"], "run@pos_alibi": run, "aggregate": stages["aggregate"],
                        "init_probe": stages["init_probe"], "report": stages["report"]}.items():
        declared = [next(iter(d)) if isinstance(d, dict) else d for d in stage["deps"] + stage.get("outs", [])
                    + stage.get("metrics", [])]
        args = stage["cmd"].split("-m miniformer", 1)[1].split()
        log = tmp_path / f"{name}.log"
        done = subprocess.run([sys.executable, str(hook), *args], cwd=dvc, capture_output=True, text=True,
                              env={**os.environ, "READS_LOG": str(log), "PYTHONPATH": str(dvc / "src")}, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        reads = {Path(p) for p in log.read_text().splitlines()}
        project = [p.relative_to(dvc) for p in reads if p.is_relative_to(dvc) and p.is_file()]
        undeclared = sorted(str(p) for p in project
                            if p.parts[0] not in ("src", ".dvc", ".git") and str(p) != "params.yaml"
                            and p.name not in (".gitignore", ".dvcignore")  # read by DVCLive: repo bookkeeping
                            and not any(str(p) == d or str(p).startswith(d.rstrip("/") + "/") for d in declared))
        assert not undeclared, f"{name} reads undeclared files: {undeclared[:10]}"


# --- nothing deleted before a check (issue 53's battery, with sha256 of every result before and after) ---------------

def test_a_typo_key_is_refused_by_dvc_repro_and_nothing_is_touched(dvc, tmp_path):
    """`dvc repro` ran nothing and exited 0 for `lerning_rate_typo: 3` (no stage's params held the key): the intended
    change silently did nothing. Now DVC's first stage checks every key, and refuses it by name."""
    study = tmp_path / "typo"
    shutil.copytree(dvc, study, symlinks=True)
    before = result_digests(study)
    params = study / "params.yaml"
    params.write_text("lerning_rate_typo: 3\n" + params.read_text())
    done = sh(study, "dvc", "repro", check=False)
    assert done.returncode != 0 and "lerning_rate_typo" in done.stdout + done.stderr
    assert result_digests(study) == before


def test_a_nan_rate_is_refused_by_dvc_repro_before_any_result_is_deleted(dvc, tmp_path):
    """`train.lr: .nan` then `dvc repro` deleted every results/eval/<exp>/*.json, and only then said the rate was not
    finite. Now the params are checked before any stage removes its outputs."""
    study = tmp_path / "nan"
    shutil.copytree(dvc, study, symlinks=True)
    before = result_digests(study)
    import yaml

    params = yaml.safe_load((study / "params.yaml").read_text())
    params["train"]["lr"] = float("nan")  # `train.lr: .nan`, the battery's case: every run's rate
    (study / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    done = sh(study, "dvc", "repro", check=False)
    assert done.returncode != 0 and "not a finite number" in done.stdout + done.stderr
    assert result_digests(study) == before
