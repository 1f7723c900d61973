"""Evaluation as a set of probes, one module each. A probe is a function of a Subject (a trained model, its data and
its run config) returning a Measured: the values it adds to eval.json, its per-item samples for windows.json (the
report's intervals), and any file of its own. Each module declares its probes (a module-level PROBES of
subject.Probe: the function, its scalars for metrics.json, its place in eval.json, its files, its report readings);
the `evaluate` stage runs every declared probe in order (evaluation/probes.py). Adding a probe is adding a module."""
