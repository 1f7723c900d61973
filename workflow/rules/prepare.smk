# Corpus -> cleaned splits -> tokenizer -> token files (data/prepared).
rule prepare:
    input:
        f"{SIGNATURES}/data.json",
    output:
        multiext("data/prepared/", "train.bin", "val.bin", "test.bin", "meta.json"),
    log:
        "results/logs/prepare.log",
    shell:
        "{MF} prepare --versioned {PROF} > {log} 2>&1 && echo prepare >> {RAN}"
