# Every key of params.yaml validated (DVC's first stage; Snakemake has validated them when it loaded the study, so
# here it only keeps DVC's record in step). Its stamp never changes, so downstream jobs read it as `ancient`.
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
        ancient("results/params-checked.txt"),
    output:
        multiext("data/prepared/", "train.bin", "val.bin", "test.bin", "meta.json"),
    resources:
        **CPU_JOB,
    log:
        "results/logs/prepare.log",
    shell:
        "{MF} prepare --versioned {PROF} > {log} 2>&1 && echo prepare >> {RAN}"
