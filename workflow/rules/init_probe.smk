# Token uniformity against depth at initialisation (Dong 2021): the reference architecture, no training, no data.
rule init_probe:
    input:
        f"{SIGNATURES}/init-probe.json",  # the reference's model config and the probe's own code
    output:
        "results/init_uniformity.json",
    resources:
        **CPU_JOB,
    log:
        "results/logs/init_probe.log",
    shell:
        "{MF} init-probe {PROF} > {log} 2>&1 && echo init_probe >> {RAN}"
