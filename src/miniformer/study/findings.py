"""The evidence the claims read (metrics, per-window samples, sweeps), the breakage log and the peer cross-check.

Every verdict is one of VERDICTS and comes from a comparison written as code (here and in claims.py, the claims'
table); the template only prints them.
"""

from __future__ import annotations

import contextlib
import math
import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from miniformer.layout import loss_at_key
from miniformer.params import FindingsConfig
from miniformer.study.roles import REFERENCE, SINGLE_HEAD, STABILITY_ROWS
from miniformer.study.stats import (
    OWN_SPREAD_SEEDS,
    VERDICTS,
    Estimate,
    Interval,
    Quantity,
    Samples,
    Spread,
    difference_quantity,
    greater,
    minus,
    outlying_spreads,
    pooled_spread,
    seed_spread,
    source_quantity,
)

__all__ = ["VERDICTS", "Evidence", "Finding", "Judgement", "Metrics", "breakages", "peer_comparisons"]

@dataclass
class Judgement:
    """What a claim's judge returns: the measurement in words, the verdict, and the estimates behind it."""

    measurement: str
    verdict: str
    estimates: dict[str, Estimate | None] = field(default_factory=dict)
    still_changing: bool = False  # a val-loss effect that moved by more than its interval over the last curve points
    curve: tuple[str, str] | None = None  # the (a, b) runs whose val-loss effect the report follows over training
    judged: tuple[str, ...] = ()  # the estimates the verdict reads (empty: every one); the rest are shown beside it
    why: str = ""  # a verdict set by a gate rather than the interval rule: the reason, short, for the glance table
    # where the verdict rule turns (greater: 0; equivalent: ± the margin; at most: + the margin): how far an effect
    # may drift before its verdict could change (claims.cushion). Empty: not said, every rule's boundary counts
    boundaries: tuple[float, ...] = ()


@dataclass(kw_only=True)
class Finding(Judgement):
    """A judgement with the claim it answers, as the report prints it."""

    claim: str
    source: str
    test: str = "the paper's test"  # how our measurement relates to the source's (claims.TESTS)
    counted: bool = True  # False for a proxy or a control: shown, labelled, kept out of the verdict totals
    source_numbers: str = ""  # the source's own numbers for the claim
    resolves: str = ""  # the smallest effect its design resolves (the widest half-width) and the spread it used
    # the source's models were trained to convergence: this verdict is at the study's budget; with still_changing,
    # the converged claim is untested here whichever way it came out (the report and the totals say so)
    converged: bool = False
    trend: str = ""  # the followed effect as training ends: "closing", "widening", "settled" ("" when not followed)
    # training has flattened for this claim (claims.flattening): its effect's peak-rate drift could not flip its
    # verdict; False, or None (not measurable), leaves a converged claim untested here
    flattened: bool | None = True
    # the runs this claim reads that sit at the unigram loss (learned no use of context): a verdict that rests on
    # one says what a model that learned nothing does, and every table showing it says so
    stuck: tuple[str, ...] = ()

    @property
    def untested_at_convergence(self) -> bool:
        return self.converged and (self.still_changing or not self.flattened)


def learned(val: float, unigram: float | None, reference: float | None, cfg: FindingsConfig) -> bool:
    """A val loss that closed `trains_share` of the gap from the unigram loss to the reference's (no reference: more
    than `unigram_margin` below the unigram loss; no unigram loss: any val loss)."""
    if unigram is None:
        return True
    if reference is None or reference >= unigram:
        return val < unigram - cfg.unigram_margin
    return unigram - val >= cfg.trains_share * (unigram - reference)


def _number(x) -> float | None:
    """A metrics.json value as a number (None for a missing value, a flag or text)."""
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


