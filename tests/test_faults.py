"""Faults users cause: a kill -9 mid-training under the DAG, interrupted writes, concurrent jobs' paths (slow part)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
import torch

from miniformer.runtime.files import atomic_write_text
from tests.studies import BIN, project_copy, sh


def test_interrupted_write_leaves_the_old_file_and_no_temp(tmp_path):
    target = tmp_path / "metrics.json"
    atomic_write_text(target, "old")

    class Boom(Exception):
        pass

    from miniformer.runtime import files as mio

    def exploding(f):
        f.write(b"half a fi")
        raise Boom

    with pytest.raises(Boom):
        mio._atomic(target, exploding)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]


def test_no_two_jobs_write_the_same_path():
    from miniformer.params import Study

    study = Study.load(Path(__file__).resolve().parents[1] / "params.yaml", "default")
    runs = study.runs()
    assert len(set(runs)) == len(runs)
    dirs = {f"results/runs/{e}/seed{s}" for e, s in runs} | {f"results/eval/{e}/seed{s}" for e, s in runs}
    assert len(dirs) == 2 * len(runs)


@pytest.mark.slow
def test_kill_minus_9_mid_training_then_the_dag_resumes_to_the_same_result(tmp_path):
    study = project_copy(tmp_path / "study")
    params = study / "params.yaml"
    text = params.read_text()
    # a longer smoke baseline, killed well before its end
    text = re.sub(r"(  smoke:.*?train: \{)steps: 20,", r"\1steps: 120,", text, count=1, flags=re.S)
    params.write_text(text)
    inject_kill(study)  # at step 30 the training job kills its whole process group, Snakemake included
    target = "results/runs/baseline/seed0/metrics.json"
    env = {**os.environ, "PYTHONPATH": str(study / "src"), "PATH": f"{BIN}:{os.environ['PATH']}",
           "MINIFORMER_TEST_KILL_AT": "30"}
    dag = subprocess.run([str(BIN / "snakemake"), "--cores", "1", target], cwd=study, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, timeout=300)
    assert dag.returncode == -signal.SIGKILL
    killed_at = torch.load(study / "results/runs/baseline/seed0/ckpt.pt", weights_only=True)["step"]
    assert killed_at == 30
    assert not (study / target).exists()

    sh(study, "snakemake", "--unlock", target)  # a killed Snakemake leaves its lock; it tells the user to unlock
    sh(study, "snakemake", "--cores", "1", target)  # the re-run resumes from the checkpoint
    log = (study / "results/logs/run/baseline/seed0.log").read_text()
    logged = [int(n) for n in re.findall(r"step (\d+)/120", log)]
    assert logged and min(logged) > killed_at, (killed_at, logged)  # it went on from the checkpoint
    resumed = json.loads((study / target).read_text())

    sh(study, "python", "-m", "miniformer", "train", "baseline", "--seed", "0", "--results", "straight",
       "--no-resume")
    straight = json.loads((study / "straight/runs/baseline/seed0/metrics.json").read_text())
    assert resumed == straight
    assert resumed["steps_done"] == 120


def test_settle_times_orders_the_dag_levels(tmp_path):
    from miniformer.stages.dagtimes import settle

    files = ["data/prepared/meta.json", "results/runs/b/seed0/metrics.json", "results/eval/b/seed0/eval.json",
             "results/metrics.json", "report/report.html"]
    for i, f in enumerate(reversed(files)):  # written in the worst order: the report first
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("x")
        os.utime(tmp_path / f, (1000 + i, 1000 + i))
    assert settle(tmp_path, now=5000) == len(files)
    times = [(tmp_path / f).stat().st_mtime for f in files]
    assert times == sorted(times) and len(set(times)) == len(files)


def inject_kill(study: Path) -> None:
    """Fault injection in a copy only: right after the checkpoint of step $MINIFORMER_TEST_KILL_AT the training
    process kills its whole process group, with no chance to clean up (a kill -9)."""
    trainer = study / "src" / "miniformer" / "training" / "trainer.py"
    code = trainer.read_text()
    hook = "                self.folder.save(self.state())\n                last_good = self.step\n"
    assert hook in code and "import json\n" in code
    trainer.write_text(code.replace("import json\n", "import json\nimport os\n", 1).replace(hook, hook + (
        "                if os.environ.get('MINIFORMER_TEST_KILL_AT') == str(self.step):\n"
        "                    os.killpg(os.getpgid(0), 9)\n")))


@pytest.mark.slow
def test_a_changed_config_killed_mid_training_is_refused_by_evaluate_and_aggregate(tmp_path):
    """The smoke study's baseline trained and evaluated; its lr changed; the retrain killed at step 10 of 20. The old
    metrics must not reach the aggregate: evaluate and aggregate refuse, each in one line."""
    study = project_copy(tmp_path / "study")
    inject_kill(study)
    sh(study, "snakemake", "--cores", "1", "results/eval/baseline/seed0/eval.json")
    params = study / "params.yaml"
    params.write_text(params.read_text().replace("  baseline:\n", "  baseline:\n    train: {lr: 0.001}\n", 1))
    env = {**os.environ, "PYTHONPATH": str(study / "src"), "PATH": f"{BIN}:{os.environ['PATH']}",
           "MINIFORMER_TEST_KILL_AT": "10"}
    killed = subprocess.run([str(BIN / "python"), "-m", "miniformer", "train", "baseline", "--seed", "0"], cwd=study,
                            env=env, capture_output=True, start_new_session=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL
    run = study / "results/runs/baseline/seed0"
    assert torch.load(run / "ckpt.pt", weights_only=True)["step"] == 10
    assert not (run / "metrics.json").exists()  # the old training's metrics went with its checkpoint
    evaluate = sh(study, "python", "-m", "miniformer", "evaluate", "baseline", "--seed", "0", check=False)
    assert evaluate.returncode == 2 and "stopped at step 10 of 20" in evaluate.stderr
    aggregate = sh(study, "python", "-m", "miniformer", "aggregate", check=False)
    assert aggregate.returncode == 2 and len(aggregate.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_hostile_sweep_value_is_refused_before_anything_is_written(tmp_path):
    study = project_copy(tmp_path / "study")
    params = study / "params.yaml"
    params.write_text(params.read_text().replace(
        "  pos_alibi:\n", "  pos_alibi:\n    sweep: {eval.probe_line: ['../../../../escaped']}\n", 1))
    before = {p for p in tmp_path.rglob("*")}
    planned = sh(study, "snakemake", "-n", "--cores", "1", "all", check=False)
    said = (planned.stdout + planned.stderr).strip().splitlines()
    assert planned.returncode != 0 and "cannot name a run folder" in said[-1] and "Traceback" not in planned.stderr
    created = {p for p in tmp_path.rglob("*")} - before
    # nothing but Snakemake's bookkeeping and Python's bytecode caches of the copy's package
    assert not [p for p in created if ".snakemake" not in p.parts
                and not (p.is_relative_to(study / "src") and "__pycache__" in p.parts)]
