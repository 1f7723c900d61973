# The peer library on every variant marked `peer: true` (its own target: `snakemake crosscheck`).
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