class Metrics:
    """Per-experiment means over seeds of results/metrics.json."""

    def __init__(self, nested: dict, reference: str = REFERENCE) -> None:
        self.nested, self.reference = nested, reference
        # every key read, and who read it (``asking``), so that a key no run has (a misspelling, or metrics
        # aggregated by older code) is named with its reader (``unknown``) instead of reading as "not run"
        self.asked: dict[str, set[str]] = {}
        self.asker = "the report"

    @contextlib.contextmanager
    def asking(self, who: str) -> Iterator[None]:
        """Keys read inside this block are read by ``who`` (a claim, a report section, a probe's readings)."""
        before, self.asker = self.asker, who
        try:
            yield
        finally:
            self.asker = before

    def _ask(self, key: str) -> None:
        self.asked.setdefault(key, set()).add(self.asker)

    def askers(self, key: str) -> list[str]:
        """Who read ``key``, sorted."""
        return sorted(self.asked.get(key, ()))

    def has(self, exp: str) -> bool:
        return exp in self.nested

    def reader(self, *keys: str) -> Callable[[dict], object]:
        """A run's value of the first of ``keys`` it has (None if none); the last key is the one every run must have,
        the others may be missing (a key only some objectives write)."""
        self._ask(keys[-1])
        return lambda r: next((r[k] for k in keys if k in r), None)

    def keys(self) -> set[str]:
        """Every key some run has."""
        return {k for runs in self.nested.values() for r in runs.values() for k in r}

    def unknown(self) -> list[str]:
        """The keys read that no run of the metrics has (none when there are no runs)."""
        have = self.keys()
        return sorted(set(self.asked) - have) if have else []

    def values(self, exp: str, key: str) -> list[float]:
        self._ask(key)
        runs = self.nested.get(exp, {})
        return [r[key] for r in runs.values() if isinstance(r.get(key), int | float) and not isinstance(r[key], bool)]

    def mean(self, exp: str, key: str) -> float | None:
        v = self.values(exp, key)
        return statistics.fmean(v) if v else None

    def any_true(self, exp: str, key: str) -> bool:
        self._ask(key)
        return any(r.get(key) is True for r in self.nested.get(exp, {}).values())

    def noise(self, key: str = "val_loss") -> float:
        """Standard deviation of the reference run's seeds (0 when fewer than two seeds ran)."""
        return seed_spread(self.values(self.reference, key))[0]




