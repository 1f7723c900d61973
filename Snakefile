# miniformer study DAG: prepare -> train (experiment x seed) -> evaluate -> aggregate -> report.
# Experiments, seeds and profiles come from params.yaml through the same validated loader the CLI and DVC use.
#   snakemake --cores 4 all                      # the profile named in params.yaml (default)
#   snakemake --cores 4 all --config profile=smoke
import json
import shlex
import sys

from miniformer.params import Study

configfile: "params.yaml"

PROFILE = config.get("profile", "default")
STUDY = Study.load("params.yaml", PROFILE)
RUNS = STUDY.runs()
MF = f"{shlex.quote(sys.executable)} -m miniformer"  # the interpreter running Snakemake has the package
PROF = f"--profile {PROFILE}"
RAN = "results/logs/ran-stages.txt"  # DVC stages whose Snakemake jobs ran (see onsuccess)


def run_signature(exp, seed):
    """Everything that shapes a run; Snakemake re-runs a job when its params change, so only edited experiments rerun."""
    return json.dumps(STUDY.config(exp, int(seed)).to_dict(), sort_keys=True)


include: "workflow/rules/study.smk"
