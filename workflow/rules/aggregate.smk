# Every run's files checked first, in a job of their own: Snakemake removes a job's outputs before it runs it, so a
# refused eval.json inside `aggregate` would cost the aggregates already there. A refusal here stops before them.
# Its stamp is temp(): made only when aggregate has to run, so a study DVC built plans nothing more here.
rule check_runs:
    input:
        expand("results/runs/{run[0]}/seed{run[1]}/metrics.json", run=RUNS),
        expand("results/eval/{run[0]}/seed{run[1]}/eval.json", run=RUNS),
        expand("results/eval/{run[0]}/seed{run[1]}/windows.json", run=RUNS),
        expand("results/runs/{run[0]}/seed{run[1]}/curve.json", run=RUNS),
        expand("results/runs/{run[0]}/seed{run[1]}/log.tsv", run=RUNS),
        expand("results/runs/{run[0]}/seed{run[1]}/samples.jsonl", run=RUNS),
        expand("results/runs/{run[0]}/seed{run[1]}/perf.json", run=RUNS),
        f"{SIGNATURES}/study.json",
        "data/prepared/meta.json",
    output:
        temp("results/logs/runs-checked.txt"),
    resources:
        **CPU_JOB,
    log:
        "results/logs/check_runs.log",
    shell:
        "{MF} aggregate --check {PROF} > {log} 2>&1 && cp {log} {output}"


# All runs' metrics and samples into results/ (the files DVC tracks as metrics and plots).
rule aggregate:
    input:
        "results/logs/runs-checked.txt",
        expand("results/runs/{run[0]}/seed{run[1]}/metrics.json", run=RUNS),
        expand("results/eval/{run[0]}/seed{run[1]}/eval.json", run=RUNS),
        expand("results/eval/{run[0]}/seed{run[1]}/windows.json", run=RUNS),
        expand("results/runs/{run[0]}/seed{run[1]}/curve.json", run=RUNS),
        expand("results/runs/{run[0]}/seed{run[1]}/log.tsv", run=RUNS),
        expand("results/runs/{run[0]}/seed{run[1]}/perf.json", run=RUNS),
        f"{SIGNATURES}/study.json",
        "data/prepared/meta.json",  # every run's numbers are checked against the prepared data's content hash
    output:
        metrics="results/metrics.json",
        headline="results/headline.json",
        windows="results/windows.json",
        table=report("results/tables/runs.csv", caption="../report/runs_table.rst", category="Tables"),
        plots=directory("results/plots"),
        perf="results/perf.json",
        provenance="results/provenance.json",
    resources:
        **CPU_JOB,
    log:
        "results/logs/aggregate.log",
    shell:
        "{MF} aggregate {PROF} > {log} 2>&1 && echo aggregate >> {RAN}"
