"""Training, split by concern: the loop (trainer), its run folder (checkpoints), lock, logs, demos and divergence.

Used by the `train` stage and, for its update step, by the cross-check's peer loop."""
