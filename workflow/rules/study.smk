wildcard_constraints:
    exp="[A-Za-z0-9_]+(/[A-Za-z0-9_.=+-]+)?",  # an experiment, or one point of its sweep ("block_post_norm/lr=0.01")
    seed="[0-9]+",


rule prepare:
    input:
        f"{SIGNATURES}/data.json",
    output:
        multiext("data/prepared/", "train.bin", "val.bin", "test.bin", "meta.json"),
    log:
        "results/logs/prepare.log",
    shell:
        "{MF} prepare --versioned {PROF} > {log} 2>&1 && echo prepare >> {RAN}"


rule train:
    input:
        rules.prepare.output,
        f"{SIGNATURES}/{{exp}}/seed{{seed}}.json",
    # ckpt.pt is written but deliberately not declared: Snakemake deletes declared outputs before a re-run, and the
    # checkpoint of a killed job must survive so that the re-run resumes from it.
    output:
        metrics="results/runs/{exp}/seed{seed}/metrics.json",
        log_tsv=report("results/runs/{exp}/seed{seed}/log.tsv", category="Step logs", subcategory="{exp}"),
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


rule evaluate:
    input:
        rules.train.output.metrics,
        f"{SIGNATURES}/{{exp}}/seed{{seed}}.json",
        f"{SIGNATURES}/evaluation-code.json",
    output:
        eval=report("results/eval/{exp}/seed{seed}/eval.json", category="Evaluations", subcategory="{exp}"),
        attention="results/eval/{exp}/seed{seed}/attention.json",
        generations="results/eval/{exp}/seed{seed}/generations.json",
        windows="results/eval/{exp}/seed{seed}/windows.json",
    threads: lambda wc: STUDY.config(wc.exp, int(wc.seed)).train.threads
    resources:
        mem_mb=2000,
        runtime=30,
    params:
        stage=lambda wc: f"run@{STUDY.parent(wc.exp)}",
    log:
        "results/logs/evaluate/{exp}/seed{seed}.log",
    shell:
        "{MF} evaluate {wildcards.exp:q} --seed {wildcards.seed} {PROF} > {log:q} 2>&1"
        " && echo {params.stage:q} >> {RAN}"


rule aggregate:
    input:
        expand("results/runs/{run[0]}/seed{run[1]}/metrics.json", run=RUNS),
        expand("results/eval/{run[0]}/seed{run[1]}/eval.json", run=RUNS),
        expand("results/eval/{run[0]}/seed{run[1]}/windows.json", run=RUNS),
        expand("results/runs/{run[0]}/seed{run[1]}/curve.json", run=RUNS),
        expand("results/runs/{run[0]}/seed{run[1]}/log.tsv", run=RUNS),
        expand("results/runs/{run[0]}/seed{run[1]}/perf.json", run=RUNS),
        f"{SIGNATURES}/study.json",
    output:
        metrics="results/metrics.json",
        headline="results/headline.json",
        windows="results/windows.json",
        table=report("results/tables/runs.csv", category="Tables"),
        plots=directory("results/plots"),
        perf="results/perf.json",
    log:
        "results/logs/aggregate.log",
    shell:
        "{MF} aggregate {PROF} > {log} 2>&1 && echo aggregate >> {RAN}"


rule crosscheck:  # a target, like `all`: the peer implementation on every variant it has (`make crosscheck`)
    input:
        expand("results/crosscheck/{exp}.json", exp=peer_experiments(STUDY)),


rule crosscheck_variant:
    input:
        rules.prepare.output,
        lambda wc: f"{SIGNATURES}/{wc.exp}/seed{STUDY.seeds_for(wc.exp)[0]}.json",  # the seed the peer repeats
    output:
        "results/crosscheck/{exp}.json",
    threads: 1
    resources:
        mem_mb=2000,
        runtime=120,
    log:
        "results/logs/crosscheck/{exp}.log",
    shell:
        "{MF} crosscheck {wildcards.exp} {PROF} > {log} 2>&1"


rule report:
    input:
        rules.aggregate.output.metrics,
        rules.aggregate.output.windows,
        rules.aggregate.output.perf,  # the throughput figure and table
        f"{SIGNATURES}/study.json",
        f"{SIGNATURES}/findings.json",
        # the peer's table joins the report once `snakemake crosscheck` has made it (it is its own, optional target)
        sorted(str(p) for p in Path("results/crosscheck").glob("*.json")),
    output:
        report("report/report.html", category="Report"),
        "results/verdicts.json",
    log:
        "results/logs/report.log",
    shell:
        "{MF} report {PROF} > {log} 2>&1 && echo report >> {RAN}"


# DVC keeps its own record (dvc.lock). Record exactly the DVC stages whose jobs ran in this Snakemake invocation, never
# a blanket `dvc commit` (that would mark stale, never-run stages as current).
onsuccess:
    shell("{MF} dvc-record --ran {RAN} {PROF}")