class Contrasts:
    """How an interval on a contrast of experiments is built: each experiment's runs (per-window samples, or
    metrics.json alone), the paired bootstrap over the samples, and each experiment's own or pooled seed spread."""

    def __init__(self, m: Metrics, samples: dict, interval: Interval, pools: dict[str, str] | None = None,
                 rates: dict[str, float] | None = None) -> None:
        self.m, self.interval = m, interval
        self.samples = {e: {k: Samples(v) for k, v in runs.items()} for e, runs in samples.items()}
        # run name -> its training objective, and its learning rate: a spread is pooled over runs trained alike (an
        # MLM's masked-token loss varies over seeds as a causal LM's does not; a high rate makes training chaotic);
        # empty: one pool for every run
        self.pools, self.rates = pools or {}, rates or {}

    def pooled(self, values: dict[str, list[float | None]], exp: str | None) -> Spread:
        """The within-experiment spread pooled over the multi-seed runs trained as exp was: its objective at its
        learning rate; where none of those has two seeds, its objective at every rate, then every objective's — the
        spread says which. An arm whose own spread is an outlier (stats.outlying_spreads) is left out, and named."""
        multi = {e: v for e, v in values.items() if len(v) >= 2}
        objective = self.pools.get(exp) if exp is not None else None
        if objective is None:
            return self.screened(multi, "")
        rate = self.rates.get(exp)
        alike = {e: v for e, v in multi.items() if self.pools.get(e) == objective}
        if rate is not None:
            same_rate = {e: v for e, v in alike.items() if self.rates.get(e) == rate}
            if same_rate:
                return self.screened(same_rate, f"the {objective} runs at lr {rate:g}")
            if alike:
                return self.screened(alike, f"the {objective} runs at every rate (none at lr {rate:g} has two seeds)")
        if alike:
            return self.screened(alike, f"the {objective} runs")
        everyone = self.screened(multi, f"every objective's runs (no {objective} run has two seeds)")
        return everyone if everyone.df else Spread(0.0, 0, "none")

    def screened(self, groups: dict[str, list[float | None]], over: str) -> Spread:
        """pooled_spread over the groups, less the outliers when what remains still has a spread."""
        outliers = outlying_spreads(groups, 1 - self.interval.confidence)
        kept = pooled_spread([v for e, v in groups.items() if e not in outliers])
        if outliers and kept.df:
            less = ", ".join(f"{e} (variance {f:.1f}× the rest's)" for e, f in sorted(outliers.items()))
            return replace(kept, over=f"{over or 'every run'}, less {less}")
        return replace(pooled_spread(list(groups.values())), over=over)

    def runs(self, exp: str) -> list[Samples]:
        return list(self.samples.get(exp, {}).values())

    def has_samples(self, exps: list[str], source: str) -> bool:
        return all(self.runs(e) and all(r.size(source) for r in self.runs(e)) for e in exps)

    def spread(self, q: Quantity, exp: str) -> Spread:
        """exp's own seed spread of quantity q where it has OWN_SPREAD_SEEDS or more seeds, else the spread pooled
        over every multi-seed experiment, its own included (stats.py)."""
        return self.spread_of_runs(q, self.runs(exp), exp)

    def spread_of_runs(self, q: Quantity, runs: list[Samples], exp: str | None = None) -> Spread:
        sd, df = seed_spread([q(r, {}) for r in runs])
        if df + 1 >= OWN_SPREAD_SEEDS:
            return Spread(sd, df, "own")
        return self.pooled({e: [q(r, {}) for r in rs.values()] for e, rs in self.samples.items()}, exp)

    def contrast(self, q: Quantity, sources: list[str], terms: list[tuple[str, float]],
                 same_items: bool = False) -> Estimate | None:
        """Σ weight × mean over exp's seeds of quantity q, for (exp, weight) terms: paired bootstrap over the sources
        (``same_items``: the sources score the same items, Interval.contrast) plus each experiment's seed spread."""
        exps = [e for e, _ in terms]
        if not all(self.m.has(e) and self.runs(e) for e in exps):
            return None
        return self.interval.contrast(q, sources, [(w, self.runs(e)) for e, w in terms],
                                      [self.spread(q, e) for e in exps], exps, same_items)

    def metrics_spread(self, f: Callable[[dict], float | None], exp: str) -> Spread:
        """As spread, for a quantity read from metrics.json (no per-window samples)."""
        sd, df = seed_spread([f(r) for r in self.m.nested.get(exp, {}).values()])
        if df + 1 >= OWN_SPREAD_SEEDS:
            return Spread(sd, df, "own")
        return self.pooled({e: [f(r) for r in rs.values()] for e, rs in self.m.nested.items()}, exp)

    def metrics_contrast(self, f: Callable[[dict], float | None], terms: list[tuple[str, float]],
                         eval_se: float = 0.0) -> Estimate | None:
        """Σ weight × mean over seeds of f(run metrics): the seed part of the interval alone (plus ``eval_se``)."""
        groups = [[f(r) for r in self.m.nested.get(e, {}).values()] for e, _ in terms]
        groups = [[v for v in g if v is not None and math.isfinite(v)] for g in groups]
        if not all(groups):
            return None
        value = sum(w * statistics.fmean(g) for (_, w), g in zip(terms, groups))
        spreads = [self.metrics_spread(f, e) for e, _ in terms]
        return self.interval.combine(value, eval_se, [(w, len(g), sp) for (_, w), g, sp in zip(terms, groups, spreads)],
                                     [e for e, _ in terms])



def _shrink(first: float, last: float) -> float:
    """r from two moves two stretches apart: √(last / first) for a falling loss; 0 where it no longer falls, infinite
    where it fell less then than now."""
    if last >= 0:
        return 0.0
    return math.inf if first >= 0 else math.sqrt(last / first)


