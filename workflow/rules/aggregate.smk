# All runs' metrics and samples into results/ (the files DVC tracks as metrics and plots).
rule aggregate:
    input:
        expand("results/runs/{run[0]}/seed{run[1]}/metrics.json", run=RUNS),
        expand("results/eval/{run[0]}/seed{run[1]}/eval.json", run=RUNS),
        expand("results/eval/{run[0]}/seed{run[1]}/windows.json", run=RUNS),
        expand("results/runs/{run[0]}/seed{run[1]}/curve.json", run=RUNS),
        expand("results/runs/{run[0]}/seed{run[1]}/log.tsv", run=RUNS),
        expand("results/runs/{run[0]}/seed{run[1]}/samples.jsonl", run=RUNS),
        expand("results/runs/{run[0]}/seed{run[1]}/perf.json", run=RUNS),
        f"{SIGNATURES}/study.json",
        "data/prepared/meta.json",  # every run's numbers are checked against the prepared data's content hash
    # update(): Snakemake would remove a job's outputs before running it (and again when it fails), so one refused
    # eval.json cost every finished aggregate. Flagged, they stay in place and a failed aggregate leaves them as they
    # were; aggregate checks every run before it writes anything, and replaces each file whole.
    output:
        metrics=update("results/metrics.json"),
        headline=update("results/headline.json"),
        windows=update("results/windows.json"),
        table=update(report("results/tables/runs.csv", caption="../report/runs_table.rst", category="Tables")),
        plots=update(directory("results/plots")),
        perf=update("results/perf.json"),
        provenance=update("results/provenance.json"),
    resources:
        **CPU_JOB,
    log:
        "results/logs/aggregate.log",
    shell:
        "{MF} aggregate {PROF} > {log} 2>&1 && echo aggregate >> {RAN}"
