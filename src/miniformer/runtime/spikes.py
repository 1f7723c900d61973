"""Loss spikes in a per-step train loss: the rule training counts by and the report's claims quote.

Here, in the runtime core, because two floors read it: training/outputs.py counts spikes into metrics.json, and
study/claims.py states the rule beside the stability claim.
"""

from __future__ import annotations

import math

SPIKE_WINDOW = 25  # steps: the running median a step's loss is compared with
SPIKE_RISE = 0.2  # a spike: the loss more than 20 % above that median (per-step noise here is a few per cent)
SPIKE_HISTORY = 5  # steps before the first one judged: the median window grows up to SPIKE_WINDOW from here


def count_spikes(losses: list[float], window: int = SPIKE_WINDOW, rise: float = SPIKE_RISE,
                 history: int = SPIKE_HISTORY) -> int:
    """Loss spikes in a per-step train loss: onsets of runs of steps whose loss exceeds (1 + rise) × the median of
    the up to ``window`` steps before it (Zhai et al. 2023 follow loss per step). The window grows from ``history``
    steps, so a spike in the first steps of a high-rate run is seen too. A falling curve never fires: its recent
    median is above the current loss; a consecutive stretch above the median is one spike."""
    spikes, inside = 0, False
    for t in range(history, len(losses)):
        recent = sorted(x for x in losses[max(0, t - window) : t] if x is not None and math.isfinite(x))
        loss = losses[t]
        finite = loss is not None and math.isfinite(loss)
        high = bool(recent) and finite and loss > (1 + rise) * recent[len(recent) // 2]
        spikes += high and not inside
        inside = high
    return spikes