class CurveContrasts(Contrasts):
    """Effects over training: a val-loss contrast at each point of the runs' curve, and where its trend is read (the
    last stretch where the learning rates had not started to decay), the move there, and the plateau test."""

    reference: str
    decays_from: dict[str, int] | None  # run -> the step its rate starts to decay; None: every point at the peak
    _curves: dict[tuple[str, str], list]

    def curve(self, a: str, b: str) -> list[tuple[int, Estimate | None]]:
        """The val-loss effect a − b at every point of the training curve (same windows for both); bootstrapped once
        per pair (the claims table and the figure both read it)."""
        if (a, b) not in self._curves:
            self._curves[a, b] = self._curve(a, b)
        return self._curves[a, b]

    def _curve(self, a: str, b: str) -> list[tuple[int, Estimate | None]]:
        runs = self.runs(a)
        if not runs or not self.runs(b):
            return []
        out = []
        for k, step in enumerate(runs[0].curve_steps()):
            source = f"curve:{k}"
            if not self.has_samples([a, b], source):
                break
            out.append((step, self.contrast(source_quantity(source), [source], [(a, 1.0), (b, -1.0)])))
        return out

    def trend_point(self, a: str, b: str) -> tuple[int, bool] | None:
        """Which curve point the trend of a − b is read at, and whether both runs were still at their peak rate there:
        the last point before either rate decays, when two points lie there (a wsd schedule's stable phase), else the
        last point (under a decaying rate, whose last moves are small whatever the model would still do). None
        without two curve points."""
        runs = self.runs(a)
        steps = runs[0].curve_steps() if runs else []
        if len(steps) < 2:
            return None
        if self.decays_from is None:
            return len(steps) - 1, True
        peak_until = min(self.decays_from.get(a, 0), self.decays_from.get(b, 0))
        at_peak = [k for k, step in enumerate(steps) if step <= peak_until]
        return (at_peak[-1], True) if len(at_peak) >= 2 else (len(steps) - 1, False)

    def last_change(self, a: str, b: str) -> tuple[int, Estimate] | None:
        """How much the val-loss effect a − b moved into its trend point (trend_point) from the curve point before,
        paired: per window (the curve scores the same windows at every point) and per seed, so the text and the seeds
        both runs share cancel. (the step it moved from, the estimate), or None without a curve."""
        point = self.trend_point(a, b)
        if point is None:
            return None
        k, steps = point[0], self.runs(a)[0].curve_steps()
        source = f"curve_change:{k}"
        if not self.has_samples([a, b], source):
            return None
        e = self.contrast(source_quantity(source), [source], [(a, 1.0), (b, -1.0)])
        return None if e is None else (steps[k - 1], e)

    def pace(self, a: str, b: str) -> tuple[int, Estimate] | None:
        """How fast the val-loss effect a − b moves per 100 steps along the last three curve points at the peak rate
        (the least-squares slope through them, paired per window and seed as last_change): two stretches read as one
        pace, so one noisy stretch neither hides nor fakes a trend. (the step it is read from, the estimate), or None
        without three such points, or where the schedule is not known (a stand-in study: every point is read as if at
        the peak rate, so its trend is the last move)."""
        point = self.trend_point(a, b)
        if self.decays_from is None or point is None or not point[1] or point[0] < 2:
            return None
        k, steps = point[0], self.runs(a)[0].curve_steps()
        source = f"curve_pace:{k}"
        if not self.has_samples([a, b], source):
            return None
        e = self.contrast(source_quantity(source), [source], [(a, 1.0), (b, -1.0)])
        return None if e is None else (steps[k - 2], e)

    def shrink_ratios(self) -> tuple[float, list[float]] | None:
        """How much each of the reference's 100-step moves at its peak rate is of the one before (r, from its last
        three moves: the square root of the last over the first), for the mean curve and for each seed: 0 where the
        loss no longer falls, infinite where it fell less before than now. None: fewer than four curve points at the
        peak rate."""
        ref = self.reference
        point = self.trend_point(ref, ref)
        if point is None or not point[1] or point[0] < 3:
            return None
        sources = [f"curve_change:{k}" for k in (point[0] - 2, point[0])]
        if not all(self.has_samples([ref], source) for source in sources):
            return None
        per_seed = [[run.mean(source) for source in sources] for run in self.runs(ref)]
        mean = [statistics.fmean(seed[i] for seed in per_seed) for i in range(2)]
        return _shrink(*mean), [_shrink(*seed) for seed in per_seed]

    def horizon(self) -> tuple[float, float] | None:
        """How many more paces an effect may still move: if both arms of a contrast approach their limits shrinking
        their moves by r a stretch, the effect's remaining drift is r / (1 − r) times its present pace (at least one
        pace: the next stretch). r is the slowest of the mean curve's and each seed's (shrink_ratios): one r from
        three noisy moves is an estimate, and the curve's own ratios rise as it slows (a power law's tail is longer
        than a geometric one's), so the horizon takes the least optimistic. (that r, the horizon); infinite where the
        loss is not slowing (r ≥ 1), one pace where it no longer falls."""
        ratios = self.shrink_ratios()
        if ratios is None:
            return None
        r = max([ratios[0], *ratios[1]])
        if r == 0:
            return 0.0, 1.0
        return r, (math.inf if r >= 1 else max(1.0, r / (1 - r)))

    def trend_move(self, a: str, b: str) -> tuple[int, Estimate, bool] | None:
        """What the trend of a − b is read on: its pace over the last three peak-rate points where there are three
        (pace), else its last move (last_change); (the step it is read from, the estimate, whether it is a pace)."""
        pace = self.pace(a, b)
        if pace is not None:
            return (*pace, True)
        change = self.last_change(a, b)
        return None if change is None else (*change, False)

    def changing(self, a: str, b: str) -> bool:
        """The effect still moving: its trend move (trend_move) has an interval that excludes no move at all."""
        move = self.trend_move(a, b)
        return move is not None and greater(move[1]) != "undecided"

    def plateau(self) -> tuple[float | None, str]:
        """How far this budget still moves, and the measurement in words: the reference's own val loss over the last
        100-step stretch where its rate had not started to decay, as the bound |move| + its 95 % half-width (what the
        loss may still move per 100 steps). A claim resolving effects no finer than that is read where the curve has
        flattened for it (claims.claims). None: not measurable (no two curve points at the peak rate: a decaying
        schedule, whose tail moves little whatever the model would still do)."""
        ref = self.reference
        point = self.trend_point(ref, ref)
        if point is None or not point[1] or self.decays_from is None:
            return None, ("not measurable: the rate decays from the warm-up on (cosine), so no stretch of the curve "
                          "shows what the model would still do at a constant rate")
        k, steps = point[0], self.runs(ref)[0].curve_steps()
        source = f"curve_change:{k}"
        move = self.contrast(source_quantity(source), [source], [(ref, 1.0)]) if self.has_samples([ref], source) \
            else None
        if move is None:
            return None, "not measurable: no curve windows"
        bound = abs(move.value) + move.half_width
        text = (f"the reference's val loss moved {move.text()} from step {steps[k - 1]} to {steps[k]} at its peak "
                f"rate: up to {bound:.3f} per 100 steps")
        horizon = self.horizon()
        if horizon is None:
            return bound, text + "; too few points at the peak rate to see whether its moves shrink"
        r, ahead = horizon
        mean, seeds = self.shrink_ratios()
        spread = f" (its seeds {min(seeds):.2f}–{max(seeds):.2f})" if len(seeds) > 1 else ""
        said = f"; each move {mean:.2f}× the one before (its last three moves){spread}"
        if math.isinf(ahead):
            return bound, text + said + "; its moves do not shrink: no effect can be projected to settle"
        return bound, text + said + (f"; read at the slowest, {r:.2f}, an effect may still drift {ahead:.1f}× its "
                                     "present pace before the curve flattens")


