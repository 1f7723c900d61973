# miniformer study DAG: prepare -> train (experiment x seed) -> evaluate -> aggregate -> report.
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


include: "workflow/rules/prepare.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/init_probe.smk"
include: "workflow/rules/crosscheck.smk"
include: "workflow/rules/report.smk"
