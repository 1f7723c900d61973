# Every probe on one finished training.
rule evaluate:
    input:
        rules.train.output.metrics,
        f"{SIGNATURES}/{{exp}}/seed{{seed}}.json",
        f"{SIGNATURES}/evaluation-code.json",
    output:
        eval=report("results/eval/{exp}/seed{seed}/eval.json", caption="../report/eval.rst", category="Evaluations",
                    subcategory="{exp}"),
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
