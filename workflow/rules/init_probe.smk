# Token uniformity against depth at initialisation (Dong 2021): the reference architecture, no training, no data.
rule init_probe:
    input:
        lambda wc: f"{SIGNATURES}/{STUDY.reference}/seed{STUDY.seeds[0]}.json",  # its model config + training code
        f"{SIGNATURES}/evaluation-code.json",
    output:
        "results/init_uniformity.json",
    log:
        "results/logs/init_probe.log",
    shell:
        "{MF} init-probe {PROF} > {log} 2>&1 && echo init_probe >> {RAN}"
