# Every key of params.yaml validated: DVC's first stage, which its other stages wait for. Snakemake has validated them
# all when it loaded the study, before any job, so here the rule only keeps DVC's record in step: a target of `all`
# that nothing waits for (an input of prepare, even `ancient`, made Snakemake drop the run jobs a param edit needs).
rule check_params:
    input:
        f"{SIGNATURES}/params.json",
    output:
        "results/params-checked.txt",
    resources:
        **CPU_JOB,
    log:
        "results/logs/check_params.log",
    shell:
        "{MF} check-params {PROF} > {log} 2>&1 && echo check_params >> {RAN}"


# Corpus -> cleaned splits -> tokenizer -> token files (data/prepared).
rule prepare:
    input:
        f"{SIGNATURES}/data.json",
    output:
        multiext("data/prepared/", "train.bin", "val.bin", "test.bin", "meta.json"),
    resources:
        **CPU_JOB,
    log:
        "results/logs/prepare.log",
    shell:
        "{MF} prepare --versioned {PROF} > {log} 2>&1 && echo prepare >> {RAN}"
