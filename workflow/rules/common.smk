# Shared by every rule file: the validated study, the command prefix, and the signature files that turn "this
# experiment's params (or this code) changed" into an input newer than its outputs, one experiment at a time.
import json
import os
import shlex
import sys
from pathlib import Path

from miniformer.runtime.codehash import EVALUATION_CODE, INIT_PROBE_CODE, TRAINING_CODE, code_hash
from miniformer.corpus import check_versioned, raw_data_hash
from miniformer.stages.crosscheck import peer_experiments
from miniformer.study.claims import check_experiments
from miniformer.errors import UserError
from miniformer.params import Study

PROFILE = config.get("profile")  # None: the `profile:` params.yaml names (what DVC reads too)
SLURM_SETTINGS = ("MINIFORMER_SLURM_PARTITION", "MINIFORMER_SLURM_ACCOUNT")  # profiles/slurm/config.yaml reads them


def slurm_settings_problem(environ):
    """Why the Slurm profile cannot submit yet (None: it can): the cluster's partition and account are the user's."""
    # unset, empty, or still the README's placeholder (`<partition>` pasted as it stands)
    unset = [name for name in SLURM_SETTINGS
             if not environ.get(name, "").strip() or "<" in environ[name] or ">" in environ[name]]
    gpus = environ.get("MINIFORMER_SLURM_GPUS", "1").strip()
    if not gpus.isdigit():  # "abc" or "-5" would reach sbatch as a GPU request it cannot read
        return (f"MINIFORMER_SLURM_GPUS={gpus!r} is not a whole number of GPUs: `export MINIFORMER_SLURM_GPUS=1` "
                "(0 on a CPU-only partition)")
    if not unset:
        return None
    return (f"the Slurm profile needs {' and '.join(unset)}: `export MINIFORMER_SLURM_PARTITION=<partition>` "
            "(sinfo -s lists them) and `export MINIFORMER_SLURM_ACCOUNT=<account>` "
            "(sacctmgr show assoc user=$USER format=account), "
            "see profiles/slurm/config.yaml")


try:
    if config.get("cluster") == "slurm":
        os.environ.setdefault("MINIFORMER_SLURM_GPUS", "1")  # the profile's GPUs per run job (train + evaluate)
        if problem := slurm_settings_problem(os.environ):
            raise UserError(problem)
    from miniformer.evaluation.probes import PROBE_FILES  # two probes claiming one file or order: one line too

    STUDY = Study.load("params.yaml", PROFILE)
    PROFILE = STUDY.profile
    check_experiments(STUDY.experiments)  # a claim's experiment renamed away fails here, before anything trains
    check_versioned(STUDY.section("data")["corpus"])
except UserError as error:  # bad params are one line, as from the CLI, not a stack of Snakefile frames
    print(f"miniformer: error: {error}", file=sys.stderr)
    raise SystemExit(2) from None
RUNS = STUDY.runs()
# On Slurm, the jobs that do not train (prepare, the checks, aggregate, init-probe, report) go to a CPU partition when
# one is named, not to the GPU partition the run jobs ask for; elsewhere the resource is only a label.
CPU_PARTITION = os.environ.get("MINIFORMER_SLURM_CPU_PARTITION", "").strip()
CPU_JOB = {"slurm_partition": CPU_PARTITION} if config.get("cluster") == "slurm" and CPU_PARTITION else {}
MF = f"{shlex.quote(sys.executable)} -m miniformer"  # the interpreter running Snakemake has the package
PROF = f"--profile {PROFILE}"
RAN = "results/logs/ran-stages.txt"  # DVC stages whose Snakemake jobs ran (see onsuccess)


def write_signature(path, content, made=lambda: False):
    """Write a config signature file only when its content changes, so its mtime marks the last real change.

    Snakemake re-runs a job whose input is newer than its outputs; these files turn "this experiment's params changed"
    into exactly that, for one experiment at a time. (Snakemake's own params trigger ignores callable params.)
    A signature gets the oldest possible mtime, "no known change", when it is seen for the first time (outputs that
    already exist, say from `dvc repro`, are not retrained just because Snakemake has not seen this study before) and
    when ``made()`` says the outputs were already made under the new content: DVC ran that stage with these params
    (`dvc exp run -S …`, `dvc repro`), so Snakemake has nothing to redo.
    """
    path = Path(path)
    first_time = not path.exists()
    if not first_time and path.read_text() == content:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(content)
    if first_time or made():
        os.utime(tmp, (0, 0))
    os.replace(tmp, path)


