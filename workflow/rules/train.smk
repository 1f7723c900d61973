# One training job per experiment × seed (and per sweep point).
rule train:
    input:
        rules.prepare.output,
        f"{SIGNATURES}/{{exp}}/seed{{seed}}.json",
    # ckpt.pt is written but deliberately not declared: Snakemake deletes declared outputs before a re-run, and the
    # checkpoint of a killed job must survive so that the re-run resumes from it.
    output:
        metrics="results/runs/{exp}/seed{seed}/metrics.json",
        log_tsv=report("results/runs/{exp}/seed{seed}/log.tsv", caption="../report/log_tsv.rst", category="Step logs",
                       subcategory="{exp}"),
        samples="results/runs/{exp}/seed{seed}/samples.jsonl",
        perf="results/runs/{exp}/seed{seed}/perf.json",
        curve="results/runs/{exp}/seed{seed}/curve.json",
    threads: lambda wc: STUDY.config(wc.exp, int(wc.seed)).train.threads
    resources:
        mem_mb=2000,
        runtime=120,
        gpu=1 if PROFILE == "gpu" else 0,
    params:
        stage=lambda wc: f"run@{STUDY.parent(wc.exp)}",  # DVC runs a sweep's points inside its experiment's stage
    log:
        "results/logs/train/{exp}/seed{seed}.log",
    shell:
        "{MF} train {wildcards.exp:q} --seed {wildcards.seed} {PROF} > {log:q} 2>&1 && echo {params.stage:q} >> {RAN}"