class Evidence(CurveContrasts):
    """What the claims read: scalars (metrics.json), resamplable samples (windows.json), the findings params."""

    def __init__(
        self,
        nested: dict,
        samples: dict | None = None,
        cfg: FindingsConfig | None = None,
        unigram: float | None = None,
        sweeps: dict[str, list[tuple[str, float]]] | None = None,
        reference: str = REFERENCE,
        init: dict | None = None,
        pools: dict[str, str] | None = None,
        rates: dict[str, float] | None = None,
        peer: dict[str, dict[str, float]] | None = None,
        decays_from: dict[str, int] | None = None,
        chars_per_token: float = 1.0,
        n_embd: int | None = None,
    ) -> None:
        cfg = cfg or FindingsConfig()
        # the margins are set in nats per character: a tokenizer reading several characters per token (BPE) is held
        # to the same per-character margin, so an equivalence means the same thing in every setting
        self.chars_per_token = chars_per_token
        self.unit = "character" if chars_per_token == 1 else "token"
        self.cfg = replace(cfg, equivalence_margin=cfg.equivalence_margin * chars_per_token,
                           unigram_margin=cfg.unigram_margin * chars_per_token,
                           generation_margin=cfg.generation_margin * chars_per_token)
        super().__init__(Metrics(nested, reference), samples or {}, Interval(self.cfg.confidence, self.cfg.bootstrap),
                         pools, rates)
        self.reference, self.unigram = reference, unigram
        self.init = init  # token uniformity against depth at initialisation (stages/init_probe.py), if it ran
        self.sweeps = sweeps or {}  # experiment -> [(run name, learning rate)]: the experiment and its sweep points
        # experiment -> the peer's val loss per init ("own", "ours"), where the cross-check ran: a setting or our arm?
        self.peer = peer or {}
        # run -> the step its rate starts to decay (runtime/schedule.decay_start); a trend is read where neither run's
        # rate has started to decay. Not given (a test's stand-in study): every curve point counts as read at the peak
        self.decays_from = decays_from
        self.n_embd = n_embd  # the model's width: a head of an h-head run is n_embd / h wide (None: not known)
        self._curves: dict[tuple[str, str], list] = {}

    # --- estimates ---------------------------------------------------------------------------------------------------

    def effect(self, a: str, b: str | None, source: str = "val", key: str = "val_loss") -> Estimate | None:
        """mean(a) − mean(b) of one measured quantity (or mean(a) alone), with the paired-bootstrap + seed interval
        when the runs' samples are there, else the seed part alone (from metrics.json)."""
        exps = [a] if b is None else [a, b]
        if not all(self.m.has(e) for e in exps):
            return None
        terms = [(a, 1.0)] + ([(b, -1.0)] if b else [])
        if self.has_samples(exps, source):
            return self.contrast(source_quantity(source), [source], terms)
        return self.scalar_effect(a, b, key)

    def growth(self, a: str, b: str | None, top: int) -> Estimate | None:
        """Loss growth with length (loss at top× minus 1× block_size) of a, minus b's if given."""
        exps = [a] if b is None else [a, b]
        hi, lo = f"length:{top}", "length:1"
        if not all(self.m.has(e) for e in exps):
            return None
        terms = [(a, 1.0)] + ([(b, -1.0)] if b else [])
        paired = f"growth:{top}"  # per long window, minus the short windows of its own text (stats.nested_growth)
        if self.has_samples(exps, paired):
            return self.contrast(source_quantity(paired), [paired], terms)
        if self.has_samples(exps, hi) and self.has_samples(exps, lo):
            return self.contrast(difference_quantity(hi, lo), [hi, lo], terms)
        read_hi, read_lo = self.m.reader(loss_at_key(top)), self.m.reader(loss_at_key(1))
        return self.metrics_contrast(lambda r: minus(read_hi(r), read_lo(r)), terms)

    def scalar_growth(self, exp: str, top: int) -> float | None:
        """Mean over seeds of loss at top× block_size minus at 1× (metrics.json alone, no interval)."""
        hi, lo = self.m.mean(exp, loss_at_key(top)), self.m.mean(exp, loss_at_key(1))
        return None if hi is None or lo is None else hi - lo

    def preference(self, exp: str, against: str | None = None) -> Estimate | None:
        """Share of minimal pairs where exp prefers the true order, minus chance (0.5) — or minus the same share
        for the floor, the strongest character n-gram of the train split (``against="floor"``), paired over the
        pairs."""
        if not self.m.has(exp):
            return None
        source = "pairs"
        if self.has_samples([exp], source) and (against is None or self.has_samples([exp], "pairs_floor")):
            floor = "pairs_floor" if against else None
            return self.contrast(lambda s, idx: minus(s.mean(source, idx.get(source)),
                                                      0.5 if floor is None else s.mean(floor, idx.get(floor))),
                                 [source] + ([floor] if floor else []), [(exp, 1.0)], same_items=True)
        read, read_floor = self.m.reader("order_preference"), self.m.reader("order_preference_floor")
        return self.metrics_contrast(lambda r: minus(read(r), 0.5 if against is None else read_floor(r)),
                                     [(exp, 1.0)])

    def scalar_effect(self, a: str, b: str | None, key: str) -> Estimate | None:
        """From metrics.json alone: the seed part of the interval (used for quantities with no per-window samples:
        attention entropy, hidden-state uniformity, final train loss)."""
        if not self.m.values(a, key) or (b and not self.m.values(b, key)):
            return None
        terms = [(a, 1.0)] + ([(b, -1.0)] if b else [])
        read = self.m.reader(key)
        return self.metrics_contrast(lambda r: _number(read(r)), terms)

    # --- the learning-rate sweeps -------------------------------------------------------------------------------------

    def best_lr_run(self, exp: str) -> str | None:
        """The run of exp's sweep (itself included) with the lowest val loss: a capacity claim's fair representative."""
        sweep = self.sweeps.get(exp, [(exp, math.nan)])
        runs = [name for name, _ in sweep if self.m.mean(name, "val_loss") is not None]
        finite = [r for r in runs if math.isfinite(self.m.mean(r, "val_loss"))]
        return min(finite, key=lambda r: self.m.mean(r, "val_loss")) if finite else None

    def trains(self, run: str) -> bool:
        """Not diverged, and its val loss closed `findings.trains_share` of the unigram-to-reference gap (learned)."""
        v = self.m.mean(run, "val_loss")
        return v is not None and not self.m.any_true(run, "diverged") and learned(
            v, self.unigram, self.m.mean(self.reference, "val_loss"), self.cfg)

    def at_unigram(self, run: str) -> bool:
        """A run whose mean val loss sits within `unigram_margin` of the unigram loss: it learned no use of context."""
        v = self.m.mean(run, "val_loss")
        return self.unigram is not None and v is not None and v >= self.unigram - self.cfg.unigram_margin

    def stability_map(self) -> dict[tuple[str, str], dict[float, dict]]:
        """(norm, warm-up) -> learning rate -> {val_loss, diverged, stuck (near the unigram), trains (rows' rule)}."""
        out: dict[tuple[str, bool], dict[float, dict]] = {}
        for row, exp in STABILITY_ROWS.items():
            for name, lr in self.sweeps.get(exp, []):
                if (v := self.m.mean(name, "val_loss")) is not None:
                    stuck = self.unigram is not None and v >= self.unigram - self.cfg.unigram_margin
                    out.setdefault(row, {})[lr] = dict(run=name, val_loss=v, diverged=self.m.any_true(name, "diverged"),
                                                       stuck=bool(stuck), trains=self.trains(name))
        return out

    def text(self, e: Estimate | None) -> str:
        return "n/a" if e is None else e.text()


