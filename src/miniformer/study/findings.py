"""The evidence the claims read (metrics, per-window samples, sweeps), the breakage log and the peer cross-check.

Every verdict is one of VERDICTS and comes from a comparison written as code (here and in claims.py, the claims'
table); the template only prints them.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from miniformer.layout import loss_at_key
from miniformer.params import FindingsConfig
from miniformer.study.roles import REFERENCE, STABILITY_ROWS
from miniformer.study.stats import (
    VERDICTS,
    Estimate,
    Interval,
    Samples,
    difference_quantity,
    greater,
    minus,
    seed_spread,
    source_quantity,
    still_changing,
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


@dataclass(kw_only=True)
class Finding(Judgement):
    """A judgement with the claim it answers, as the report prints it."""

    claim: str
    source: str
    test: str = "the paper's test"  # how our measurement relates to the source's (claims.TESTS)
    counted: bool = True  # False for a proxy or a control: shown, labelled, kept out of the verdict totals
    source_numbers: str = ""  # the source's own numbers for the claim


class Metrics:
    """Per-experiment means over seeds of results/metrics.json."""

    def __init__(self, nested: dict, reference: str = REFERENCE) -> None:
        self.nested, self.reference = nested, reference

    def has(self, exp: str) -> bool:
        return exp in self.nested

    def values(self, exp: str, key: str) -> list[float]:
        runs = self.nested.get(exp, {})
        return [r[key] for r in runs.values() if isinstance(r.get(key), int | float) and not isinstance(r[key], bool)]

    def mean(self, exp: str, key: str) -> float | None:
        v = self.values(exp, key)
        return statistics.fmean(v) if v else None

    def any_true(self, exp: str, key: str) -> bool:
        return any(r.get(key) is True for r in self.nested.get(exp, {}).values())

    def noise(self, key: str = "val_loss") -> float:
        """Standard deviation of the reference run's seeds (0 when fewer than two seeds ran)."""
        return seed_spread(self.values(self.reference, key))[0]


