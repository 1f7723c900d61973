"""Effects with intervals, and the one rule that turns an interval into a verdict.

Every effect the report states is a difference between experiments (or one run's own quantity, such as loss growth
with length). Its uncertainty has two parts, added in quadrature:

- evaluation sampling: the runs are scored on the same windows (and the probe on the same items), so the difference is
  bootstrapped over windows/items, resampled jointly for every run (a paired bootstrap: most window-to-window variation
  cancels);
- training seed: each run's own spread of the same quantity over its seeds (evaluated on the same windows, so this is
  seed variation alone) where it has three or more; otherwise the within-experiment spread of that quantity pooled
  over the multi-seed runs of the same training objective (more degrees of freedom than one experiment's; an MLM's
  masked-token loss does not vary as a causal LM's does), or over every objective's where its own has no two-seed
  run, and the estimate says which. Scaled by 1/√n per
  run and by Student's t with Welch-Satterthwaite degrees of freedom, because a spread from few seeds is itself
  uncertain. The half-width is the smallest effect the design resolves (its minimum detectable effect).
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

# reproduced: the interval lies where the claim says; contradicted: it excludes the claim; undecided: the design
# cannot resolve it (the interval straddles the line, or the instrument cannot fire at this budget) — the claim's
# text says what would decide it. A proxy's verdict is one of these too, labelled and kept out of the totals.
VERDICTS = ("reproduced", "contradicted", "undecided", "not run")


# --- quantiles (no scipy dependency) ---------------------------------------------------------------------------------


def z_quantile(confidence: float) -> float:
    """Two-sided normal quantile: 1.96 for 0.95."""
    return statistics.NormalDist().inv_cdf(0.5 + confidence / 2)


@functools.cache  # a report asks for the same few (confidence, df) hundreds of times; each is 60 integrations
def t_quantile(confidence: float, df: float) -> float:
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


# A spread from two seeds has one degree of freedom (t = 12.7 at 95 %): alone it swamps any effect, pooled it
# informs. An experiment's own spread is used from three seeds on; with two, its seeds join the pool.
OWN_SPREAD_SEEDS = 3


def f_cdf(x: float, d1: float, d2: float) -> float:
    """P(F ≤ x) for Fisher's F with (d1, d2) degrees of freedom: the regularised incomplete beta I_z(d1/2, d2/2) at
    z = d1·x / (d1·x + d2), integrated numerically after u = t^a (which removes the pole at 0 when d1 = 1)."""
    if x <= 0:
        return 0.0
    a, b = d1 / 2, d2 / 2
    z = d1 * x / (d1 * x + d2)
    u = np.linspace(0.0, z**a, 4001)
    integrand = (1 - u ** (1 / a)) ** (b - 1) / a
    log_beta = math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    return float(np.sum((integrand[1:] + integrand[:-1]) / 2 * np.diff(u)) / math.exp(log_beta))


@functools.cache
def f_quantile(upper: float, d1: float, d2: float) -> float:
    """The F(d1, d2) value exceeded with probability ``upper`` (3.49 for 0.05, 2 and 20), by bisection on f_cdf.
    d2 >= 2 (below, the density's pole at 1 defeats the integration; no screen here needs it)."""
    lo, hi = 0.0, 1.0
    while f_cdf(hi, d1, d2) < 1 - upper:
        hi *= 2
        if hi > 1e9:
            return math.inf
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f_cdf(mid, d1, d2) < 1 - upper else (lo, mid)
    return (lo + hi) / 2


def outlying_spreads(groups: dict[str, Sequence[float | None]], alpha: float) -> dict[str, float]:
    """The experiments whose seed variance is too large to share a pool with the rest (Cochran's question, for
    unequal seed counts): each experiment with OWN_SPREAD_SEEDS or more seeds — one that reads its own spread anyway
    — against the others' pooled variance, an F ratio beyond its 1 − α/k quantile (k experiments: a Bonferroni
    screen). A pooled spread assumes one spread for all; one wide arm would otherwise set every one-seed interval.
    name -> its F ratio."""
    spreads = {name: seed_spread(v) for name, v in groups.items()}
    spreads = {name: sd_df for name, sd_df in spreads.items() if sd_df[1] > 0}
    out = {}
    for name, (sd, df) in spreads.items():
        if df + 1 < OWN_SPREAD_SEEDS:
            continue
        rest_df = sum(d for other, (_, d) in spreads.items() if other != name)
        if rest_df < 2:
            continue
        rest_var = sum(d * s * s for other, (s, d) in spreads.items() if other != name) / rest_df
        if rest_var == 0:
            continue  # the rest constant (a quantity fixed by construction): leaving this out would pool a zero
        ratio = sd * sd / rest_var
        if ratio > f_quantile(alpha / len(spreads), df, rest_df):
            out[name] = ratio
    return out


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
        if kind in ("val", "val_with_causal_mask", "probe", "pairs", "pairs_floor", "finetune"):
            return self.raw.get(kind)
        if kind == "length":
            return self.raw.get("lengths", {}).get(key)
        if kind == "growth":
            return nested_growth(self.raw.get("lengths", {}), int(key))
        if kind == "roles":
            return self.raw.get("role_swap", {}).get(key)
        if kind in ("generation", "generation_growth"):
            return self.raw.get(kind, {}).get(key)
        if kind == "curve_change":  # per window: its loss at curve point k minus at point k − 1 (the same windows)
            windows = (self.raw.get("curve") or {}).get("windows", [])
            k = int(key)
            if not 1 <= k < len(windows) or len(windows[k]) != len(windows[k - 1]):
                return None
            return (np.asarray(windows[k], dtype=float) - np.asarray(windows[k - 1], dtype=float)).tolist()
        if kind == "curve_pace":  # per window: the least-squares slope of its loss over curve points k − 2, k − 1, k
            windows = (self.raw.get("curve") or {}).get("windows", [])
            k = int(key)
            if not 2 <= k < len(windows) or len(windows[k]) != len(windows[k - 2]):
                return None
            return ((np.asarray(windows[k], dtype=float) - np.asarray(windows[k - 2], dtype=float)) / 2).tolist()
        if kind == "curve":
            curve = self.raw.get("curve")
            return None if curve is None or int(key) >= len(curve["windows"]) else curve["windows"][int(key)]
        raise ValueError(f"unknown sample source {source!r}")

    def mean(self, source: str, idx: np.ndarray | None = None) -> float | np.ndarray | None:
        """The source's mean (token-weighted for windows with counts), over the resampled indices if given: one
        resample (n,) gives a number, a stack of them (B, n) the B resamples' means at once."""
        arrays = self._array(source)
        if arrays is None:
            return None
        values, counts = arrays
        if idx is None:
            return float(values.sum() / max(counts.sum(), 1.0)) if counts is not None else float(values.mean())
        values, counts = values[idx], None if counts is None else counts[idx]
        if counts is not None:
            means = values.sum(axis=-1) / np.maximum(counts.sum(axis=-1), 1.0)
        else:
            means = values.mean(axis=-1)
        return float(means) if idx.ndim == 1 else means

    def curve_steps(self) -> list[int]:
        return list(self.raw.get("curve", {}).get("steps", []))


def nested_growth(lengths: dict[str, list[float]], top: int) -> list[float] | None:
    """Per long window: its loss at top× block_size minus the mean loss of the 1× windows that hold its text. The
    length sweep cuts both from the start of the val split with a stride of their own length
    (evaluation.losses.loss_at_length; a test holds it to that), so the top× window k holds the 1× windows
    top·k … top·k + top − 1; the long windows whose short ones were all scored are kept. Resampled as one source the
    shared text stays out of the interval (drawn apart, the two lengths' sampling errors would add)."""
    long, short = lengths.get(str(top)), lengths.get("1")
    if not long or not short:
        return None
    kept = min(len(long), len(short) // top)
    inner = np.asarray(short[: kept * top], dtype=float).reshape(kept, top).mean(1)
    return (np.asarray(long[:kept], dtype=float) - inner).tolist() if kept else None


# A quantity of one run, given the resampling indices of every source it reads (None: the data as observed). Indices of
# shape (B, n) hold B resamples: the quantity is then an array of B values (Samples.mean and minus broadcast).
Quantity = Callable[[Samples, dict[str, np.ndarray | None]], float | np.ndarray | None]
BOOTSTRAP_BLOCK = 250  # resamples evaluated at once: (250, n) index arrays stay a few MB for the largest sources


def source_quantity(source: str) -> Quantity:
    return lambda s, idx: s.mean(source, idx.get(source))


def difference_quantity(a: str, b: str) -> Quantity:
    """Within one run: mean of source a minus mean of source b (e.g. loss at 8× minus loss at 1× block_size)."""
    return lambda s, idx: minus(s.mean(a, idx.get(a)), s.mean(b, idx.get(b)))


def minus(x: float | None, y: float | None) -> float | None:
    """x − y, or None when either is missing."""
    return None if x is None or y is None else x - y


@dataclass
class Spread:
    """A quantity's spread over training seeds, and where it came from."""

    sd: float
    df: int
    kind: str  # "own" (the experiment's seeds), "pooled" (every multi-seed experiment), "none" (one seed everywhere)
    over: str = ""  # a pooled spread's pool, in words ("" = every multi-seed experiment); one estimate per pool


@dataclass
class Estimate:
    value: float
    half_width: float  # of the `confidence` interval: also the smallest effect this design resolves
    eval_se: float  # from resampling windows/items
    seed_se: float  # from the seed spreads of the runs in the effect
    confidence: float
    seed_df: float = 0.0  # degrees of freedom of the seed part (Welch-Satterthwaite over the spreads used)
    variance: str = ""  # which spreads the seed part used, in words
    seeds: int = 1  # the fewest seeds of any run in the effect (what "more seeds" would raise)

    @property
    def low(self) -> float:
        return self.value - self.half_width

    @property
    def high(self) -> float:
        return self.value + self.half_width

    def text(self, digits: int = 3) -> str:
        hw = "∞" if math.isinf(self.half_width) else f"{self.half_width:.{digits}f}"
        return f"{self.value:+.{digits}f} ± {hw}"

    def seeds_to_resolve(self, target: float) -> int | None:
        """About how many seeds per run would shrink the half-width below ``target`` (the seed part falls with √n;
        the current t quantile kept, so an over-estimate); None when evaluation sampling alone is already wider."""
        eval_part = z_quantile(self.confidence) * self.eval_se
        seed_part = math.sqrt(max(self.half_width**2 - eval_part**2, 0.0))
        if target <= eval_part or seed_part == 0:
            return None
        return max(self.seeds + 1, math.ceil(self.seeds * (seed_part / math.sqrt(target**2 - eval_part**2)) ** 2))


# One term of a contrast: weight, number of runs averaged, and the spread of one run's quantity.
Term = tuple[float, int, Spread]


@dataclass
class Interval:
    """How intervals are built: from params.yaml's `findings` section."""

    confidence: float = 0.95
    bootstrap: int = 2000
    seed: int = 0

    def combine(self, value: float, eval_se: float, terms: Sequence[Term] = (), names: Sequence[str] = ()) -> Estimate:
        """The interval of Σ w·mean(runs): evaluation part (normal) and seed part (Student t) in quadrature.

        The seed variance is Σ w²·sd²/n over the terms, its degrees of freedom by Welch-Satterthwaite; terms that
        share the pooled spread are one source of it (it is one estimate, counted once)."""
        own = [(w * w * sp.sd**2 / n, sp.df) for w, n, sp in terms if sp.kind == "own"]
        pools: dict[str, list[Term]] = {}
        for w, n, sp in terms:
            if sp.kind == "pooled":
                pools.setdefault(sp.over, []).append((w, n, sp))
        parts = own + [(sum(w * w / n for w, n, _ in group) * group[0][2].sd ** 2, group[0][2].df)
                       for group in pools.values()]
        seed_var = sum(v for v, _ in parts)
        df = 0.0  # fractional, as Welch-Satterthwaite gives it: rounding down to 1 would turn t = 6 into t = 12.7
        if seed_var > 0:
            df = seed_var**2 / sum(v * v / d for v, d in parts if d > 0 and v > 0)
        seed_se = math.sqrt(seed_var)
        seed_part = 0.0 if seed_se == 0 else t_quantile(self.confidence, max(df, 1.0)) * seed_se
        half = math.sqrt((z_quantile(self.confidence) * eval_se) ** 2 + seed_part**2)
        return Estimate(value, half, eval_se, seed_se, self.confidence, df, describe_spreads(terms, names),
                        min((n for _, n, _ in terms), default=1))

    def effect(self, quantity: Quantity, sources: Sequence[str], runs_a: Sequence[Samples],
               runs_b: Sequence[Samples] = (), seed_sd: float = 0.0, seed_df: int = 2) -> Estimate | None:
        """mean over runs_a minus mean over runs_b (or runs_a alone), both sides under one seed spread (sd, df)."""
        if not runs_a:
            return None
        shared = Spread(seed_sd, seed_df, "pooled") if seed_sd else Spread(0.0, 0, "none")
        groups = [(1.0, runs_a)] + ([(-1.0, runs_b)] if runs_b else [])
        return self.contrast(quantity, sources, groups, [shared] * len(groups))

    def contrast(self, quantity: Quantity, sources: Sequence[str], runs: Sequence[tuple[float, Sequence[Samples]]],
                 spreads: Sequence[Spread], names: Sequence[str] = (), same_items: bool = False) -> Estimate | None:
        """Σ weight × (mean over the runs of the quantity), e.g. a − b with weights +1 / −1.

        The bootstrap draws one set of indices per source and applies it to every run: all runs of one objective are
        scored on the same windows and items, so the contrast is paired. ``same_items``: the sources score the same
        items too (one window with roles swapped and intact, one pair by the model and by the n-gram floor), so one
        set of indices serves them all and the difference is paired over the items as well (sources of unequal sizes
        cannot be: drawn apart). ``spreads`` holds each term's seed spread.
        """
        if not runs or not all(r for _, r in runs):
            return None
        value = self._value(quantity, runs, {})
        if value is None or not math.isfinite(value):
            return None
        sizes = tuple({s: runs[0][1][0].size(s) for s in sources}.items())
        shared = sizes[0][1] if same_items and len({n for _, n in sizes}) == 1 else None
        replicates: list[np.ndarray] = []
        for block in resample_blocks(self.seed, sizes, shared, self.bootstrap if all(n for _, n in sizes) else 0):
            v = self._value(quantity, runs, block)
            if v is not None:
                v = np.broadcast_to(np.asarray(v, dtype=float), (len(next(iter(block.values()))),))
                replicates.append(v[np.isfinite(v)])
        kept = np.concatenate(replicates) if replicates else np.empty(0)
        eval_se = float(np.std(kept, ddof=1)) if len(kept) > 1 else 0.0
        terms = [(w, len(r), sp) for (w, r), sp in zip(runs, spreads)]
        return self.combine(value, eval_se, terms, names)

    @staticmethod
    def _value(quantity: Quantity, runs, idx) -> float | np.ndarray | None:
        """Σ w × mean over the group's runs; an array of B values when idx holds B resamples per source."""
        total: float | np.ndarray = 0.0
        for w, group in runs:
            values = [quantity(r, idx) for r in group]
            if any(v is None for v in values):
                return None
            total = total + w * np.mean(values, axis=0)
        return total if isinstance(total, np.ndarray) and total.ndim else float(total)


@functools.lru_cache(maxsize=8)  # a few MB each at the default study's sizes
def resample_blocks(seed: int, sizes: tuple[tuple[str, int], ...], shared: int | None,
                    replicates: int) -> tuple[dict[str, np.ndarray], ...]:
    """The bootstrap's indices for sources of these (name, size): drawn replicate by replicate from a generator
    seeded by ``seed`` (the draws' order is the interval's seed), ``shared``: one set for every source (of that
    size), then stacked BOOTSTRAP_BLOCK replicates at a time, so a quantity is evaluated one block at a time (one
    array operation per source and run instead of one per replicate). Every contrast over sources of the same sizes
    draws the same indices: drawn once here, read-only, instead of once per contrast (the draws were most of a
    report's time)."""
    rng = np.random.default_rng(seed)
    draws = [{s: rng.integers(0, n, n) for s, n in sizes} if shared is None else
             dict.fromkeys((s for s, _ in sizes), rng.integers(0, shared, shared)) for _ in range(replicates)]
    blocks = []
    for start in range(0, len(draws), BOOTSTRAP_BLOCK):
        block = {s: np.stack([d[s] for d in draws[start:start + BOOTSTRAP_BLOCK]]) for s, _ in sizes}
        for idx in block.values():
            idx.setflags(write=False)
        blocks.append(block)
    return tuple(blocks)


def describe_spreads(terms: Sequence[Term], names: Sequence[str]) -> str:
    """Which seed spread each run of the effect used, in words, e.g. 'own (pos_alibi, 3 seeds); pooled, df 9'."""
    own = [f"{name} {n} seeds" for (_, n, sp), name in zip(terms, names) if sp.kind == "own"]
    pools = {sp.over: sp for _, _, sp in terms if sp.kind == "pooled"}
    out = [f"own spread ({', '.join(own)})"] if own else []
    for over, sp in pools.items():
        out.append(f"pooled within-experiment spread{' over ' + over if over else ''} (df {sp.df})")
    if not out and terms:
        out.append("no seed spread: one seed everywhere")
    return "; ".join(out)


def pooled_spread(groups: Sequence[Sequence[float | None]]) -> Spread:
    """The within-experiment spread of a quantity pooled over every experiment with at least two finite seeds:
    √(Σ (n_i − 1)·s_i² / Σ (n_i − 1)), with Σ (n_i − 1) degrees of freedom."""
    ss, df = 0.0, 0
    for values in groups:
        sd, d = seed_spread(values)
        ss, df = ss + d * sd * sd, df + d
    return Spread(math.sqrt(ss / df), df, "pooled") if df else Spread(0.0, 0, "none")


def seed_spread(values: Sequence[float | None]) -> tuple[float, int]:
    """Standard deviation over seeds and its degrees of freedom (0, 0 with fewer than two seeds)."""
    v = [x for x in values if x is not None and math.isfinite(x)]
    return (statistics.stdev(v), len(v) - 1) if len(v) >= 2 else (0.0, 0)


# --- the one verdict rule ---------------------------------------------------------------------------------------------


def greater(e: Estimate | None) -> str:
    """Claim 'the effect is > 0': the whole interval above 0 = reproduced, the whole interval below 0 =
    contradicted, an interval containing 0 = undecided."""
    if e is None:
        return "not run"
    if e.low > 0:
        return "reproduced"
    return "contradicted" if e.high < 0 else "undecided"


def less(e: Estimate | None) -> str:
    """Claim 'the effect is < 0' (the mirror of greater)."""
    if e is None:
        return "not run"
    if e.high < 0:
        return "reproduced"
    return "contradicted" if e.low > 0 else "undecided"


def equivalent(e: Estimate | None, margin: float) -> str:
    """Claim 'no difference': the whole interval inside ± margin = reproduced, the whole interval outside it =
    contradicted, otherwise undecided (a half-width above the margin can never show equivalence)."""
    if e is None:
        return "not run"
    if -margin <= e.low and e.high <= margin:
        return "reproduced"
    return "contradicted" if e.low > margin or e.high < -margin else "undecided"


def at_most(e: Estimate | None, margin: float) -> str:
    """Claim 'the effect is no more than margin' (not worse by more than margin): the whole interval at or below
    margin = reproduced, the whole interval above it = contradicted, otherwise undecided."""
    if e is None:
        return "not run"
    if e.high <= margin:
        return "reproduced"
    return "contradicted" if e.low > margin else "undecided"


def all_of(verdicts: Sequence[str]) -> str:
    """A compound claim holds when every part does: any part not run = not run; any part contradicted =
    contradicted; every part reproduced = reproduced; otherwise undecided."""
    if not verdicts or "not run" in verdicts:
        return "not run"
    if "contradicted" in verdicts:
        return "contradicted"
    return "reproduced" if all(v == "reproduced" for v in verdicts) else "undecided"


def rank_test(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """Exact permutation test on the rank sum of group a among a + b (ties share their mean rank): the chance that
    a's ranks are this low or lower, this high or higher, and the smallest p these group sizes can reach — with one
    value among eight it is 1/8, so no arrangement can be significant at 5 %."""
    values = list(a) + list(b)
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    observed = sum(ranks[: len(a)])
    sums = [sum(c) for c in itertools.combinations(ranks, len(a))]
    lowest = min(sums)
    return (sum(s <= observed + 1e-9 for s in sums) / len(sums), sum(s >= observed - 1e-9 for s in sums) / len(sums),
            sum(s <= lowest + 1e-9 for s in sums) / len(sums))