def stuck_runs(ev: Evidence, experiments: list[str]) -> list[str]:
    """The runs of these experiments (their sweep and ladder points too) with a seed at or above the unigram loss
    (within `unigram_margin`): it learned no use of context. Named with how many seeds where not all."""
    if ev.unigram is None:
        return []
    out = []
    for name, seeds in ev.m.nested.items():
        if name.split("/")[0] not in experiments:
            continue
        values = [v for r in seeds.values() if isinstance(v := r.get("val_loss"), int | float)]
        k = sum(v >= ev.unigram - ev.cfg.unigram_margin for v in values)
        if k:
            out.append(name if k == len(values) else f"{name} ({k} of {len(values)} seeds)")
    return out

def seeds_training(ev: Evidence, run: str) -> list[bool]:
    """Each seed's pass/fail under `trains`' rule: where a run may be stuck at the unigram loss, a loss interval
    pooled from runs that trained says nothing about it, and how many seeds trained does."""
    reference = ev.m.mean(ev.reference, "val_loss")
    out = []
    for r in ev.m.nested.get(run, {}).values():
        v = r.get("val_loss")
        number = isinstance(v, int | float) and not isinstance(v, bool)
        if r.get("diverged") is True or (number and v != v):
            out.append(False)  # a divergence (or a NaN loss) is a failure whatever its last loss
        elif number:
            out.append(learned(v, ev.unigram, reference, ev.cfg))
        # a seed with no loss and no divergence recorded is no result: left out, not counted as a failure
    return out