class Evidence:
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
    ) -> None:
        self.m, self.reference = Metrics(nested, reference), reference
        self.init = init  # token uniformity against depth at initialisation (stages/init_probe.py), if it ran
        self.cfg = cfg or FindingsConfig()
        self.interval = Interval(self.cfg.confidence, self.cfg.bootstrap)
        self.samples = {e: {k: Samples(v) for k, v in runs.items()} for e, runs in (samples or {}).items()}
        self.unigram = unigram
        # experiment -> [(run name, learning rate)] for the experiment and its sweep points
        self.sweeps = sweeps or {}
        self._curves: dict[tuple[str, str], list] = {}

    # --- estimates ---------------------------------------------------------------------------------------------------

    def runs(self, exp: str) -> list[Samples]:
        return list(self.samples.get(exp, {}).values())

    def _has_samples(self, exps: list[str], source: str) -> bool:
        return all(self.runs(e) and all(r.size(source) for r in self.runs(e)) for e in exps)

    def paired(self, q, sources: list[str], runs_a: list[Samples], runs_b: list[Samples] = ()) -> Estimate | None:
        """The interval of quantity q (a − b over resampled sources), its seed part from the baseline's seeds."""
        sd, df = seed_spread([q(r, {}) for r in self.runs(self.reference)])
        return self.interval.effect(q, sources, runs_a, runs_b, sd, df)

    def effect(self, a: str, b: str | None, source: str = "val", key: str = "val_loss") -> Estimate | None:
        """mean(a) − mean(b) of one measured quantity (or mean(a) alone), with the paired-bootstrap + seed interval
        when the runs' samples are there, else the seed part alone (from metrics.json)."""
        exps = [a] if b is None else [a, b]
        if not all(self.m.has(e) for e in exps):
            return None
        if self._has_samples(exps, source):
            return self.paired(source_quantity(source), [source], self.runs(a), self.runs(b) if b else ())
        return self.scalar_effect(a, b, key)

    def growth(self, a: str, b: str | None, top: int) -> Estimate | None:
        """Loss growth with length (loss at top× minus 1× block_size) of a, minus b's if given."""
        exps = [a] if b is None else [a, b]
        hi, lo = f"length:{top}", "length:1"
        if not all(self.m.has(e) for e in exps):
            return None
        if self._has_samples(exps, hi) and self._has_samples(exps, lo):
            return self.paired(difference_quantity(hi, lo), [hi, lo], self.runs(a), self.runs(b) if b else ())
        ga, gb = self.scalar_growth(a, top), self.scalar_growth(b, top) if b else 0.0
        if ga is None or gb is None:
            return None
        hi_key, lo_key = loss_at_key(top), loss_at_key(1)
        base = [r[hi_key] - r[lo_key] for r in self.m.nested.get(self.reference, {}).values()
                if r.get(hi_key) is not None and r.get(lo_key) is not None]
        sd, df = seed_spread(base)
        return self.interval.combine(ga - gb, 0.0, sd * math.sqrt(1 + (1 if b else 0)), df)

    def scalar_growth(self, exp: str, top: int) -> float | None:
        """Mean over seeds of loss at top× block_size minus at 1× (metrics.json alone, no interval)."""
        hi, lo = self.m.mean(exp, loss_at_key(top)), self.m.mean(exp, loss_at_key(1))
        return None if hi is None or lo is None else hi - lo

    def preference(self, exp: str) -> Estimate | None:
        """Share of minimal pairs where exp prefers the true order, minus chance (0.5), with its interval."""
        if not self.m.has(exp):
            return None
        if self._has_samples([exp], "pairs"):
            return self.paired(lambda s, idx: minus(s.mean("pairs", idx.get("pairs")), 0.5), ["pairs"], self.runs(exp))
        v = self.m.mean(exp, "order_preference")
        if v is None:
            return None
        sd, df = seed_spread(self.m.values(self.reference, "order_preference"))
        return self.interval.combine(v - 0.5, 0.0, sd / math.sqrt(len(self.m.values(exp, "order_preference"))), df)

    def scalar_effect(self, a: str, b: str | None, key: str) -> Estimate | None:
        """From metrics.json alone: the seed part of the interval (used for quantities with no per-window samples:
        attention entropy, hidden-state uniformity, final train loss)."""
        va, vb = self.m.values(a, key), self.m.values(b, key) if b else []
        if not va or (b and not vb):
            return None
        sd, df = seed_spread(self.m.values(self.reference, key))
        value = statistics.fmean(va) - (statistics.fmean(vb) if b else 0.0)
        return self.interval.combine(value, 0.0, sd * math.sqrt(1 / len(va) + (1 / len(vb) if b else 0.0)), df)

    def count_effect(self, a: str, b: str, key: str) -> Estimate | None:
        """Difference of two event counts (loss spikes): a Poisson error √(count) on each side."""
        ca, cb = self.m.mean(a, key), self.m.mean(b, key)
        if ca is None or cb is None:
            return None
        return self.interval.combine(ca - cb, math.sqrt(max(ca, 1.0) + max(cb, 1.0)), 0.0, 0)

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
            if not self._has_samples([a, b], source):
                break
            out.append((step, self.paired(source_quantity(source), [source], self.runs(a), self.runs(b))))
        return out

    def changing(self, a: str, b: str) -> bool:
        points = self.curve(a, b)
        return len(points) >= 2 and still_changing(points[-2][1], points[-1][1])

    # --- the learning-rate sweeps -------------------------------------------------------------------------------------

    def best_lr_run(self, exp: str) -> str | None:
        """The run of exp's sweep (itself included) with the lowest val loss: a capacity claim's fair representative."""
        sweep = self.sweeps.get(exp, [(exp, math.nan)])
        runs = [name for name, _ in sweep if self.m.mean(name, "val_loss") is not None]
        finite = [r for r in runs if math.isfinite(self.m.mean(r, "val_loss"))]
        return min(finite, key=lambda r: self.m.mean(r, "val_loss")) if finite else None

    def trains(self, run: str) -> bool:
        """Neither diverged nor at the unigram loss (when the unigram loss is known)."""
        v = self.m.mean(run, "val_loss")
        stuck = v is not None and self.unigram is not None and v >= self.unigram - self.cfg.unigram_margin
        return v is not None and not self.m.any_true(run, "diverged") and not stuck

    def stability_map(self) -> dict[tuple[str, bool], dict[float, dict]]:
        """(norm, warm-up) -> learning rate -> {val_loss, diverged, stuck (within unigram_margin of the unigram)}."""
        out: dict[tuple[str, bool], dict[float, dict]] = {}
        for row, exp in STABILITY_ROWS.items():
            for name, lr in self.sweeps.get(exp, []):
                v = self.m.mean(name, "val_loss")
                if v is None:
                    continue
                stuck = self.unigram is not None and v >= self.unigram - self.cfg.unigram_margin
                diverged = self.m.any_true(name, "diverged")
                out.setdefault(row, {})[lr] = {"run": name, "val_loss": v, "diverged": diverged, "stuck": bool(stuck)}
        return out

    def text(self, e: Estimate | None) -> str:
        return "n/a" if e is None else e.text()


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
        v, base = m.mean(exp, "val_loss"), m.mean(ev.reference, "val_loss")
        e = ev.effect(exp, ev.reference) if groups.get(exp) != "objective" else None
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
                       f"(baseline {base:.3f})")
            v, e = restored, None
            delta = None if base is None else restored - base
        elif ev.unigram is not None and v >= ev.unigram - ev.cfg.unigram_margin:
            outcome = f"stuck at the unigram loss ({ev.unigram:.3f}): learned no use of context"
        else:
            outcome = {"reproduced": "worse than the baseline", "not reproduced": "better than the baseline",
                       "within noise": "within noise of the baseline", "not run": "no interval"}[greater(e)]
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
