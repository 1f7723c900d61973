# One job per experiment × seed (and per sweep point): train, then evaluate, in one process — a second process per
# run would pay Python, torch and the optimizer's imports again (benchmarks/RESULTS.md). An evaluation-only change
# re-runs the job but not the training: the finished checkpoint of the same config and code resumes at its last step.
rule run:
    input:
        rules.prepare.output,
        f"{SIGNATURES}/{{exp}}/seed{{seed}}.json",  # the run's config and the training code
        f"{SIGNATURES}/evaluation-code.json",
    # ckpt.pt is written but deliberately not declared: Snakemake deletes declared outputs before a re-run, and the
    # checkpoint of a killed job must survive so that the re-run resumes from it (or, finished, is not retrained).
    output:
        metrics="results/runs/{exp}/seed{seed}/metrics.json",
        log_tsv=report("results/runs/{exp}/seed{seed}/log.tsv", caption="../report/log_tsv.rst", category="Step logs",
                       subcategory="{exp}"),
        samples="results/runs/{exp}/seed{seed}/samples.jsonl",
        perf="results/runs/{exp}/seed{seed}/perf.json",
        curve="results/runs/{exp}/seed{seed}/curve.json",
        eval=report("results/eval/{exp}/seed{seed}/eval.json", caption="../report/eval.rst", category="Evaluations",
                    subcategory="{exp}"),
        windows="results/eval/{exp}/seed{seed}/windows.json",
        # the files the probes declare they write (evaluation/: each Probe's files), from that one declaration
        **{Path(name).stem: f"results/eval/{{exp}}/seed{{seed}}/{name}" for name in PROBE_FILES},
    threads: lambda wc: STUDY.config(wc.exp, int(wc.seed)).train.threads
    resources:
        mem_mb=2000,
        runtime=150,
        gpu=1 if PROFILE == "gpu" else 0,
    params:
        stage=lambda wc: f"run@{STUDY.parent(wc.exp)}",  # DVC runs a sweep's points inside its experiment's stage
    log:
        "results/logs/run/{exp}/seed{seed}.log",
    shell:
        "{MF} run {wildcards.exp:q} --seed {wildcards.seed} {PROF} > {log:q} 2>&1 && echo {params.stage:q} >> {RAN}"
