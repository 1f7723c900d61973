# The rendered report, and DVC's record of what ran.
rule report:
    input:
        rules.aggregate.output.metrics,
        rules.aggregate.output.windows,
        rules.aggregate.output.perf,  # the throughput figure and table
        rules.aggregate.output.provenance,
        rules.init_probe.output,  # uniformity against depth at init
        f"{SIGNATURES}/study.json",
        f"{SIGNATURES}/findings.json",
        # the peer's table joins the report once `snakemake crosscheck` has made it (it is its own, optional target)
        sorted(str(p) for p in Path("results/crosscheck").glob("*.json")),
        # another budget's claims (a `make long` run's claims.json copied here) join the report beside this run's
        sorted(str(p) for p in Path("results/budgets").glob("*.json")),
        # the replication settings' claims (`make replication` copies them here) join the claims × settings table
        sorted(str(p) for p in Path("results/settings").glob("*.json")),
    output:
        report("report/report.html", caption="../report/report.rst", category="Report"),
        "results/verdicts.json",
        # the claims as data (study/claim_table.py): `miniformer compare`, a paper's table
        "results/claims.json",
        "results/claims.csv",
        "results/claims.tex",
    resources:
        **CPU_JOB,
    log:
        "results/logs/report.log",
    shell:
        "{MF} report {PROF} > {log} 2>&1 && echo report >> {RAN}"


# DVC keeps its own record (dvc.lock). Record exactly the DVC stages whose jobs ran in this Snakemake invocation, never
# a blanket `dvc commit` (that would mark stale, never-run stages as current).
onsuccess:
    shell("{MF} dvc-record --ran {RAN} {PROF}")
