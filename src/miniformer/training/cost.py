"""What a training cost (seconds in the step loop, peak memory), carried in its checkpoint across resumes.

perf.json is written from this record, not from the process that writes it: a resume that finds the training finished
(say, after `prepare` re-ran with the same content) trains nothing and must not report 0 seconds for the run.
"""

from __future__ import annotations

import torch

from miniformer.training.logs import peak_memory_mb


class TrainingCost:
    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.seconds, self.earlier_peak_mb, self.resumed_at = 0.0, None, 0
        self.saved: tuple[int, float | None] | None = None  # (step, peak) as the last checkpoint recorded them

    def restore(self, s: dict) -> None:
        self.seconds = float(s.get("train_seconds", 0.0))
        self.earlier_peak_mb, self.resumed_at = s.get("peak_mem_mb"), s["step"]

    def peak_mb(self, step: int) -> float | None:
        """The peak over the processes that trained these weights (this one only if it trained a step); at the step
        a checkpoint was saved, the peak it recorded (what a later resume reads back: perf.json then agrees with it,
        whatever this process allocated after the save)."""
        if self.saved is not None and self.saved[0] == step:
            return self.saved[1]
        now = peak_memory_mb(self.device) if step > self.resumed_at or self.earlier_peak_mb is None else None
        return max((m for m in (now, self.earlier_peak_mb) if m is not None), default=None)

    def state(self, step: int) -> dict:
        self.saved = None
        self.saved = (step, self.peak_mb(step))
        return {"train_seconds": self.seconds, "peak_mem_mb": self.saved[1]}
