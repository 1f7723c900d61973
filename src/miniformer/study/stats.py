"""Effects with intervals, and the one rule that turns an interval into a verdict.

Every effect the report states is a difference between experiments (or one run's own quantity, such as loss growth
with length). Its uncertainty has two parts, added in quadrature:

- evaluation sampling: the runs are scored on the same windows (and the probe on the same items), so the difference is
  bootstrapped over windows/items, resampled jointly for every run (a paired bootstrap: most window-to-window variation
  cancels);
- training seed: the spread of the same quantity over the baseline's seeds (evaluated on the same windows, so this is
  seed variation alone), scaled by √(1/n_a + 1/n_b) and by Student's t with (seeds − 1) degrees of freedom, because a
  standard deviation from three seeds is itself uncertain.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

# "untestable": the design ran, but its instrument cannot decide the claim at this budget (say, a spike detector
# that fired in no run): not evidence either way, and said so instead of "within noise".
VERDICTS = ("reproduced", "not reproduced", "within noise", "untestable", "not run")


# --- quantiles (no scipy dependency) ---------------------------------------------------------------------------------


def z_quantile(confidence: float) -> float:
    """Two-sided normal quantile: 1.96 for 0.95."""
    return statistics.NormalDist().inv_cdf(0.5 + confidence / 2)


def t_quantile(confidence: float, df: int) -> float:
    """Two-sided Student-t quantile (4.30 for 0.95 and df = 2), by bisection on a numerically integrated CDF."""
    if df <= 0:
        return math.inf
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)

    def upper_tail_mass(x: float) -> float:  # P(0 <= T <= x)
        grid = np.linspace(0.0, x, 4001)
        pdf = np.exp(log_norm - (df + 1) / 2 * np.log1p(grid**2 / df))
        return float(np.sum((pdf[1:] + pdf[:-1]) / 2 * np.diff(grid)))

    target, lo, hi = confidence / 2, 0.0, 1.0
    while upper_tail_mass(hi) < target:
        hi *= 2
        if hi > 1e6:
            return math.inf
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if upper_tail_mass(mid) < target else (lo, mid)
    return (lo + hi) / 2


# --- one run's resamplable numbers ------------------------------------------------------------------------------------


class Samples:
    """One run's per-window losses, per-item probe outcomes and val-curve windows (results/windows.json)."""

    def __init__(self, raw: dict) -> None:
        self.raw = raw
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray | None] | None] = {}  # converted once, resampled often

    def size(self, source: str) -> int | None:
        arrays = self._array(source)
        return None if arrays is None else len(arrays[0])

    def _array(self, source: str) -> tuple[np.ndarray, np.ndarray | None] | None:
        """(values or per-window sums, per-window counts or None) as arrays."""
        if source not in self._arrays:
            data = self._source(source)
            if data is None:
                self._arrays[source] = None
            elif isinstance(data, dict):
                self._arrays[source] = (np.asarray(data["sum"], dtype=float), np.asarray(data["count"], dtype=float))
            else:
                self._arrays[source] = (np.asarray(data, dtype=float), None)
        return self._arrays[source]

    def _source(self, source: str):
        kind, _, key = source.partition(":")
        if kind in ("val", "val_with_causal_mask", "probe", "pairs", "finetune"):
            return self.raw.get(kind)
        if kind == "length":
            return self.raw.get("lengths", {}).get(key)
        if kind == "roles":
            return self.raw.get("role_swap", {}).get(key)
        if kind == "curve":
            curve = self.raw.get("curve")
            return None if curve is None or int(key) >= len(curve["windows"]) else curve["windows"][int(key)]
        raise ValueError(f"unknown sample source {source!r}")

    def mean(self, source: str, idx: np.ndarray | None = None) -> float | None:
        """The source's mean (token-weighted for windows with counts), over the resampled indices if given."""
        arrays = self._array(source)
        if arrays is None:
            return None
        values, counts = arrays
        if idx is not None:
            values, counts = values[idx], None if counts is None else counts[idx]
        if counts is not None:
            return float(values.sum() / max(counts.sum(), 1.0))
        return float(values.mean())

    def curve_steps(self) -> list[int]:
        return list(self.raw.get("curve", {}).get("steps", []))


# A quantity of one run, given the resampling indices of every source it reads (None: the data as observed).
Quantity = Callable[[Samples, dict[str, np.ndarray | None]], float | None]


def source_quantity(source: str) -> Quantity:
    return lambda s, idx: s.mean(source, idx.get(source))


def difference_quantity(a: str, b: str) -> Quantity:
    """Within one run: mean of source a minus mean of source b (e.g. loss at 8× minus loss at 1× block_size)."""
    return lambda s, idx: minus(s.mean(a, idx.get(a)), s.mean(b, idx.get(b)))


def minus(x: float | None, y: float | None) -> float | None:
    """x − y, or None when either is missing."""
    return None if x is None or y is None else x - y


