"""Evaluation as a set of probes, one module each. A probe is a function of a Subject (a trained model, its data and
its run config) returning a Measured: the values it adds to eval.json, its per-item samples for windows.json (the
report's intervals), and any file of its own. The `evaluate` stage runs PROBES in order; adding a probe is adding a
module and a line in evaluation/probes.py: the probe, and its scalars (the numbers of its values that metrics.json
carries)."""
