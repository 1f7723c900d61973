# miniformer study DAG: prepare -> run (train, then evaluate; one job per experiment x seed) -> aggregate -> report.
# Experiments, seeds and study profiles come from params.yaml through the same validated loader the CLI and DVC use.
#   snakemake --cores 4 all                      # the study profile named in params.yaml (default)
#   snakemake --cores 4 all --config profile=smoke
# Rules live in workflow/rules/, one file per stage, over common.smk (the study, signatures, the command prefix).

configfile: "params.yaml"


include: "workflow/rules/common.smk"


rule all:
    default_target: True
    input:
        "report/report.html",
        "results/metrics.json",
        "results/params-checked.txt",  # DVC's check_params stage, kept in step (workflow/rules/prepare.smk)
        # Every per-run output is a target too: Snakemake leaves a missing intermediate file alone while the files made
        # from it are newer, so a deleted eval.json or run folder (or one a kill left half-written) would otherwise
        # stay a hole under "Nothing to be done". As targets they are re-made, and what reads them re-runs.
        expand("results/runs/{run[0]}/seed{run[1]}/{name}", run=RUNS,
               name=("metrics.json", "log.tsv", "samples.jsonl", "perf.json", "curve.json")),
        expand("results/eval/{run[0]}/seed{run[1]}/{name}", run=RUNS,
               name=("eval.json", "windows.json", *PROBE_FILES)),


include: "workflow/rules/prepare.smk"
include: "workflow/rules/run.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/init_probe.smk"
include: "workflow/rules/crosscheck.smk"
include: "workflow/rules/report.smk"