@dataclass
class Estimate:
    value: float
    half_width: float  # of the `confidence` interval
    eval_se: float  # from resampling windows/items
    seed_se: float  # from the baseline seeds' spread
    confidence: float

    @property
    def low(self) -> float:
        return self.value - self.half_width

    @property
    def high(self) -> float:
        return self.value + self.half_width

    def text(self, digits: int = 3) -> str:
        hw = "∞" if math.isinf(self.half_width) else f"{self.half_width:.{digits}f}"
        return f"{self.value:+.{digits}f} ± {hw}"


@dataclass
class Interval:
    """How intervals are built: from params.yaml's `findings` section."""

    confidence: float = 0.95
    bootstrap: int = 2000
    seed: int = 0

    def combine(self, value: float, eval_se: float, seed_se: float, seed_df: int) -> Estimate:
        seed_part = 0.0 if seed_se == 0 else t_quantile(self.confidence, seed_df) * seed_se
        half = math.sqrt((z_quantile(self.confidence) * eval_se) ** 2 + seed_part**2)
        return Estimate(value, half, eval_se, seed_se, self.confidence)

    def effect(
        self,
        quantity: Quantity,
        sources: Sequence[str],
        runs_a: Sequence[Samples],
        runs_b: Sequence[Samples] = (),
        seed_sd: float = 0.0,
        seed_df: int = 2,
    ) -> Estimate | None:
        """mean over runs_a of the quantity minus mean over runs_b (or the runs_a mean alone when runs_b is empty).

        The bootstrap draws one set of indices per source and applies it to every run: all runs of one objective are
        scored on the same windows and items, so the difference is paired. ``seed_sd`` is the quantity's spread over
        the baseline seeds, ``seed_df`` its degrees of freedom.
        """
        if not runs_a:
            return None
        value = self._value(quantity, runs_a, runs_b, {})
        if value is None or not math.isfinite(value):
            return None
        sizes = {s: runs_a[0].size(s) for s in sources}
        rng = np.random.default_rng(self.seed)
        replicates = []
        for _ in range(self.bootstrap if all(sizes.values()) else 0):
            idx = {s: rng.integers(0, n, n) for s, n in sizes.items()}
            v = self._value(quantity, runs_a, runs_b, idx)
            if v is not None and math.isfinite(v):
                replicates.append(v)
        eval_se = float(np.std(replicates, ddof=1)) if len(replicates) > 1 else 0.0
        n_a, n_b = len(runs_a), len(runs_b)
        seed_se = seed_sd * math.sqrt(1 / n_a + (1 / n_b if n_b else 0.0))
        return self.combine(value, eval_se, seed_se, seed_df)

    @staticmethod
    def _value(quantity: Quantity, runs_a, runs_b, idx) -> float | None:
        a = [quantity(r, idx) for r in runs_a]
        b = [quantity(r, idx) for r in runs_b]
        if any(v is None for v in a + b):
            return None
        return float(np.mean(a)) - (float(np.mean(b)) if b else 0.0)


def seed_spread(values: Sequence[float | None]) -> tuple[float, int]:
    """Standard deviation over seeds and its degrees of freedom (0, 0 with fewer than two seeds)."""
    v = [x for x in values if x is not None and math.isfinite(x)]
    return (statistics.stdev(v), len(v) - 1) if len(v) >= 2 else (0.0, 0)


# --- the one verdict rule ---------------------------------------------------------------------------------------------


def greater(e: Estimate | None) -> str:
    """Claim 'the effect is > 0': the whole interval above 0 = reproduced, the whole interval below 0 = not
    reproduced, an interval containing 0 = within noise."""
    if e is None:
        return "not run"
    if e.low > 0:
        return "reproduced"
    return "not reproduced" if e.high < 0 else "within noise"


def less(e: Estimate | None) -> str:
    """Claim 'the effect is < 0' (the mirror of greater)."""
    if e is None:
        return "not run"
    if e.high < 0:
        return "reproduced"
    return "not reproduced" if e.low > 0 else "within noise"


def equivalent(e: Estimate | None, margin: float) -> str:
    """Claim 'no difference': the whole interval inside ± margin = reproduced, the whole interval outside it = not
    reproduced, otherwise within noise."""
    if e is None:
        return "not run"
    if -margin <= e.low and e.high <= margin:
        return "reproduced"
    return "not reproduced" if e.low > margin or e.high < -margin else "within noise"


def at_most(e: Estimate | None, margin: float) -> str:
    """Claim 'the effect is no more than margin' (not worse by more than margin): the whole interval at or below
    margin = reproduced, the whole interval above it = not reproduced, otherwise within noise."""
    if e is None:
        return "not run"
    if e.high <= margin:
        return "reproduced"
    return "not reproduced" if e.low > margin else "within noise"


def all_of(verdicts: Sequence[str]) -> str:
    """A compound claim holds when every part does: any part not run = not run; any part contradicted = not
    reproduced; every part reproduced = reproduced; otherwise within noise."""
    if not verdicts or "not run" in verdicts:
        return "not run"
    if "not reproduced" in verdicts:
        return "not reproduced"
    return "reproduced" if all(v == "reproduced" for v in verdicts) else "within noise"


def still_changing(previous: Estimate | None, last: Estimate | None) -> bool:
    """The effect moved between the last two curve points by more than the last point's interval."""
    if previous is None or last is None:
        return False
    return abs(last.value - previous.value) > last.half_width