_DVC_CHANGED = []  # the stages `dvc status` reports changed, asked once per parse and only when a signature changed


def dvc_made(*stages):
    """A callable: whether DVC's record (dvc.lock) holds every one of these stages with the current params, deps and
    outputs (`dvc status` does not list it). False outside a DVC project, or when DVC cannot tell."""

    def made():
        # DVC reads the profile params.yaml names; a run under another `--config profile=` is not what it recorded
        if PROFILE != STUDY.raw.get("profile", "default"):
            return False
        if not Path(".dvc").is_dir() or not Path("dvc.lock").exists():
            return False
        if not _DVC_CHANGED:
            import shutil
            import subprocess

            dvc = shutil.which("dvc") or str(Path(sys.executable).with_name("dvc"))
            done = subprocess.run([dvc, "status", "--json"], capture_output=True, text=True)
            try:
                _DVC_CHANGED.append(set(json.loads(done.stdout or "{}")) if done.returncode == 0 else None)
            except ValueError:
                _DVC_CHANGED.append(None)
        changed = _DVC_CHANGED[0]
        return changed is not None and not any(stage in changed for stage in stages)

    return made


SIGNATURES = "results/signatures"


def prepared_from_other_params():
    """data/prepared was prepared (by a command outside the DAG) from other data params than this profile's."""
    from dataclasses import asdict

    try:
        made = json.loads(Path("data/prepared/meta.json").read_text(encoding="utf-8")).get("params")
    except (OSError, ValueError):
        return False
    return made is not None and made != asdict(STUDY.data_config())


def write_signatures():
    """Every signature the rules read, written at parse time (before Snakemake compares any mtime)."""
    # The whole params file (DVC's check_params stage tracks every key of it)
    write_signature(f"{SIGNATURES}/params.json", json.dumps(STUDY.raw, sort_keys=True, default=str, indent=1),
                    dvc_made("check_params"))
    # The data signature: the data params and the files under data/raw (the corpus, when it is a file; DVC's
    # `data/raw` dep).
    write_signature(f"{SIGNATURES}/data.json", json.dumps({**STUDY.section("data"), "raw_files": raw_data_hash()},
                                                          sort_keys=True, indent=1), dvc_made("prepare"))
    if prepared_from_other_params():  # e.g. `miniformer course` prepared the Chinese corpus there: prepare again
        os.utime(f"{SIGNATURES}/data.json")
    # A run's signature is its config plus the hash of the training code (model, positions, objectives, trainer):
    # editing that code re-runs every training job, as DVC's deps do. Evaluation code has its own signature.
    training_code = code_hash(TRAINING_CODE)
    for exp, seed in RUNS:
        write_signature(f"{SIGNATURES}/{exp}/seed{seed}.json",
                        json.dumps({**STUDY.config(exp, seed).to_dict(), "training_code": training_code},
                                   sort_keys=True, indent=1), dvc_made(f"run@{STUDY.parent(exp)}"))
    # What aggregate and report read from params besides the runs' files: the run list (experiments, seeds, profiles:
    # DVC's params for both stages) and the verdict rule. Any edit there re-runs both, under either tool.
    write_signature(f"{SIGNATURES}/study.json", json.dumps(
        {k: STUDY.raw.get(k) for k in ("experiments", "seeds", "profile", "profiles")}, sort_keys=True, default=str),
        dvc_made("aggregate", "report"))
    write_signature(f"{SIGNATURES}/findings.json", json.dumps(STUDY.raw.get("findings") or {}, sort_keys=True),
                    dvc_made("report"))
    run_stages = sorted({f"run@{STUDY.parent(exp)}" for exp, _ in RUNS})
    write_signature(f"{SIGNATURES}/evaluation-code.json",
                    json.dumps({"evaluation_code": code_hash(EVALUATION_CODE)}), dvc_made(*run_stages))
    # The init probe reads the reference run's model config and its own code only (DVC's init_probe deps).
    reference = STUDY.config(STUDY.reference, STUDY.seeds[0])
    write_signature(f"{SIGNATURES}/init-probe.json", json.dumps(
        {"model": reference.model.to_dict(), "threads": reference.train.threads, "code": code_hash(INIT_PROBE_CODE)},
        sort_keys=True), dvc_made("init_probe"))


write_signatures()


wildcard_constraints:
    exp="[A-Za-z0-9_]+(/[A-Za-z0-9_.=+-]+)?",  # an experiment, or one point of its sweep ("block_post_norm/lr=0.01")
    seed="[0-9]+",