def sweep_note(ev: Evidence, exp: str) -> str:
    """For a run that failed: whether it fails at every learning rate of its sweep, or only at its own."""
    sweep = ev.sweeps.get(exp, [])
    if len(sweep) < 2 or ev.trains(exp):
        return ""
    training = [f"{lr:g}" for name, lr in sweep if ev.trains(name)]
    if training:
        return f"; trains at lr {', '.join(training)}: its own learning rate, not the architecture, fails"
    return f"; fails at every learning rate tried ({', '.join(f'{lr:g}' for _, lr in sweep)})"


def breakages(ev: Evidence, hypotheses: dict[str, str], groups: dict[str, str]) -> list[dict]:
    """Every params.yaml experiment but the baseline: its hypothesis, what happened in numbers, and its outcome
    against the baseline by the same interval rule. A run within ``unigram_margin`` of the unigram loss (the val
    loss of the train split's character frequencies, no context) trained but learned nothing from context."""
    m = ev.m
    rows = []
    for exp in hypotheses:
        if exp == ev.reference or not m.has(exp):
            continue
        # the single-head attention breakages are held to the single head, the rest to the reference
        against = SINGLE_HEAD if groups.get(exp) == "attention" and exp != SINGLE_HEAD and m.has(SINGLE_HEAD) \
            else ev.reference
        name = "the baseline" if against == ev.reference else against
        v, base = m.mean(exp, "val_loss"), m.mean(against, "val_loss")
        e = ev.effect(exp, against) if groups.get(exp) != "objective" else None
        delta = None if e is None else e.value
        steps = m.values(exp, "divergence_step")
        if m.any_true(exp, "diverged"):
            outcome = f"diverged at step {int(min(steps)) if steps else '?'}"
        elif v is None:
            outcome = "no val loss"
        elif groups.get(exp) == "objective":
            outcome = "loss not comparable across objectives; see the shared probe"
        elif m.mean(exp, "val_loss_with_causal_mask") is not None:
            # its own val loss reads the answer: the comparable number is the one with the mask restored
            restored = m.mean(exp, "val_loss_with_causal_mask")
            outcome = (f"leaked: {v:.3f} reading the future, {restored:.3f} once the causal mask is restored "
                       f"({name} {base:.3f})")
            v, e = restored, None
            delta = None if base is None else restored - base
        elif ev.at_unigram(exp):
            outcome = f"stuck at the unigram loss ({ev.unigram:.3f}): learned no use of context"
        else:
            outcome = {"reproduced": f"worse than {name}", "contradicted": f"better than {name}",
                       "undecided": f"not resolved from {name}", "not run": "no interval"}[greater(e)]
        outcome += sweep_note(ev, exp)
        rows.append({"experiment": exp, "hypothesis": hypotheses.get(exp, ""), "val_loss": v,
                     "delta": delta, "interval": None if e is None else e.half_width,
                     "diverged": m.any_true(exp, "diverged"), "outcome": outcome,
                     "spikes": m.mean(exp, "loss_spikes"), "train_loss": m.mean(exp, "final_train_loss")})
    return rows


# --- cross-check against the peer implementation ---------------------------------------------------------------------

AGREEMENT_MARGIN = 0.05  # nats beyond the noise floor before a difference with the peer is flagged
NOISE_SIGMAS = 2.0  # the cross-check's floor: 2 baseline standard deviations (one seed of each side)


PEER_LABELS = {"agree": "agree", "init": "differs by init only", "DISAGREE": "DISAGREE: unexplained", "n/a": "n/a"}
PEER_CSS = {"agree": "reproduced", "init": "within-noise", "DISAGREE": "not-reproduced"}


@dataclass
class PeerComparison:
    experiment: str
    ours: float | None
    peer: float | None  # the peer with its own init
    peer_our_init: float | None  # the peer with our (Vaswani's) init
    tolerance: float
    ours_at: dict[str, float | None]
    peer_at: dict[str, float]
    peer_our_init_at: dict[str, float] = field(default_factory=dict)

    @property
    def diff(self) -> float | None:
        return None if self.ours is None or self.peer is None else self.ours - self.peer

    @property
    def diff_our_init(self) -> float | None:
        return None if self.ours is None or self.peer_our_init is None else self.ours - self.peer_our_init

    @property
    def lengths(self) -> list[tuple[str, float | None, float, float | None]]:
        """(multiple, ours, peer with its init, peer with ours) at every length the peer was scored at."""
        return [(k, self.ours_at.get(k), v, self.peer_our_init_at.get(k)) for k, v in self.peer_at.items()]

    @property
    def label(self) -> str:
        return PEER_LABELS[self.outcome]

    @property
    def css(self) -> str:
        """The verdict colour the report gives this outcome."""
        return PEER_CSS.get(self.outcome, "not-run")

    @property
    def outcome(self) -> str:
        """agree | init (differs from the peer's own init, agrees under ours) | DISAGREE | n/a."""
        if self.diff is None:
            return "n/a"
        if abs(self.diff) <= self.tolerance:
            return "agree"
        if self.diff_our_init is not None and abs(self.diff_our_init) <= self.tolerance:
            return "init"
        return "DISAGREE"


def peer_comparisons(m: Metrics, peer: dict, seed_key: dict[str, str]) -> list[PeerComparison]:
    """Ours beside the peer per variant, same seed; flagged where |ours − peer| > 2σ (baseline seeds) + 0.05 nats,
    and explained by the init where the peer given our init lands within that of ours."""
    tolerance = NOISE_SIGMAS * m.noise() + AGREEMENT_MARGIN
    rows = []
    for exp, p in peer.items():
        runs = m.nested.get(exp, {})
        run = runs.get(seed_key.get(exp) or next(iter(runs), ""), {})  # the seed the peer ran, else the first
        own, ours_init = p["inits"].get("own", {}), p["inits"].get("vaswani", {})
        rows.append(
            PeerComparison(
                exp,
                run.get("val_loss"),
                own.get("val_loss"),
                ours_init.get("val_loss"),
                tolerance,
                {k: run.get(loss_at_key(k)) for k in own.get("loss_at", {})},
                own.get("loss_at", {}),
                ours_init.get("loss_at", {}),
            )
        )
    return rows
