"""The published claims the study checks, as a table: what is claimed, where, which runs it reads, how it is judged.

Most claims compare one measured quantity between two runs under one rule of stats.py (greater, equivalent,
at most): they are a row built by ``compare``. The rest need more than one comparison (a U-shape, a claim judged at
each variant's best learning rate, two effects that must both hold) and name a function below, which returns the
same ``Judgement``. Adding a claim is adding a row; every row goes through the same verdict rule, and the experiments
a row names are the ones params.yaml must define (``required_experiments``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

from miniformer.errors import UserError
from miniformer.layout import loss_at_key, multiple_of_key
from miniformer.runtime.spikes import SPIKE_RISE, SPIKE_WINDOW
from miniformer.study.findings import Evidence, Finding, Judgement, seeds_training, stuck_runs
from miniformer.study.roles import (
    HEAD_ENDS,
    HEAD_RUNS,
    LEARNED_TOKEN_SCALE,
    NO_MASK,
    PAPER_HEADS,
    REFERENCE,
    VASWANI_HEAD_WIDTH,
)
from miniformer.study.stats import (
    OWN_SPREAD_SEEDS,
    Estimate,
    Samples,
    Spread,
    all_of,
    at_most,
    difference_quantity,
    equivalent,
    greater,
    minus,
    rank_test,
    seed_spread,
    source_quantity,
    z_quantile,
)

Judge = Callable[[Evidence], Judgement]


# How our measurement relates to the source's. Only the first three count towards the verdict totals; a proxy or a
# control is shown with its verdict, labelled, and kept out of them.
TESTS = {
    "paper": "the paper's test",  # the source's manipulation and measure (held-out loss for its perplexity), our budget
    "direct": "direct measurement",  # the source argues a mechanism and runs no test of it; we measure that mechanism
    "structural": "by construction",  # holds or fails exactly, whatever the seed
    "proxy": "proxy",  # another measure than the source's: says something, but not what the source tested
    "control": "control",  # must come out equal by a symmetry of the code; it checks the code, not the claim
}
COUNTED = ("paper", "direct", "structural")


# what our sinusoidal arm is, on every row that reads it: not Vaswani's table added raw, but the same table times one
# learned scalar — a reader comparing with a source should know the arm can rescale its positions
SINUSOIDAL_NOTE = ("; the sinusoidal arm is the fixed table times one learned scalar, as x-transformers' "
                   "ScaledSinusoidalEmbedding, here starting at 1 (Vaswani's scale), not Vaswani's table added "
                   "unscaled")


def peer_gaps(ev: Evidence, a: str, b: str) -> dict[str, float]:
    """a − b in the peer's runs (the cross-check) per init ("ours", "own"); empty where it did not run both."""
    pa, pb = ev.peer.get(a, {}), ev.peer.get(b, {})
    return {init: pa[init] - pb[init] for init in ("ours", "own") if None not in (pa.get(init), pb.get(init))}


def sinusoidal_calibration(ev: Evidence) -> tuple[bool, str]:
    """Press's table has sinusoidal ≈ rotary in distribution (20.05 vs 20.07 PPL at L = 512): whether this run's
    sinusoidal arm misses that by more than the equivalence margin, and the sentence that says so — with the peer's
    same gap where the cross-check ran, which tells a property of this setting (the peer lags too) from one of our
    arm (it does not)."""
    check = ev.effect("pos_sinusoidal", REFERENCE) if ev.m.has(REFERENCE) else None
    if check is None or check.low <= ev.cfg.equivalence_margin:
        return False, ""
    text = (f"the sinusoidal arm is {ev.text(check)} behind RoPE in distribution, where Press measure sinusoidal and "
            "rotary equal (20.05 vs 20.07 PPL)")
    gaps = peer_gaps(ev, "pos_sinusoidal", REFERENCE)
    if not gaps:
        return True, text + (" (no cross-check in this run tells a fault of our arm from its design: the default "
                             "profile's `make crosscheck` trains the peer's)")
    peer = ", ".join(f"{g:+.3f} under {'our' if init == 'ours' else 'its own'} init" for init, g in gaps.items())
    if all(g > ev.cfg.equivalence_margin for g in gaps.values()):
        return True, (f"{text}; the peer's arm of the same design lags its RoPE too ({peer}): not a fault of our "
                      "code (Vaswani's unscaled table was not run)")
    return True, f"{text}; the peer's does not ({peer}): our arm is weaker than the method"


def sinusoidal_note(ev: Evidence) -> str:
    """What our sinusoidal arm is, and whether it passes the check Press's table gives it: a reader of any row
    comparing with it should know how it stands against rotary here."""
    fails, text = sinusoidal_calibration(ev)
    return f"{SINUSOIDAL_NOTE}; {text}" if fails else SINUSOIDAL_NOTE


@dataclass(frozen=True)
class Claim:
    claim: str
    source: str
    runs: tuple[str, ...]  # the experiments the judgement reads
    judge: Judge
    test: str  # a key of TESTS
    source_numbers: str  # what the source itself reports, from its own table or figure
    every_run: bool = False  # the judgement also ranks every other run of the study, not only those named in `runs`
    # the source's models were trained to convergence: read at our budget, every verdict on it is marked so, and one
    # whose effect is still changing is untested at convergence, whichever way it came out
    converged: bool = False
    # runs of `runs` a profile may leave out (an arm only the long profile trains): without one the row can fail on
    # the others, never hold, and says which arm did not run
    optional: tuple[str, ...] = ()
    # runs of `runs` the row shows where they ran but its verdict does not read (the head sweep's interior)
    shown: tuple[str, ...] = ()

    def finding(self, ev: Evidence) -> Finding:
        judged = self.judge(ev)
        if "pos_sinusoidal" in self.runs and judged.verdict != "not run":  # every row reading the arm says what it is
            judged.measurement += sinusoidal_note(ev)
        trend = last_move_word(ev, *judged.curve) if judged.curve else ""
        # the runs the verdict reads (not those only shown) with a seed that learned nothing: named wherever it shows
        read = [r for r in self.runs if r not in self.shown]
        stuck = tuple(stuck_runs(ev, read)) if judged.verdict != "not run" else ()
        return Finding(claim=self.claim, source=self.source, test=TESTS[self.test], counted=self.test in COUNTED,
                       source_numbers=self.source_numbers, resolves=resolution(judged), converged=self.converged,
                       trend=trend, stuck=stuck, **vars(judged))


def resolution(j: Judgement) -> str:
    """The smallest effect the claim's design resolves (the widest half-width among its estimates: the binding one)
    and which seed spread it used."""
    known = [(name, e) for name, e in j.estimates.items() if e is not None]
    if not known:
        return ""
    name, widest = max(known, key=lambda ne: ne[1].half_width)
    hw = "∞" if math.isinf(widest.half_width) else f"± {widest.half_width:.3f}"
    # named when the claim reads several: the row's headline estimate may be another, with a narrower interval
    which = [f"of {name}"] if len(known) > 1 else []
    said = ", ".join(which + ([widest.variance] if widest.variance else []))
    return f"{hw} ({said})" if said else hw


POWER_Z = 0.8416  # the normal quantile of 80 % power: a true effect of (z_{α/2} + this) × se is found 4 times in 5


def what_would_decide(e: Estimate, rule: str, margin: float) -> str:
    """For an undecided comparison: the effect the design would find with 80 % power (1.43 × its half-width at 95 %),
    and about how many seeds per run would bring that down to the effect the claim turns on."""
    z = z_quantile(e.confidence)
    detectable = e.half_width * (z + POWER_Z) / z
    if rule in ("greater", "less"):
        target = abs(e.value)
        text = f"; with 80 % power this design finds effects of ± {detectable:.3f} or more"
    else:
        target = margin - abs(e.value) if rule == "equivalent" else margin - e.value
        text = f"; showing it needs a half-width under the distance to the ± {margin} band"
        if target <= 0:
            return (f"; the point estimate lies beyond the ± {margin} band, the interval still reaches inside it: "
                    "only a narrower interval can tell (more seeds), and at this budget the effect itself may still "
                    "move (a longer run)")
    n = e.seeds_to_resolve(target * z / (z + POWER_Z)) if target > 0 else None
    if n is not None and n <= 1000:
        text += (f" (≈ {n} seeds per run to find an effect of {target:.3f} with 80 % power, at this design's t: more "
                 "seeds also lower t, so somewhat fewer may do)")
    return text


# --- the one-comparison claims ---------------------------------------------------------------------------------------

# rule name -> the verdict of an estimate, and what the measurement says the rule is; the margin comes from params
RULES: dict[str, Callable[[Evidence, Estimate | None], str]] = {
    "greater": lambda ev, e: greater(e),
    "equivalent": lambda ev, e: equivalent(e, ev.cfg.equivalence_margin),
    "at_most": lambda ev, e: at_most(e, ev.cfg.equivalence_margin),
}
RULE_NOTES = {"greater": "", "equivalent": " (rule: equivalent if within ± {m})", "at_most": " (rule: holds if ≤ {m})"}


def rule_boundaries(rule: str, margin: float) -> tuple[float, ...]:
    """Where a rule's verdict turns: an effect must cross one of these to change it."""
    return {"greater": (0.0,), "equivalent": (-margin, margin), "at_most": (margin,)}[rule]


# The quantities with per-window (or per-item) samples, so a paired-bootstrap interval: metrics.json key -> source.
SAMPLED = {"val_loss": "val", "recovery_accuracy": "probe", "finetune_accuracy": "finetune"}


def compare(a: str, b: str, rule: str, label: str, key: str = "val_loss", quantity: str = "val loss",
            unit: str = "", advise: bool = True) -> Judge:
    """a − b of one metrics.json quantity judged by ``rule``. Sampled quantities carry the paired-bootstrap + seed
    interval, the others the seed part alone; a val-loss effect is also followed over training. ``advise``: an
    undecided row says what would decide it (off where the spread is not normal, which the seed count assumes)."""

    def judge(ev: Evidence) -> Judgement:
        e = ev.effect(a, b, source=SAMPLED[key], key=key) if key in SAMPLED else ev.scalar_effect(a, b, key)
        note = RULE_NOTES[rule].format(m=ev.cfg.equivalence_margin)
        followed = key == "val_loss"
        trend = gap_over_training(ev, a, b) if followed else ""
        verdict = RULES[rule](ev, e)
        undecided = advise and verdict == "undecided" and e is not None
        decide = what_would_decide(e, rule, ev.cfg.equivalence_margin) if undecided else ""
        return Judgement(f"{label} {quantity} = {ev.text(e)}{unit}{note}{trend}{decide}", verdict, {label: e},
                         followed and ev.changing(a, b), (a, b) if followed else None,
                         boundaries=rule_boundaries(rule, ev.cfg.equivalence_margin))

    return judge


FLAT_DECAYING = "flat as the rate decays"


def gap_over_training(ev: Evidence, a: str, b: str) -> str:
    """Which way a val-loss gap moves: its value at the first and the last curve point (a verdict at the study's
    budget can be about learning speed, not capacity; this says which way it is heading)."""
    points = [(step, e) for step, e in ev.curve(a, b) if e is not None]
    if len(points) < 2:
        return ""
    (s0, first), (s1, last) = points[0], points[-1]
    if abs(last.value - first.value) <= max(first.half_width, last.half_width):
        way = "no change its intervals resolve"
    else:
        way = "wider than at the start" if abs(last.value) > abs(first.value) else "closer than at the start"
    # first against last hides a gap that opened and is closing again: name the widest point when it lies between
    s_peak, peak = max(points, key=lambda p: abs(p[1].value))
    if s_peak not in (s0, s1):
        way += f"; widest {peak.value:+.3f} at step {s_peak}"
    text = f"; over training {first.value:+.3f} at step {s0} → {last.value:+.3f} at step {s1} ({way})"
    move = ev.trend_move(a, b)
    if move is not None:
        since, e, is_pace = move
        moving = last_move_word(ev, a, b)
        moving = moving if moving in ("settled", FLAT_DECAYING) else f"still changing: {moving}"
        k, at_peak = ev.trend_point(a, b)
        to = ev.runs(a)[0].curve_steps()[k]
        if is_pace:
            how = f"from step {since} to {to} at the peak rate it moved {ev.text(e)} per 100 steps (the slope over "
            how += "three points)"
        else:
            where = "" if k == len(ev.runs(a)[0].curve_steps()) - 1 else ", the last stretch at the peak rate"
            how = f"from step {since} to {to}{where} it moved {ev.text(e)}"
        text += f"; {how}, paired over windows and seeds ({moving})"
    return text


def last_move_word(ev: Evidence, a: str, b: str) -> str:
    """Which way the val-loss gap a − b moves into its trend point (Evidence.trend_move: its pace over three
    peak-rate points, else its last move): "closing" or "widening" when the move's interval excludes no move (toward
    zero, or away from it); when it does not, "settled" where both rates
    were still at their peak, "flat as the rate decays" where they were not (a decaying rate's tail moves little
    whatever the model would still do: no sign of a plateau); "" without a curve."""
    move, points = ev.trend_move(a, b), [e for _, e in ev.curve(a, b) if e is not None]
    if move is None or not points:
        return ""
    if greater(move[1]) == "undecided":
        return "settled" if ev.trend_point(a, b)[1] else FLAT_DECAYING
    return "closing" if (move[1].value > 0) != (points[-1].value > 0) else "widening"


# --- the compound claims ---------------------------------------------------------------------------------------------


def _head_width(ev: Evidence, h: int) -> str:
    return f" (d {ev.n_embd // h})" if ev.n_embd else ""


def _head_ends(ev: Evidence, high: int, caveat: str) -> Judgement:
    """One head (the sweep's low end) and ``high`` heads, each against the reference's 4 heads, which runs every
    seed: not against the best interior arm, since picking the lowest of several arms after the fact would favour a
    lucky seed. Every count that ran is shown."""
    m = ev.m
    low = min(HEAD_RUNS)
    best = next(h for h, e in HEAD_RUNS.items() if e == REFERENCE)
    if not all(m.has(HEAD_RUNS[h]) for h in (low, best, high)):
        return Judgement("head-count runs missing", "not run")
    low_end, high_end = ev.effect(HEAD_RUNS[low], HEAD_RUNS[best]), ev.effect(HEAD_RUNS[high], HEAD_RUNS[best])
    absent = [f"h={h}" for h, e in HEAD_RUNS.items() if not m.has(e)]
    text = (", ".join(f"h={h}{_head_width(ev, h)}: {_fmt(m.mean(e, 'val_loss'))}" for h, e in HEAD_RUNS.items()
                      if m.has(e))
            + (f" ({', '.join(absent)} not run in this profile)" if absent else "")
            + f"; h={low} − h={best}: {ev.text(low_end)}; h={high} − h={best}: {ev.text(high_end)}. {caveat}")
    thin = [f"h={h}" for h in (low, high) if 0 < len(m.values(HEAD_RUNS[h], "val_loss")) < OWN_SPREAD_SEEDS]
    if thin:  # an end judged on a borrowed spread: the verdict assumes that arm varies over seeds as the pool does
        text += (f"; {' and '.join(thin)} ran too few seeds for a spread of {'its' if len(thin) == 1 else 'their'} "
                 "own: the interval borrows the pool's")
    changing, curve = followed(ev, [(HEAD_RUNS[low], HEAD_RUNS[best]), (HEAD_RUNS[high], HEAD_RUNS[best])])
    return Judgement(text, all_of([greater(low_end), greater(high_end)]),
                     {f"h={low} − h={best}": low_end, f"h={high} − h={best}": high_end}, changing, curve)


# Vaswani's Table 3 (A), dev perplexity by head count h (head width d_k = 512 / h): what each reading of the U
# predicts for an interior arm of ours (the sign of h − the reference's 4 heads)
VASWANI_HEADS_PPL = {1: 5.29, 4: 5.00, 8: 4.92, 16: 4.91, 32: 5.01}
VASWANI_D_MODEL = 512


def _vaswani_readings(ev: Evidence, h: int, best: int) -> str:
    """What Vaswani's table predicts for h − best here, read by head count and by head width (the same count is
    another width at our n_embd): where the two readings disagree, the arm cannot test the U's far side."""
    parts = []
    if h in VASWANI_HEADS_PPL and best in VASWANI_HEADS_PPL:
        parts.append(f"by head count Vaswani's h={h} − h={best} = "
                     f"{math.log(VASWANI_HEADS_PPL[h] / VASWANI_HEADS_PPL[best]):+.3f} nats")
    if ev.n_embd:
        by_width = {VASWANI_D_MODEL // k: ppl for k, ppl in VASWANI_HEADS_PPL.items()}
        mine, ref = ev.n_embd // h, ev.n_embd // best
        if mine in by_width and ref in by_width:
            parts.append(f"by head width (d {mine} − d {ref}) {math.log(by_width[mine] / by_width[ref]):+.3f}")
        else:
            parts.append(f"by head width none (d {mine} is outside Vaswani's {min(by_width)}–{max(by_width)})")
    return "; ".join(parts)


def single_head_worse(ev: Evidence) -> Judgement:
    """The U's near side, the part both readings of Vaswani's table agree on: one head (all of n_embd) worse than
    the reference's 4 (by count +0.056 nats, by width +0.018). Its far side — "quality also drops off with too many
    heads" — is against Vaswani's best arm, and at n_embd 128 the arms read it two ways: h=8 is Vaswani's h=8 by count
    (better than h=4) and his h=32 by width (worse). So the far side is shown with both predictions, not judged; the
    sweep's 32 heads, 4 wide, are a proxy row of their own."""
    m = ev.m
    low = min(HEAD_RUNS)
    best = next(h for h, e in HEAD_RUNS.items() if e == REFERENCE)
    if not (m.has(HEAD_RUNS[low]) and m.has(HEAD_RUNS[best])):
        return Judgement("head-count runs missing", "not run")
    low_end = ev.effect(HEAD_RUNS[low], HEAD_RUNS[best])
    text = (f"h={low}{_head_width(ev, low)} − h={best}{_head_width(ev, best)}: {ev.text(low_end)} "
            f"({_vaswani_readings(ev, low, best)})")
    interior = [h for h in HEAD_RUNS if h > best and m.has(HEAD_RUNS[h])]
    for h in interior:  # the far side, shown with what each reading of the paper predicts for it
        text += (f"; shown: h={h}{_head_width(ev, h)} − h={best}: {ev.text(ev.effect(HEAD_RUNS[h], HEAD_RUNS[best]))} "
                 f"({_vaswani_readings(ev, h, best)})")
    if interior:
        text += ("; the far side of the U is not judged: at this width the two readings of Vaswani's table predict "
                 "opposite signs or none")
    if 0 < len(m.values(HEAD_RUNS[low], "val_loss")) < OWN_SPREAD_SEEDS:
        text += f"; h={low} ran too few seeds for a spread of its own: the interval borrows the pool's"
    changing, curve = followed(ev, [(HEAD_RUNS[low], HEAD_RUNS[best])])
    return Judgement(text, greater(low_end), {f"h={low} − h={best}": low_end}, changing, curve,
                     boundaries=rule_boundaries("greater", ev.cfg.equivalence_margin))


def head_u_shape(ev: Evidence) -> Judgement:
    """The sweep's ends, 1 and 32 heads, against the reference's 4. At the study's width 32 heads are narrower than
    any Vaswani trained, and under RoPE a head of width d rotates d/2 frequency pairs: a proxy for 'too many heads'
    that cannot separate it from 'too narrow heads' or 'too few frequencies'."""
    high = max(HEAD_RUNS)
    best = next(h for h, e in HEAD_RUNS.items() if e == REFERENCE)
    narrow = ev.n_embd is not None and ev.n_embd // high < VASWANI_HEAD_WIDTH
    ends = _head_ends(ev, high, (f"{high} heads here are {ev.n_embd // high} wide, narrower than Vaswani's narrowest "
                                 f"({VASWANI_HEAD_WIDTH}): " if narrow else "")
                      + "with RoPE a head of width d rotates d/2 frequency pairs, so the many-heads end also has the "
                      "fewest positional frequencies per head: this sweep does not separate 'too many heads' from "
                      "'too few RoPE frequencies'")
    # the source's own far end against the same comparator: his table shows almost no rise there, so a rise here
    # is the narrow heads' (or the few frequencies'), not his U's far side; said beside the verdict, whichever it is
    if high in VASWANI_HEADS_PPL and best in VASWANI_HEADS_PPL:
        top = min(VASWANI_HEADS_PPL, key=VASWANI_HEADS_PPL.get)
        ends.measurement += (
            f"; Vaswani's own h={high} − h={best} is {math.log(VASWANI_HEADS_PPL[high] / VASWANI_HEADS_PPL[best]):+.3f}"
            f" nats (his far side rises only against his best count: h={high} − h={top} = "
            f"{math.log(VASWANI_HEADS_PPL[high] / VASWANI_HEADS_PPL[top]):+.3f}), so a rise at this end is this "
            "setting's, not a reproduction of his U")
    return ends


# Press's Table 2 evaluates a model trained at L = 512 at 1012 and 2512 tokens (≈ 2× and 4.9× L): the claims judge at
# the evaluated multiples nearest those, 2× and 4×. 8× lies beyond every length Press judge: shown, not judged.
PRESS_MULTIPLES = (2, 4)


def _press_lengths(ev: Evidence, exps: tuple[str, ...]) -> list[int]:
    """Press's lengths among the multiples past block_size every run of exps was evaluated at; else the shortest
    such multiple."""
    found = [{multiple_of_key(k) for k in r} - {None} for e in exps for r in ev.m.nested.get(e, {}).values()]
    past = sorted(m for m in set.intersection(*found) if m > 1) if found else []
    return [m for m in past if m in PRESS_MULTIPLES] or past[:1]


# Press's Table 2 at 1012 tokens (L = 512): sinusoidal grows by ln(43.54 / 20.05), rotary by ln(21.37 / 20.07) —
# sinusoidal − rotary ≈ 0.71 nats per (word-level) token, the magnitude our character-level interval is set beside.
PRESS_SIN_MINUS_ROPE_AT_2X = math.log(43.54 / 20.05) - math.log(21.37 / 20.07)
PRESS_ARMS = (("sinusoidal", "pos_sinusoidal"), ("rope", REFERENCE), ("alibi", "pos_alibi"))


def _growth_per_seed(ev: Evidence, at: int) -> str:
    """Each Press arm's growth seed by seed: where an interval is wide, the reader sees whose growth varies."""
    def seeds(exp: str) -> str:
        runs = ev.m.nested.get(exp, {}).values()
        growth = [r[loss_at_key(at)] - r[loss_at_key(1)] for r in runs
                  if isinstance(r.get(loss_at_key(at)), float) and isinstance(r.get(loss_at_key(1)), float)]
        return " / ".join(f"{g:.2f}" for g in growth) or "n/a"

    return ", ".join(f"{name} {seeds(exp)}" for name, exp in PRESS_ARMS)


def _absolute(ev: Evidence, at: int) -> str:
    """The three arms' whole-window loss at this multiple (mean over seeds), and whether it keeps Press's order."""
    loss = {k: ev.m.mean(e, loss_at_key(at)) for k, e in PRESS_ARMS}
    text = ", ".join(f"{k} {_fmt(v)}" for k, v in loss.items())
    if None in loss.values():
        return text
    if at == 1:  # in distribution Press measure the three about equal: no order to hold
        return text
    kept = loss["sinusoidal"] > loss["rope"] > loss["alibi"]
    return f"{text} ({'Press' if kept else 'not Press'}'s order)"


def _beyond_press(ev: Evidence, lengths: list[int]) -> str:
    """Growth past Press's lengths, shown and not judged; where the sinusoidal arm's loss has reached the unigram
    level its growth is capped there, so RoPE growing more is that ceiling, not an order reversed."""
    multiples = sorted({multiple_of_key(k) for r in ev.m.nested.get(REFERENCE, {}).values() for k in r} - {None})
    out = []
    for m in (m for m in multiples if m > max(lengths)):
        growth = {k: ev.scalar_growth(e, m) for k, e in PRESS_ARMS[:2]}
        text = f"at {m}×: sinusoidal {_fmt(growth['sinusoidal'])}, RoPE {_fmt(growth['rope'])}"
        sinusoidal = ev.m.mean("pos_sinusoidal", loss_at_key(m))
        windows = [r.size(f"length:{m}") for r in ev.runs("pos_sinusoidal")]
        capped = None not in (sinusoidal, ev.unigram) and sinusoidal >= ev.unigram - ev.cfg.unigram_margin
        if None not in growth.values() and growth["rope"] > growth["sinusoidal"]:
            text += (f" (RoPE grows more: sinusoidal's loss {_fmt(sinusoidal)} has reached the unigram level "
                     f"{_fmt(ev.unigram)} and cannot grow further — a ceiling, not a reversal)" if capped else
                     " (RoPE grows more)")
        if windows and None not in windows:
            text += f" on {windows[0]} windows per run"
        out.append(text + f"; absolute loss {_absolute(ev, m)}")
    return "; ".join(out)


def extrapolation_order(ev: Evidence) -> Judgement:
    """Press 2022: growth of the whole-window loss from 1× to each of Press's lengths, sinusoidal > RoPE > ALiBi at
    every one of them (Press find the order at both). Press compare absolute perplexity: the absolute losses are
    shown beside the growth, and the size of Press's own sinusoidal − rotary difference beside ours."""
    lengths = _press_lengths(ev, ("pos_sinusoidal", REFERENCE, "pos_alibi"))
    if not lengths:
        return Judgement("no length past block_size evaluated", "not run")
    estimates, parts = {}, []
    for at in lengths:
        sin_vs_rope, rope_vs_alibi = ev.growth("pos_sinusoidal", "baseline", at), ev.growth("baseline", "pos_alibi", at)
        estimates.update({f"sinusoidal − rope at {at}×": sin_vs_rope, f"rope − alibi at {at}×": rope_vs_alibi})
        growth = ", ".join(f"{k} {_fmt(ev.scalar_growth(e, at))}" for k, e in PRESS_ARMS)
        parts.append(f"at {at}×: {growth} (loss minus at 1×; per seed {_growth_per_seed(ev, at)}); sinusoidal − "
                     f"RoPE growth = {ev.text(sin_vs_rope)}; RoPE − ALiBi growth = {ev.text(rope_vs_alibi)}; absolute "
                     f"loss {_absolute(ev, at)}")
    parts.insert(0, f"absolute loss at 1× {_absolute(ev, 1)}: an absolute order past the block inherits this gap, so "
                    "the growth is what is judged")
    at2 = estimates.get("sinusoidal − rope at 2×")
    magnitude = ""
    if at2 is not None:
        magnitude = (f". For scale, Press's own sinusoidal − rotary growth at 1012 tokens is "
                     f"+{PRESS_SIN_MINUS_ROPE_AT_2X:.2f} nats per word-level token, a unit several characters long: "
                     "the sign carries over to ours, the size does not")
    further = _beyond_press(ev, lengths)
    by_heads = _rope_growth_by_heads(ev, lengths)
    if by_heads:  # RoPE's degradation varies with the head count in this study: the reader should see how
        parts.append(f"RoPE here is the reference, {REFERENCE} (4 heads of width n_embd / 4); {by_heads}")
    text = ("; ".join(parts) + f". Judged at {' and '.join(f'{m}×' for m in lengths)} (Press's 1012 and 2512 tokens "
            "for L = 512), the order needed at each" + magnitude + (f"; further out, not judged: {further}"
                                                                   if further else ""))
    return Judgement(text, all_of([greater(e) for e in estimates.values()]), estimates)


def _rope_growth_by_heads(ev: Evidence, lengths: list[int]) -> str:
    """RoPE's loss growth past the block at every head count that ran (fixed width: heads of n_embd / h, RoPE's
    frequencies spread over each head's width), and whether it rises with the head count — a reading of the
    head width that the two ends alone would overstate."""
    heads = [h for h in sorted(HEAD_RUNS) if ev.m.has(HEAD_RUNS[h])]
    if len(heads) < 2:
        return ""
    rows, monotone = [], True
    for at in lengths:
        growth = [ev.scalar_growth(HEAD_RUNS[h], at) for h in heads]
        if None in growth:
            continue
        rising = all(a <= b for a, b in zip(growth, growth[1:]))
        monotone &= rising
        rows.append(f"at {at}×: " + ", ".join(f"h={h} {g:.3f}" for h, g in zip(heads, growth))
                    + ("" if rising else " (not monotone in h)"))
    if not rows:
        return ""
    seeds = ", ".join(f"h={h} {len(ev.m.values(HEAD_RUNS[h], 'val_loss'))}" for h in heads)
    if monotone and len(heads) < 3:  # two points make a difference, not a trend
        verdict = (f"h={heads[-1]} grows more than h={heads[0]} here (two head counts: no trend in h is claimed; the "
                   "long profile sweeps more)")
    else:
        verdict = ("it rises with the head count at every length" if monotone else
                   "it does not rise steadily with the head count, so the head width alone does not explain RoPE's "
                   "growth here")
    return f"RoPE's growth by head count (loss minus at 1×, seeds: {seeds}): {'; '.join(rows)} — {verdict}"


def alibi_flat(ev: Evidence) -> Judgement:
    """Press 2022: ALiBi's own loss does not grow from 1× to Press's lengths."""
    lengths = _press_lengths(ev, ("pos_alibi",))
    if not lengths:
        return Judgement("no length past block_size evaluated", "not run")
    growth = {at: ev.growth("pos_alibi", None, at) for at in lengths}
    text = "; ".join(f"ALiBi loss growth at {at}× = {ev.text(e)}" for at, e in growth.items())
    return Judgement(f"{text} (flat: each ≤ {ev.cfg.equivalence_margin})",
                     all_of([at_most(e, ev.cfg.equivalence_margin) for e in growth.values()]),
                     {f"alibi growth at {at}×": e for at, e in growth.items()})


def t5_like_alibi(ev: Evidence) -> Judgement:
    """Press 2022: T5's bucketed bias grows past the training length about as little as ALiBi at 1012 tokens (2×);
    further out it falls behind in Press's own table, which the row shows and does not judge."""
    lengths = _press_lengths(ev, ("pos_t5", "pos_alibi"))
    if 2 not in lengths:
        return Judgement("no loss at 2× block_size for both runs", "not run")
    gap = ev.growth("pos_t5", "pos_alibi", 2)
    further = "; ".join(f"at {m}×: T5 {_fmt(ev.scalar_growth('pos_t5', m))}, ALiBi "
                        f"{_fmt(ev.scalar_growth('pos_alibi', m))}" for m in lengths if m > 2)
    return Judgement(f"T5 − ALiBi loss growth at 2× = {ev.text(gap)} (holds if ≤ {ev.cfg.equivalence_margin})"
                     + (f"; further out, not judged (Press find T5 behind there too): {further}" if further else ""),
                     at_most(gap, ev.cfg.equivalence_margin), {"T5 − ALiBi growth at 2×": gap})


def learned_cannot_extrapolate(ev: Evidence) -> Judgement:
    """Structural: the learned table has no vector past block_size, so every longer length must be undefined."""
    past = [v for r in ev.m.nested.get("pos_learned", {}).values() for k, v in r.items()
            if (multiple_of_key(k) or 0) > 1]
    undefined = bool(past) and all(v is None for v in past)
    text = "loss past block_size: " + ("undefined at every length (the model raises)" if undefined else "defined")
    return Judgement(text, "not run" if not past else ("reproduced" if undefined else "contradicted"))


# Haviv 2022 Table 1's arms with positions, against which its NoPE model is "close" (RoPE was not among them); the
# learned arm is the table stored like the tokens (the raw one barely moves in 300 steps: the learned row).
HAVIV_ARMS = {"learned": LEARNED_TOKEN_SCALE, "sinusoidal": "pos_sinusoidal", "ALiBi": "pos_alibi"}


def followed(ev: Evidence, pairs: list[tuple[str, str]]) -> tuple[bool, tuple[str, str] | None]:
    """The trend of a claim that compares several val-loss pairs: still changing when any pair is, and the pair the
    report follows over training (the first still changing, else the first)."""
    pairs = [(a, b) for a, b in pairs if ev.m.has(a) and ev.m.has(b)]
    moving = [p for p in pairs if ev.changing(*p)]
    return bool(moving), (moving or pairs or [None])[0]


HAVIV_SMALLEST = 125e6  # parameters of the smallest model Haviv et al. 2022 train


def nope_close(ev: Evidence) -> Judgement:
    """Haviv 2022 T1: a causal LM without positions is not worse than each of the paper's arms with positions by more
    than the equivalence margin (nats per character here; the paper's gaps are per token of WikiText-103, whose
    tokens are words, so several times smaller per character)."""
    ran = {name: exp for name, exp in HAVIV_ARMS.items() if exp != LEARNED_TOKEN_SCALE or ev.m.has(exp)}
    gaps = {name: ev.effect("pos_none", exp) for name, exp in ran.items()}
    rope = ev.effect("pos_none", REFERENCE)
    text = "; ".join(f"NoPE − {name} val loss = {ev.text(e)}{gap_over_training(ev, 'pos_none', ran[name])}"
                     for name, e in gaps.items())
    text += (f" (holds if each ≤ {ev.cfg.equivalence_margin:.3g} nats per {ev.unit}); not one of Haviv's arms: NoPE − "
             f"RoPE = {ev.text(rope)}")
    verdicts = [at_most(e, ev.cfg.equivalence_margin) for e in gaps.values()]
    missing = [name for name in HAVIV_ARMS if name not in ran]
    if missing and verdicts:  # the claim can fail on the arms that ran, but not hold without every arm
        verdicts.append("undecided")
        text += f"; not run in this profile: the {', '.join(missing)} arm (the long profile runs it)"
    if gaps and 0 < len(ev.m.values("pos_none", "val_loss")) < OWN_SPREAD_SEEDS:  # too few for a spread of its own
        text += ("; NoPE runs too few seeds here for a spread of its own: its intervals borrow the pool's, which "
                 "assumes a model without positions varies over seeds as the others do (three seeds test it: the long "
                 "profile runs three, and the two-budget table gives the interval they make)")
    n_params = ev.m.mean("pos_none", "n_params")
    if gaps and n_params:  # what a verdict here can say of Haviv's: his models are two orders of magnitude larger
        text += (f"; tested at {n_params / 1e6:.2f} M parameters, about {HAVIV_SMALLEST / n_params:.0f}× below the "
                 "smallest model Haviv et al. train, by character: a gap here says NoPE lags at this scale, not that "
                 "it lags at theirs (the claims × settings table follows the gap with model size)")
    changing, curve = followed(ev, [("pos_none", exp) for exp in ran.values()])
    return Judgement(text, all_of(verdicts), {f"NoPE − {k}": e for k, e in gaps.items()}, changing, curve,
                     boundaries=rule_boundaries("at_most", ev.cfg.equivalence_margin))


def alibi_not_winning_short(ev: Evidence) -> Judgement:
    """Press 2022 T5: at short L, sinusoidal is not behind ALiBi in distribution — judged against Press's own
    comparator, sinusoidal, in a setting where it ties rotary (Press's table: 20.05 vs 20.07 at L = 512). Where it
    does not tie here, the claim is about a setting this one is not, whichever way the comparison comes out: the row
    is undecided and says why (a gate on contradictions alone would excuse one direction only). ALiBi against RoPE,
    the study's reference, is printed beside it."""
    j = compare("pos_sinusoidal", "pos_alibi", "at_most", "sinusoidal − ALiBi")(ev)
    fails, calibration = sinusoidal_calibration(ev)
    if fails and j.verdict != "not run":
        j.why = "Press's calibration fails here"
        j.measurement = (f"undecided ({j.verdict} by the rule alone): Press's calibration does not hold here — "
                         f"{calibration} — so a comparison against sinusoidal is not one in Press's setting; "
                         f"{j.measurement}")
        j.verdict = "undecided"
    rope = ev.effect("pos_alibi", REFERENCE)
    if j.verdict != "not run" and rope is not None:
        beside = ("against RoPE, ALiBi does not win" if rope.low > 0 else
                  "ALiBi wins against RoPE too" if rope.high < 0 else "ALiBi and RoPE are not separated")
        j.measurement += (f"; against RoPE, the study's reference (Press measure rotary equal to sinusoidal in "
                          f"distribution): ALiBi − RoPE = {ev.text(rope)}: {beside}")
    return j


def learned_like_sinusoidal(ev: Evidence) -> Judgement:
    """Vaswani T3-E, judged on the learned table stored and scaled like the token table (pos_learned_token_scale):
    the parameterisation of BERT and GPT-2, one init for both tables and nothing between them, so the optimiser moves
    both at one rate. The raw table (pos_learned: added as stored, N(0, 1) per coordinate, beside tokens stored at
    1/√C and scaled by √C) is shown with how far each table moved over training: what separates the two arms."""
    if not ev.m.has("pos_learned"):
        return Judgement("the raw learned table (pos_learned) not run", "not run")
    label = "learned (stored like the tokens) − sinusoidal"
    j = compare(LEARNED_TOKEN_SCALE, "pos_sinusoidal", "equivalent", label)(ev)
    raw, between = ev.effect("pos_learned", "pos_sinusoidal"), ev.effect("pos_learned", LEARNED_TOKEN_SCALE)
    moved = {e: _fmt(ev.m.mean(e, "position_table_moved")) for e in ("pos_learned", LEARNED_TOKEN_SCALE)}
    raw_verdict = equivalent(raw, ev.cfg.equivalence_margin) if raw is not None else "not run"
    thin = 0 < len(ev.m.values("pos_learned", "val_loss")) < OWN_SPREAD_SEEDS
    decides = (" too" if raw_verdict in ("not run", j.verdict) else
               "; the arm stored like the tokens, which the claim is judged on, did not run in this profile"
               if j.verdict == "not run" else
               ": at this budget the init changes the verdict" + (" (the raw table ran one seed)" if thin else ""))
    j.measurement += (f"; the raw table (added as stored): learned − sinusoidal = {ev.text(raw)} ({raw_verdict} by "
                      f"the same rule{decides}), raw − stored like "
                      f"the tokens = {ev.text(between)}. Over training (RMS change over the initial RMS, in the scale "
                      f"each enters the model at) the raw table moved {moved['pos_learned']}, the token-scaled one "
                      f"{moved[LEARNED_TOKEN_SCALE]}, the token table "
                      f"{_fmt(ev.m.mean('pos_learned', 'token_table_moved'))}")
    to_rope = ev.effect(LEARNED_TOKEN_SCALE, REFERENCE) if ev.m.has(REFERENCE) else None
    if to_rope is not None and j.verdict != "not run":  # the equivalence is between two absolute tables: say where
        j.measurement += (f". Both absolute tables against RoPE: learned (stored like the tokens) − RoPE = "
                          f"{ev.text(to_rope)}; Vaswani's claim compares the two absolute tables only (no rotary in "
                          "it), so the sinusoidal arm's standing against rotary (below) does not enter this verdict")
    j.estimates = {**j.estimates, "raw learned − sinusoidal": raw}
    j.judged = (label,)  # the raw table is shown beside the verdict, not judged
    return j


def pair_floor(ev: Evidence) -> tuple[str | None, float | None]:
    """The highest share of minimal pairs a model without positions or without training prefers in the true order:
    a run stuck at the unigram loss (it can still lean one way by accident; not the no-mask run, which reads the
    characters it scores), or else the strongest character n-gram of the train split, read as the causal LM reads a
    pair (evaluation.order.FLOOR_ORDERS). (run name or None for the n-gram, its share)."""
    stuck = [(e, ev.m.mean(e, "order_preference")) for e in ev.m.nested
             if e not in ("pos_none", NO_MASK) and ev.unigram is not None
             and ev.m.mean(e, "order_preference") is not None
             and (ev.m.mean(e, "val_loss") or 0) >= ev.unigram - ev.cfg.unigram_margin]
    ngram = ev.m.mean("pos_none", "order_preference_floor")
    best = max(stuck, key=lambda x: x[1], default=(None, None))
    return best if best[1] is not None and (ngram is None or best[1] > ngram) else (None, ngram)


def _share_of(ev: Evidence, exp: str, key: str) -> str:
    """A per-run share of the minimal pairs (ties, say) as a count of the pairs, mean over seeds."""
    share, pairs = ev.m.mean(exp, key), ev.m.mean(exp, "order_pairs")
    if share is None:
        return "n/a"
    return f"{share * pairs:.0f} of {pairs:.0f}" if pairs else f"{share:.1%}"


def order_without_positions(ev: Evidence) -> Judgement:
    """Haviv 2022: causal NoPE prefers the true order of minimal pairs beyond what local statistics already give —
    the strongest character n-gram of the train split, which knows the order of its last n − 1 characters and
    nothing else (or a run that learned nothing, if it prefers more), paired over the pairs; MLM NoPE cannot tell
    the orders apart. The positive control: the reference, with positions, must beat the same floor; where it does
    not, the probe cannot show order read beyond the n-gram, and NoPE's shortfall is no contradiction."""
    floor_run, floor = pair_floor(ev)
    if floor_run is None:
        causal = ev.preference("pos_none", against="floor")
        n = ev.m.mean("pos_none", "order_floor_order")
        floor_name = f"the train split's character {n:.0f}-gram, the strongest of orders 2-5" if n else "the n-gram"
    elif ev.has_samples(["pos_none", floor_run], "pairs"):
        causal = ev.contrast(source_quantity("pairs"), ["pairs"], [("pos_none", 1.0), (floor_run, -1.0)])
        floor_name = f"{floor_run} (stuck at the unigram loss)"
    else:
        causal = ev.metrics_contrast(ev.m.reader("order_preference"), [("pos_none", 1.0), (floor_run, -1.0)])
        floor_name = f"{floor_run} (stuck at the unigram loss)"
    mlm = ev.preference("obj_mlm_nope")
    # A bidirectional model without positions is permutation-equivariant: it ties on every pair by construction,
    # whatever the seed — a structural result, judged as such; otherwise its preference must sit at chance.
    ties = ev.m.values("obj_mlm_nope", "order_ties")
    exact = bool(ties) and all(t == 1.0 for t in ties)
    mlm_verdict = "reproduced" if exact else equivalent(mlm, ev.cfg.chance_margin)
    mlm_text = "ties on every pair (permutation-equivariant)" if exact else (
        f"{ev.text(mlm)} (at chance: within ± {ev.cfg.chance_margin})")
    rope = ev.preference(REFERENCE, against="floor")
    # the positive control: a model with positions must beat the same floor, or the probe cannot show order read
    # beyond local statistics at all, and a NoPE model below the floor says nothing about NoPE
    blind = floor_run is None and rope is not None and greater(rope) != "reproduced"
    causal_verdict = greater(causal)
    if blind and causal_verdict == "contradicted":
        causal_verdict = "undecided"
    control = ("undecided: the probe fails its positive control — the reference, with positions, does not beat the "
               "floor either, so at this budget it cannot show any model reading order beyond the n-gram; "
               if blind else "")
    why = "the probe fails its positive control" if blind else ""
    return Judgement(f"{control}true order preferred on minimal pairs, each line read whole after its line break "
                     f"(a tie counts half): causal NoPE {_fmt(ev.m.mean('pos_none', 'order_preference'))} (ties "
                     f"{_share_of(ev, 'pos_none', 'order_ties')}); the floor, read the same way: {floor_name} "
                     f"{_fmt(floor)} (ties {_share_of(ev, 'pos_none', 'order_floor_ties')}); NoPE − floor = "
                     f"{ev.text(causal)}; with positions, {REFERENCE} − the same floor = {ev.text(rope)}; MLM NoPE − "
                     f"50 % {mlm_text}", all_of([causal_verdict, mlm_verdict if mlm is not None else "not run"]),
                     {"causal NoPE − floor": causal, "MLM NoPE": mlm}, why=why)


# Xiong 2020's design at our scale: both placements at one high learning rate, without warm-up and with a long one
# (half the run; params.yaml).
WARMUP_RUNS = {("post", "none"): "block_post_norm_no_warmup", ("post", "long"): "block_post_norm_long_warmup",
               ("pre", "none"): "block_pre_norm_no_warmup", ("pre", "long"): "block_pre_norm_long_warmup"}


def difference_in_differences(ev: Evidence, a: str, b: str, c: str, d: str) -> Estimate | None:
    """(a − b) − (c − d) of the val loss: one contrast, paired over the windows, each run's own or pooled spread."""
    terms = [(a, 1.0), (b, -1.0), (c, -1.0), (d, 1.0)]
    if all(ev.runs(x) and all(r.size("val") for r in ev.runs(x)) for x in (a, b, c, d)):
        return ev.contrast(source_quantity("val"), ["val"], terms)
    return ev.metrics_contrast(ev.m.reader("val_loss"), terms)  # metrics.json alone: the seed part only


def rate_of(ev: Evidence, run: str) -> float | None:
    """The learning rate a run trained at (from the sweeps the report was given)."""
    return next((lr for points in ev.sweeps.values() for name, lr in points if name == run), None)


def run_at_rate(ev: Evidence, exp: str, lr: float | None) -> str | None:
    """The run of exp's learning-rate sweep (itself included) that trained at lr, if it ran."""
    return next((name for name, rate in ev.sweeps.get(exp, []) if lr is not None and math.isclose(rate, lr)
                 and ev.m.has(name)), None)


def warmup_context(ev: Evidence, high: float | None) -> str:
    """What the sweeps add to the warm-up claim: the default warm-up at the high rate, and no warm-up at the
    reference rate (where Xiong's point does not arise)."""
    parts = []
    default = run_at_rate(ev, "block_post_norm", high)
    if default:
        pre = run_at_rate(ev, REFERENCE, high)
        beside = f" (pre-norm with the same warm-up and rate: {_fmt(ev.m.mean(pre, 'val_loss'))})" if pre else ""
        parts.append(f"post-norm with the default warm-up at lr {high:g} ({default}) "
                     f"{'trains' if ev.trains(default) else 'fails'}, val {_fmt(ev.m.mean(default, 'val_loss'))}"
                     f"{beside}; unigram {_fmt(ev.unigram)}")
    ref_lr = rate_of(ev, REFERENCE)
    low = run_at_rate(ev, "block_post_norm_no_warmup", ref_lr)
    if low and ev.m.has("block_post_norm"):
        trains = ev.trains(low)
        parts.append(f"at the reference lr {ref_lr:g} post-norm {'trains' if trains else 'fails'} without warm-up "
                     f"(val {_fmt(ev.m.mean(low, 'val_loss'))}; with the default warm-up "
                     f"{_fmt(ev.m.mean('block_post_norm', 'val_loss'))})"
                     + (": at this budget the need can only show at the high rate" if trains else ""))
    return "; ".join(parts)


def _seeds_word(outcomes: list[bool]) -> str:
    """How many seeds trained: closed half the gap from the unigram loss to the reference's, without diverging."""
    return f"{sum(outcomes)}/{len(outcomes)} seed{'s' if len(outcomes) != 1 else ''} train"


def warmup_cell(ev: Evidence, runs: dict[tuple[str, str], str]) -> tuple[str, str, dict, str]:
    """Xiong's test at one rate: (verdict, measurement, estimates, the gate's reason). Post-norm needs the warm-up
    when, without it, every seed fails while with it every seed trains and pre-norm trains without it in every seed;
    pre-norm fails without it in every seed: contradicted. A pass/fail decides only over OWN_SPREAD_SEEDS seeds or more,
    and only where each arm went the same way in every seed (mixed seeds: the rate is at the edge of stability). Where
    every seed of every arm trains, the difference in differences decides: what post-norm loses from dropping the
    warm-up beyond what pre-norm loses, which cancels what a long warm-up costs in steps at a short budget."""
    post = ev.effect(runs[("post", "none")], runs[("post", "long")])
    pre = ev.effect(runs[("pre", "none")], runs[("pre", "long")])
    did = difference_in_differences(ev, runs[("post", "none")], runs[("post", "long")], runs[("pre", "none")],
                                    runs[("pre", "long")])
    outcomes = {k: seeds_training(ev, e) for k, e in runs.items()}
    every = {k: bool(o) and all(o) for k, o in outcomes.items()}
    never = {k: bool(o) and not any(o) for k, o in outcomes.items()}
    seeds = min(len(o) for o in outcomes.values())
    text = (f"without − with the long warm-up: post-norm {ev.text(post)}, pre-norm {ev.text(pre)}; post − pre of "
            f"those = {ev.text(did)}; " + ", ".join(f"{e} {_seeds_word(outcomes[k])}" for k, e in runs.items()))
    estimates = {"post": post, "pre": pre, "post − pre": did}
    if all(every.values()):
        return greater(did), text, estimates, ""
    if not every[("post", "long")]:
        return ("undecided", f"post-norm does not train in every seed even with the long warm-up, so this rate cannot "
                f"show what warm-up buys; {text}", estimates, "post-norm fails with the long warm-up")
    if seeds < OWN_SPREAD_SEEDS:
        return ("undecided", f"a run failed, and a pass/fail decides over {OWN_SPREAD_SEEDS} seeds or more ({seeds} "
                f"ran; `make ladder` runs each arm at three rates, three seeds each); {text}", estimates,
                f"pass/fail on {seeds} seed{'s' if seeds != 1 else ''}")
    if never[("pre", "none")] and every[("pre", "long")]:
        return "contradicted", text, estimates, "pre-norm fails without warm-up in every seed"
    if not every[("pre", "long")]:
        return ("undecided", f"pre-norm does not train in every seed even with the long warm-up: this rate is too high "
                f"for either placement; {text}", estimates, "pre-norm fails with the long warm-up")
    if never[("post", "none")] and every[("pre", "none")]:
        # "pre-norm trains without" is a pass/fail: where dropping the warm-up still costs pre-norm loss, say so
        paid = pre is not None and pre.low > 0
        return ("reproduced", text + (f"; pre-norm trains without warm-up but still loses {ev.text(pre)} by dropping "
                                      "it: it needs no warm-up to train, not none to do its best" if paid else ""),
                estimates, "each seed's pass/fail" + ("; pre-norm still pays without it" if paid else ""))
    return ("undecided", f"the seeds went different ways: the rate is at the edge of stability; {text}", estimates,
            "seeds went different ways")


def warmup_needed(ev: Evidence) -> Judgement:
    """Xiong 2020, as their Figs. 2-3 test it: warm-up varied at a high learning rate, both placements — here at
    every rate of the ladder where all four arms ran (the ladder profile: three rates, three seeds each; elsewhere the
    one high rate). A rate where some arm failed is decided by the seeds' pass/fail; rates where every seed trained
    are shown, not judged, once some rate failed, and where none failed the highest rate's difference in differences
    decides. Reproduced where a rate shows the need and none contradicts it, contradicted where one contradicts and
    none shows it; a ladder whose rates disagree is undecided, and says so."""
    arms = {k: e for k, e in WARMUP_RUNS.items() if ev.m.has(e)}
    if len(arms) < len(WARMUP_RUNS):
        return Judgement("runs missing", "not run")
    own = rate_of(ev, arms[("post", "none")])
    rates = sorted({lr for e in arms.values() for _, lr in ev.sweeps.get(e, [])} | ({own} if own else set()))
    ladder = {lr: {k: run_at_rate(ev, e, lr) for k, e in arms.items()} for lr in rates}
    cells = {lr: warmup_cell(ev, runs) for lr, runs in ladder.items() if all(runs.values())}
    missing = {lr: [WARMUP_RUNS[k] for k, r in runs.items() if not r] for lr, runs in ladder.items()
               if not all(runs.values())}
    if not cells:  # the rates are not known (a stand-in study): the arms as they are, at their one rate
        cells = {None: warmup_cell(ev, arms)}
    # a rate where some arm failed is decided by the seeds' pass/fail; a rate where every seed trained, by the
    # difference in differences, and only where no rate failed: below the rates where post-norm fails without
    # warm-up its need cannot show as a failure, and no need there is no evidence against Xiong's
    failing = {lr: c for lr, c in cells.items() if c[3]}
    verdicts = [c[0] for c in failing.values()] or [cells[max(cells, key=lambda lr: -1 if lr is None else lr)][0]]
    if "reproduced" in verdicts and "contradicted" not in verdicts:
        verdict = "reproduced"
    elif "contradicted" in verdicts and "reproduced" not in verdicts:
        verdict = "contradicted"
    else:
        verdict = "undecided"
    split = "reproduced" in verdicts and "contradicted" in verdicts
    several = len(cells) > 1
    text = "; ".join(f"{'at lr ' + format(lr, 'g') if lr is not None else 'at one high rate'}: "
                     + (f"{c[0]} — " if several else "") + c[1] for lr, c in cells.items())
    if failing and len(failing) < len(cells):
        text += ("; where every seed of every arm trained, the difference in differences is shown, not judged: "
                 "below the rate where post-norm fails without warm-up its need cannot show as a failure")
    elif several and not failing:
        text += (f"; every seed of every arm trained at every rate: the highest rate's difference in differences "
                 f"decides (lr {max(cells):g}), as in Xiong's one-rate design")
    if missing:
        text += "; " + "; ".join(f"lr {lr:g} not judged: {', '.join(exps)} did not run there"
                                 for lr, exps in missing.items())
    if split:
        text = f"undecided: the rates disagree (the need shows at one, is contradicted at another); {text}"
    context = warmup_context(ev, own) if not several else ""
    text += f"; {context}" if context else ""
    # the headline estimates are the cell that decided (the highest rate that did, else the highest): named by rate
    # where a ladder ran, so another study's one-rate estimates are never matched with another rate's
    decided = [lr for lr, c in (failing or cells).items() if c[0] == verdict] or list(failing or cells)
    top = max(decided, key=lambda lr: -1 if lr is None else lr)
    estimates = cells[top][2] if not several else {f"{n} at lr {top:g}": e for n, e in cells[top][2].items()}
    why = cells[top][3] if verdict == cells[top][0] else ""
    return Judgement(text, verdict, estimates, why=why)


def post_norm_not_worse(ev: Evidence) -> Judgement:
    """Nguyen & Salazar 2019: with warm-up, post-norm at its best learning rate is not worse than pre-norm at its.
    Each estimate is named by the rates it compares, so another budget's is matched only by what it measures: at the
    best rates where a sweep ran (and, beside it, like for like at the reference rate), else at the one rate."""
    best_post, best_pre = ev.best_lr_run("block_post_norm"), ev.best_lr_run("baseline")
    both = bool(best_post and best_pre)
    e = ev.effect(best_post, best_pre) if both else None
    rates = {r for x in ("block_post_norm", "baseline") for name, r in ev.sweeps.get(x, []) if ev.m.has(name)}
    reference = rate_of(ev, REFERENCE)
    at = {run: rate_of(ev, run) for run in (best_post, best_pre) if run}
    same = both and at[best_post] == at[best_pre] == reference
    name = ("post − pre" if reference is None or not both else f"post − pre at lr {reference:g}" if same else
            f"post − pre at their best rates (post {at[best_post]:g}, pre {at[best_pre]:g})")
    estimates = {name: e}
    if both and not same and ev.m.has("block_post_norm") and reference is not None:
        estimates[f"post − pre at lr {reference:g}"] = ev.effect("block_post_norm", REFERENCE)  # like for like
    tuned = (f"each at its best learning rate ({best_post}, {best_pre})" if len(rates) > 1 else
             "both at the one rate this profile ran (no rate sweep: untuned, unlike the source's comparison)")
    like = "".join(f"; {n} (like for like, shown) = {ev.text(x)}" for n, x in list(estimates.items())[1:])
    verdict, why, gate = at_most(e, ev.cfg.equivalence_margin), "", ""
    # the source compares each placement at its own best rate: at one shared rate (chosen for neither, or for one)
    # the gap is the rate's as much as the placement's, so where the profile's sweeps are known and ran no second
    # rate the row is shown, not decided
    if ev.sweeps.get(REFERENCE) is not None and len(rates) <= 1 and verdict in ("reproduced", "contradicted"):
        gate = (f"; undecided: the interval alone would say {verdict}, but only a rate sweep of both placements "
                "(`make study` runs one) makes the source's comparison")
        verdict, why = "undecided", "one untuned rate"
    return Judgement(f"post − pre val loss, {tuned} = {ev.text(e)} "
                     f"(holds if ≤ {ev.cfg.equivalence_margin}){like}{gate}", verdict,
                     estimates, both and ev.changing(best_post, best_pre),
                     (best_post, best_pre) if both else None, judged=(name,), why=why,
                     boundaries=rule_boundaries("at_most", ev.cfg.equivalence_margin))


def paired_over_inits(ev: Evidence, a: list[float], b: list[float]) -> Estimate | None:
    """mean(a − b) over random initialisations paired by seed, with its t interval (n − 1 degrees of freedom)."""
    diffs = [x - y for x, y in zip(a, b)]
    if len(diffs) < 2:
        return None
    sd, df = seed_spread(diffs)
    return ev.interval.combine(sum(diffs) / len(diffs), 0.0, [(1.0, len(diffs), Spread(sd, df, "own"))],
                               ["random inits"])


def collapse_at_init(ev: Evidence) -> Judgement:
    """Dong 2021 as a statement about the architecture, measured where it holds for any weights: at initialisation,
    without residuals the token states grow alike with depth, and at the deepest they are more alike than with."""
    if not ev.init:
        return Judgement("the init probe has not run (`miniformer init-probe`)", "not run")
    depths, without, with_ = (ev.init["depths"], ev.init["without_residual"]["cosine"],
                              ev.init["with_residual"]["cosine"])
    rise = paired_over_inits(ev, without[-1], without[0])
    gap = paired_over_inits(ev, without[-1], with_[-1])

    def curve(per_depth: list[list[float]]) -> str:
        return " / ".join(f"{sum(v) / len(v):.2f}" for v in per_depth)

    depth_names = "/".join(str(d) for d in depths)
    trained = [f"{e} {_fmt(ev.m.mean(e, 'hidden_uniformity'))}" for e in ("block_no_residual", "baseline")]
    res = {k: ev.init[k].get("residual") for k in ("without_residual", "with_residual")}
    res_text = (f"; Dong's res(X) (relative distance to rank one) without {curve(res['without_residual'])}, with "
                f"{curve(res['with_residual'])} — this model has MLPs and LayerNorm, unlike Dong's pure attention"
                if all(res.values()) else "")
    return Judgement(f"mean cosine of token states at init, depth {depth_names}: without residuals {curve(without)}, "
                     f"with {curve(with_)} ({ev.init['inits']} inits){res_text}; depth {depths[-1]} − {depths[0]} "
                     "without = "
                     f"{ev.text(rise)}; without − with at depth {depths[-1]} = {ev.text(gap)}. After training: "
                     f"{', '.join(trained)} (not judged: a run stuck at the unigram loss reads 1 too)",
                     all_of([greater(rise), greater(gap)]), {"rise with depth": rise, "without − with": gap})


def residual_trains_worse(ev: Evidence) -> Judgement:
    """Without residuals the loss is worse even at the best learning rate tried."""
    if not ev.m.has("block_no_residual"):
        return Judgement("the run without residuals (block_no_residual) not run in this profile", "not run")
    best_nores = ev.best_lr_run("block_no_residual") or "block_no_residual"
    d_loss = ev.effect(best_nores, "baseline")
    tried = [lr for name, lr in ev.sweeps.get("block_no_residual", []) if ev.m.has(name)]
    rates = ", ".join(f"{lr:g}" for lr in tried)
    reference = rate_of(ev, REFERENCE)
    lower = ("; none below the reference rate was tried: a lower one could still help"
             if tried and reference is not None and min(tried) >= reference else "")
    return Judgement(f"val loss at its best learning rate of those tried ({rates}: {best_nores}) − baseline = "
                     f"{ev.text(d_loss)}{lower}",
                     greater(d_loss), {"val loss": d_loss})


def stability_at(ev: Evidence, rate: float) -> dict[str, list[str]]:
    """Every run at this learning rate, sorted: 'unstable' (diverged or a loss spike: the instability Zhai follow),
    'stable', 'stuck' (at the unigram loss without a spike, where the same model trains at another rate of its sweep:
    a failure to learn, which Zhai do not study) and 'excluded' (fails at every rate tried: the architecture)."""
    out: dict[str, list[str]] = {"unstable": [], "stable": [], "stuck": [], "excluded": []}
    for points in ev.sweeps.values():
        for run, lr in points:
            if not math.isclose(lr, rate) or not ev.m.has(run) or ev.m.mean(run, "attention_entropy") is None:
                continue
            spiked = (ev.m.mean(run, "loss_spikes") or 0) > 0 or ev.m.any_true(run, "diverged")
            if spiked or ev.trains(run):
                out["unstable" if spiked else "stable"].append(run)
            else:
                trains_elsewhere = any(ev.trains(other) for other, _ in points if other != run)
                out["stuck" if trains_elsewhere else "excluded"].append(run)
    return out


def entropy_and_instability(ev: Evidence) -> Judgement:
    """Zhai 2023: in runs at a high learning rate, attention entropy collapses where training is unstable. Every run
    at the study's highest rate is sorted stable / unstable (stability_at); an exact rank test asks whether the
    unstable runs have the lower attention entropy. Few unstable runs cannot reach significance: then the verdict is
    undecided and says what would decide it."""
    rates = [lr for points in ev.sweeps.values() for run, lr in points if ev.m.has(run)]
    if not rates:
        return Judgement("runs missing", "not run")
    high = max(rates)
    if not all(run_at_rate(ev, exp, high) for exp in ("attn_single_head", "attn_no_scale")):
        return Judgement("the scaled and unscaled single heads did not both train at the highest rate", "not run")
    groups = stability_at(ev, high)
    entropy = {r: ev.m.mean(r, "attention_entropy") for g in groups.values() for r in g}

    def listed(runs: list[str]) -> str:
        return ", ".join(f"{r} {entropy[r]:.3f}" for r in sorted(runs, key=entropy.get)) or "none"

    alpha = 1 - ev.cfg.confidence
    unstable, stable = [entropy[r] for r in groups["unstable"]], [entropy[r] for r in groups["stable"]]
    text = (f"at lr {high:g}, attention entropy (nats) of unstable runs: {listed(groups['unstable'])}; of stable "
            f"runs: {listed(groups['stable'])}; left out, stuck at the unigram loss without a spike (a failure to "
            f"learn, not the spikes or divergence Zhai follow): {listed(groups['stuck'])}; left out, failing at every "
            f"rate (the architecture): {listed(groups['excluded'])}; "
            f"spikes = steps above {1 + SPIKE_RISE:g} × the running median of up to {SPIKE_WINDOW} steps")
    if not unstable or not stable:
        return Judgement(f"undecided at this budget: {'no' if not unstable else 'every'} run at the highest rate is "
                         f"unstable, so entropy cannot be compared across stability; {text}", "undecided")
    p_low, p_high, min_p = rank_test(unstable, stable)
    collapsed = [r for r in groups["stable"] if entropy[r] < min(unstable)]
    text += (f"; rank test, unstable runs lower: p = {p_low:.3f} (opposite: {p_high:.3f}; the smallest p "
             f"{len(unstable)} unstable of {len(unstable) + len(stable)} runs allow: {min_p:.3f})")
    if collapsed:
        text += f"; entropy below every unstable run's without instability: {', '.join(collapsed)}"
    if all(not ev.trains(r) for r in groups["unstable"]):
        text += ("; every unstable run ended stuck at the unigram loss: the final entropy of a run that learned "
                 "nothing cannot show entropy collapsing before its instability, as Zhai follow it within a run")
    if min_p > alpha:
        return Judgement(f"undecided: too few unstable runs for a test at {alpha:.0%} (more runs at this rate, or "
                         f"seeds of the unstable ones, would decide); {text}", "undecided")
    verdict = "reproduced" if p_low <= alpha else "contradicted" if p_high <= alpha else "undecided"
    return Judgement(text, verdict)


def scale_keeps_entropy(ev: Evidence) -> Judgement:
    """Vaswani §3.2.1 at the reference rate, with the same pair's entropies at every other rate it ran: saturation
    also comes from the learning rate, which the reader should see beside the scale's effect."""
    j = compare("attn_single_head", "attn_no_scale", "greater", "scaled − unscaled", "attention_entropy",
                "attention entropy", " nats")(ev)
    own = dict(ev.sweeps.get("attn_single_head", []))  # run -> rate; the experiment itself is at the reference rate
    rate = own.get("attn_single_head")
    others = sorted({lr for e in ("attn_single_head", "attn_no_scale") for _, lr in ev.sweeps.get(e, [])} - {rate})
    for lr in others:
        runs = {e: next((r for r, x in ev.sweeps.get(e, []) if x == lr), None) for e in ("attn_single_head",
                                                                                       "attn_no_scale")}
        values = {e: ev.m.mean(r, "attention_entropy") if r else None for e, r in runs.items()}
        if None not in values.values():
            j.measurement += (f"; judged at the reference rate — at lr {lr:g} the same heads read scaled "
                              f"{_fmt(values['attn_single_head'])}, unscaled {_fmt(values['attn_no_scale'])} "
                              "(the rate saturates the softmax too)")
    return j


def denoising_recovers(ev: Evidence) -> Judgement:
    e = compare("obj_mlm", "baseline", "greater", "MLM − causal", "recovery_accuracy", "recovery accuracy")(ev)
    e.measurement += (f" (MLM {_fmt(ev.m.mean('obj_mlm', 'recovery_accuracy'))}, causal "
                      f"{_fmt(ev.m.mean('baseline', 'recovery_accuracy'))}; always guessing the commonest hidden "
                      f"character scores {_fmt(ev.m.mean('baseline', 'probe_constant_guess'))}): at equal steps this "
                      "reads how much each objective learns per step, with the causal LM supervised on every "
                      "character — not what either objective can reach")
    return e


def denoising_downstream(ev: Evidence) -> Judgement:
    """Raffel 2020 T4: after the same fine-tuning, the BERT-style denoising model scores higher downstream than the
    prefix LM (T4's language-modelling arm). An objective whose accuracy is within chance_margin of 0.5 learned
    nothing from the fine-tune; MLM without positions (blind to word order) is the floor for an order task."""
    runs = (("causal", "baseline"), ("prefix", "obj_prefix"), ("MLM", "obj_mlm"), ("span", "obj_span"),
            ("MLM NoPE", "obj_mlm_nope"))
    failed = [f"{exp} {seed}" for _, exp in runs for seed, r in ev.m.nested.get(exp, {}).items()
              if isinstance(r.get("finetune_accuracy"), float)
              and abs(r["finetune_accuracy"] - 0.5) <= ev.cfg.chance_margin]
    # a fine-tune that stays at chance beside ones that learn makes an arm's spread bimodal: the normal theory behind
    # "≈ n seeds would decide it" does not hold, so the row does not say it
    e = compare("obj_mlm", "obj_prefix", "greater", "MLM − prefix LM", "finetune_accuracy",
                "acceptability accuracy after fine-tuning", advise=not failed)(ev)
    accuracy = {name: ev.m.mean(exp, "finetune_accuracy") for name, exp in runs}
    at_chance = [k for k, v in accuracy.items() if v is not None and abs(v - 0.5) <= ev.cfg.chance_margin]
    e.measurement += f" ({', '.join(f'{k} {_fmt(v)}' for k, v in accuracy.items())}; chance 0.5"
    if accuracy.get("causal") is not None:  # read another way than the compared arms, so beside the comparison only
        e.measurement += ("; the causal LM is classified from its last position (the one state that read the whole "
                          "line), the bidirectional arms from the mean of their states: its number is shown, not "
                          "compared")
    e.measurement += f"; at chance (within ± {ev.cfg.chance_margin}): {', '.join(at_chance)})" if at_chance else ")"
    if failed:
        e.measurement += (f"; fine-tunes that stayed at chance (where an arm has several seeds, such a failure makes "
                          f"its spread bimodal, so no seed count is offered): {', '.join(failed)}")
    # an arm whose pre-training learned nothing it can be probed for is no competitor downstream
    unlearned = [name for name, exp in runs if (rec := ev.m.mean(exp, "recovery_accuracy")) is not None
                 and (guess := ev.m.mean(exp, "probe_constant_guess")) is not None and rec <= guess]
    if unlearned:
        e.measurement += (f"; failed arms (their recovery probe no better than always guessing the commonest "
                          f"character): {', '.join(unlearned)}")
    known = [v for v in accuracy.values() if v is not None]
    if e.verdict != "not run" and known and len(at_chance) == len(known):
        # no objective learned the task: the comparison cannot show which objective serves it better
        e.measurement = "undecided at this budget: every objective fine-tunes to chance; " + e.measurement
        e.verdict = "undecided"
    return e


def restored_effect(ev: Evidence) -> Estimate | None:
    """The no-mask run scored with the causal mask put back, minus the masked single-head run (paired windows)."""
    a, b = ev.runs("attn_no_mask"), ev.runs("attn_single_head")
    if a and b and all(r.size("val_with_causal_mask") for r in a) and all(r.size("val") for r in b):
        # the same windows: pair window i of one source with window i of the other
        renamed = [Samples({"val": r.raw["val_with_causal_mask"]}) for r in a]
        q = source_quantity("val")
        return ev.interval.contrast(q, ["val"], [(1.0, renamed), (-1.0, b)],
                                  [ev.spread_of_runs(q, renamed, "attn_no_mask"), ev.spread(q, "attn_single_head")],
                                  ["attn_no_mask", "attn_single_head"])
    return ev.metrics_contrast(ev.m.reader("val_loss_with_causal_mask", "val_loss"),
                               [("attn_no_mask", 1.0), ("attn_single_head", -1.0)])


def mask_leak(ev: Evidence) -> Judgement:
    """Without the mask the train loss is too low (it reads the answer), and restoring the mask at test time shows
    the model learned to rely on the leak (its loss is worse than a masked model's)."""
    leak = ev.scalar_effect("attn_single_head", "attn_no_mask", "final_train_loss")
    restored = restored_effect(ev)
    return Judgement(f"train loss with − without the mask = {ev.text(leak)}; val loss without the mask, scored with "
                     f"it restored, minus with = {ev.text(restored)}", all_of([greater(leak), greater(restored)]),
                     {"train": leak, "restored": restored})


def within_run_effect(ev: Evidence, exp: str, a: str, b: str) -> Estimate | None:
    """Source a minus source b of the same runs (the same windows scored twice), e.g. a swapped-roles loss minus the
    intact one: paired bootstrap over the windows plus the seed spread of that difference."""
    if not ev.m.has(exp):
        return None
    if ev.runs(exp) and all(r.size(a) and r.size(b) for r in ev.runs(exp)):
        return ev.contrast(difference_quantity(a, b), [a, b], [(exp, 1.0)], same_items=True)  # one window, two ways
    ka, kb = f"role_swap_{a.partition(':')[2]}", f"role_swap_{b.partition(':')[2]}"
    read_a, read_b = ev.m.reader(ka), ev.m.reader(kb)
    return ev.metrics_contrast(lambda r: minus(read_a(r), read_b(r)), [(exp, 1.0)])


def learned_roles_matter(ev: Evidence) -> Judgement:
    """The course's question, asked of the trained reference: swap two of Q, K, V in every layer at evaluation."""
    swaps = {name: within_run_effect(ev, "baseline", f"roles:{name}", "roles:intact")
             for name in ("swap_qk", "swap_qv", "swap_kv")}
    if all(e is None for e in swaps.values()):
        return Judgement("the reference run was not scored with swapped roles (eval.role_swap)", "not run")
    text = "; ".join(f"{name.removeprefix('swap_').upper()[0]}↔{name.removeprefix('swap_').upper()[1]} − intact "
                     f"val loss = {ev.text(e)}" for name, e in swaps.items())
    return Judgement(f"trained reference, roles swapped at evaluation: {text}",
                     all_of([greater(e) for e in swaps.values()]), swaps)


# Generation past the training length, per position method: the rule its extrapolation claim (Press 2022) implies.
GENERATION_RUNS = {"sinusoidal": ("pos_sinusoidal", "greater"), "RoPE": (REFERENCE, "greater"),
                   "ALiBi": ("pos_alibi", "at_most"), "T5 bias": ("pos_t5", "at_most")}


def generation_bins(ev: Evidence, exp: str) -> list[str]:
    """The position bins exp's long generations reached, inside the block first ("1", "2", "4": multiples)."""
    runs = ev.runs(exp)
    return sorted(runs[0].raw.get("generation", {}), key=int) if runs else []


def generation_growth(method: str) -> Judge:
    """Generated text read by the train split's trigram model: its loss in the farthest bin past the block minus
    inside it, per sample (evaluation/generations.py). 'greater': the method's text degrades past the block;
    'at_most': it stays as text-like (within the equivalence margin)."""
    exp, rule = GENERATION_RUNS[method]

    def judge(ev: Evidence) -> Judgement:
        bins = generation_bins(ev, exp)
        if len(bins) < 2:
            return Judgement("no long generation past the block was scored", "not run")
        far = bins[-1]
        source = f"generation_growth:{far}"
        e = ev.contrast(source_quantity(source), [source], [(exp, 1.0)]) if ev.has_samples([exp], source) else None
        per_bin = " / ".join(f"{b}× {_fmt(ev.m.mean(exp, f'gen_{b}x_ngram_loss'))}" for b in bins)
        margin = ev.cfg.generation_margin  # a quantity of its own: trigram loss, not the model's val loss
        within = at_most(e, margin)
        # 'degrade' is the mirror of 'stays text-like': growth beyond the margin, so no growth counts as both
        verdict = {"reproduced": "contradicted", "contradicted": "reproduced"}.get(within, within) \
            if rule == "greater" else within
        decide = what_would_decide(e, "at_most", margin) if verdict == "undecided" and e else ""  # the margin decides
        note = f" (holds if {'>' if rule == 'greater' else '≤'} {margin:.3g})"
        one_head = HEAD_RUNS[1]
        width = ""
        if exp == REFERENCE and ev.has_samples([one_head], source):  # RoPE: how it degrades depends on head width
            narrow = ev.contrast(source_quantity(source), [source], [(one_head, 1.0)])
            width = (f"; this is RoPE with heads of width n_embd / 4 — with one head of width n_embd "
                     f"({one_head}) farthest − inside = {ev.text(narrow)}")
        return Judgement(f"{ev.unit} trigram loss (a soup detector) of {method}'s generations by position bin (up to "
                         f"that multiple of the block): {per_bin}; farthest − inside = {ev.text(e)}{note}{decide}"
                         f"{width}", verdict, {f"{method} growth": e})

    return judge


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


# --- the table -------------------------------------------------------------------------------------------------------

CLAIMS: tuple[Claim, ...] = (
    Claim("One head is worse than several at fixed width (the U's near side)", "Vaswani 2017 T3-A",
          tuple(HEAD_RUNS[h] for h in PAPER_HEADS), single_head_worse, "paper",
          "dev PPL at fixed d_model 512, h (d_k): 1 (512) 5.29, 4 (128) 5.00, 8 (64) 4.92, 16 (32) 4.91, 32 (16) 5.01: "
          "single-head 0.9 BLEU worse than the best setting, and 'quality also drops off with too many heads' (against "
          "the best, h = 8 or 16; h = 32 − h = 4 is +0.002 nats)", converged=True,
          shown=(HEAD_RUNS[8], HEAD_RUNS[16], HEAD_RUNS[32])),
    Claim("Head count has a U-shape at fixed width (with RoPE, fewer frequencies per head at many heads)",
          "Vaswani 2017 T3-A (the sweep's ends)", tuple(HEAD_RUNS[h] for h in PAPER_HEADS),
          head_u_shape,
          "proxy", "dev PPL at fixed d_model 512, h (d_k): 1 (512) 5.29, 4 (128) 5.00, 8 (64) 4.92, 16 (32) 4.91, "
          "32 (16) 5.01 — the drop at 32 heads is against the best arms (+0.020 nats), against 4 heads +0.002; no head "
          "narrower than 16: the study's 32 heads (4 wide) lie outside the paper's range", converged=True,
          shown=tuple(HEAD_RUNS[h] for h in PAPER_HEADS if h not in HEAD_ENDS)),
    Claim("Learned ≈ sinusoidal positions in distribution", "Vaswani 2017 T3-E",
          (LEARNED_TOKEN_SCALE, "pos_sinusoidal", "pos_learned"), learned_like_sinusoidal, "paper",
          "dev PPL 4.92 learned vs 4.92 sinusoidal (BLEU 25.7 vs 25.8), converged; how their learned table was "
          "initialised is not said — judged here on a table stored and scaled like the tokens", converged=True),
    Claim("1/√d keeps softmax out of saturation (no-scale: lower entropy)", "Vaswani 2017 §3.2.1",
          ("attn_single_head", "attn_no_scale"),
          scale_keeps_entropy, "direct",
          "an argument, no measurement: dot products grow with d_k and push the softmax to small gradients"),
    Claim("Past the training length: sinusoidal worst, RoPE degrades, ALiBi best", "Press 2022 App. T2",
          ("pos_sinusoidal", "baseline", "pos_alibi"), extrapolation_order, "paper",
          "PPL at L_valid 512 / 1012 / 2512 (trained at 512): sinusoidal 20.05 / 43.54 / 132.41, rotary 20.07 / "
          "21.37 / 31.58, T5 19.65 / 18.79 / 20.41, ALiBi 19.73 / 18.73 / 18.41", converged=True),
    Claim("ALiBi stays flat past the training length", "Press 2022 App. T2", ("pos_alibi",), alibi_flat, "paper",
          "ALiBi PPL 19.73 at 512, 18.73 at 1012, 18.41 at 2512 (trained at 512)", converged=True),
    Claim("T5 bias extrapolates nearly as well as ALiBi at 2×", "Press 2022 App. T2", ("pos_t5", "pos_alibi"),
          t5_like_alibi, "paper",
          "PPL at 512 / 1012 / 2512 (trained at 512): T5 19.65 / 18.79 / 20.41, ALiBi 19.73 / 18.73 / 18.41 — T5's "
          "growth minus ALiBi's +0.007 nats at 1012; at 2512 T5 falls behind (+0.107), so the claim is the 2× one",
          converged=True),
    Claim("At short training length ALiBi does not win in distribution", "Press 2022 App. T5",
          ("pos_sinusoidal", "pos_alibi"),
          alibi_not_winning_short,
          "paper", "T5, in distribution: L = 128 sinusoidal 23.81 vs ALiBi 23.98 PPL, L = 64 28.03 vs 28.46; from "
          "L = 256 ALiBi wins (21.29 vs 21.45). The text says ALiBi wins at every L, from Fig. 4 (L ≥ 512). Here L is "
          "block_size characters, about one word per five: in words, shorter than Press's shortest L",
          converged=True),
    *(Claim(f"{method}: generations past the training length {'degrade' if rule == 'greater' else 'stay text-like'}",
            "Press 2022 (read on generations)", (exp,), generation_growth(method), "proxy",
            "Press measure perplexity past L, not generated text; the course asks for the generation quality past the "
            "training length. Here: loss of the generated characters under the train split's trigram model")
      for method, (exp, rule) in GENERATION_RUNS.items()),
    Claim("Learned absolute positions cannot extrapolate", "Press 2022 fn. 4", ("pos_learned",),
          learned_cannot_extrapolate, "structural", "by construction: no trained vector past L"),
    Claim("Causal LM without positions is close to with", "Haviv 2022 T1", ("pos_none", *HAVIV_ARMS.values()),
          nope_close, "paper",
          "WikiText-103 PPL: no positions 20.97, learned 20.42, sinusoidal 20.16, ALiBi 19.71 — NoPE worse by 0.027 / "
          "0.039 / 0.062 nats per (word-level) token", converged=True, optional=(LEARNED_TOKEN_SCALE,)),
    Claim("Masked LM without positions fails", "Haviv 2022 T4", ("obj_mlm_nope", "obj_mlm"),
          compare("obj_mlm_nope", "obj_mlm", "greater", "MLM NoPE − MLM RoPE"), "paper",
          "MLM PPL: no positions 147.18 vs 4.06 / 4.07 / 4.00 with positions", converged=True),
    Claim("Without positions a causal LM reads word order beyond what an n-gram of its training text does (the mask "
          "leaks position); an MLM cannot tell the orders", "Haviv 2022 T1/T4",
          ("pos_none", "obj_mlm_nope"), order_without_positions, "proxy",
          "Haviv probe the layers for position (and compare perplexities); minimal pairs are our instrument. Any "
          "left-to-right model prefers the true order somewhat, positions or not (a character n-gram does): the "
          "probe can only show order read beyond the strongest n-gram floor", converged=True),
    Claim("Post-norm needs warm-up; pre-norm trains without", "Xiong 2020 Figs. 2-3", tuple(WARMUP_RUNS.values()),
          warmup_needed, "paper",
          "Post-LN fails at lr 5e-4 / 1e-3 with a 500-step warm-up and trains with 4000; Pre-LN trains without "
          "warm-up. Here: both placements at the high rate of params.yaml, no warm-up vs half the run; what "
          "post-norm loses without it, beyond what pre-norm loses"),
    Claim("With warm-up, pre-norm is not always better at the end", "Nguyen & Salazar 2019",
          ("block_post_norm", "baseline"), post_norm_not_worse, "paper",
          "qualitative: with warm-up, post-norm is on par or better on high-resource pairs", converged=True),
    Claim("RMSNorm ≈ LayerNorm", "Zhang & Sennrich 2019", ("block_rmsnorm", "baseline"),
          compare("block_rmsnorm", "baseline", "equivalent", "RMSNorm − LayerNorm"), "paper",
          "\"comparable\" quality (and 7-64 % faster: a speed claim for benchmarks, not for this table)",
          converged=True),
    Claim("Without residuals token states collapse toward uniform with depth", "Dong 2021 Thm. 2.2",
          (), collapse_at_init, "direct",
          "theory, for any weights: pure attention loses rank doubly exponentially with depth; skip connections "
          "prevent it. Measured here at initialisation, over random inits"),
    Claim("No residual trains worse, even at its best learning rate", "Dong 2021 §4", ("block_no_residual", "baseline"),
          residual_trains_worse, "direct", "no loss number: networks without skips are argued to be hard to train"),
    Claim("Low attention entropy goes with instability", "Zhai 2023 Figs. 1-2", ("attn_single_head", "attn_no_scale"),
          entropy_and_instability, "proxy",
          "qualitative: within one model, attention entropy collapses over training as the loss spikes or diverges. "
          "Here a proxy: the final entropy of single-seed runs of different models at the highest rate, ranked by "
          "stability", every_run=True),
    Claim("Denoising objectives beat a prefix LM downstream, after the same fine-tuning", "Raffel 2020 T4",
          ("obj_mlm", "obj_prefix"), denoising_downstream, "proxy",
          "GLUE average after fine-tuning: BERT-style denoising 82.96 vs prefix LM 80.69 (and deshuffling 73.17). "
          "Here one task built from the corpus, after CoLA: a line of the play, or its words shuffled?",
          converged=True),
    Claim("At the same steps, an MLM (supervised on the 15 % it masks) recovers a hidden character better than a "
          "causal LM",
          "first principles", ("obj_mlm", "baseline"), denoising_recovers, "proxy",
          "no published number, and not Raffel's claim (T5 compares objectives downstream: the row above). Both read "
          "the whole line: the MLM in its training format, the causal LM by rescoring the rest of the line with each "
          "of its likeliest candidates. At the same steps the supervision differs: the MLM is trained on the 15 % of "
          "characters it masks, the causal LM on every one (≈ 6.7× the predicted characters) — so this is a proxy "
          "for what each objective learns per step, confounded by that, and kept out of the totals (an arm with "
          "equal predicted characters would test it)"),
    Claim("No causal mask → leaked, too-low train loss", "first principles", ("attn_single_head", "attn_no_mask"),
          mask_leak, "direct", "no published number: a model that sees the next token can copy it"),
    Claim("The learned Q/K/V roles matter: swapped in the trained model, it breaks", "first principles",
          ("baseline",), learned_roles_matter, "direct",
          "no published number: the course project's question (scramble Q/K/V: can it still work?), asked of a "
          "trained model"),
    Claim("Tied Q = K (symmetric scores) trains worse", "first principles", ("attn_tied_qk", "attn_single_head"),
          compare("attn_tied_qk", "attn_single_head", "greater", "tied − untied"), "direct",
          "no published number: with k = q every score matrix is x·W_q·W_qᵀ·xᵀ, symmetric positive semi-definite: i "
          "scores j exactly as j scores i, and no pair can score above the geometric mean of the two self-scores"),
    Claim("One head needs no separate value projection", "first principles", ("attn_no_value", "attn_single_head"),
          compare("attn_no_value", "attn_single_head", "equivalent", "no W_v − with W_v"), "direct",
          "no published number: for one head W_o·W_v is a single matrix, so dropping W_v loses no expressiveness"),
    Claim("Swapping Q/K roles is a relabelling (no change)", "first principles", ("attn_qkv_swap", "attn_single_head"),
          compare("attn_qkv_swap", "attn_single_head", "equivalent", "swapped − single-head"), "control",
          "none: swapping the chunks only relabels them — equal in distribution, not identical (each chunk gets the "
          "other's random draw); at one seed per arm the band cannot be shown (an exact check of the code is in the "
          "tests)"),
)


def claims(ev: Evidence) -> list[Finding]:
    """One Finding per published claim the study checks, each computed from the run's metrics; each marked with
    whether the curve has flattened for it (flattening), and the pace and drift that say so."""
    found = []
    for c in CLAIMS:
        with ev.m.asking(f"the claim {c.claim!r}"):
            found.append((c, c.finding(ev)))
    if ev.decays_from is None:  # a stand-in study with no schedule: nothing to read a plateau on
        return [f for _, f in found]
    out = []
    for c, f in found:
        with ev.m.asking(f"the claim {c.claim!r}"):
            flattened, why = flattening(ev, f)
        out.append(dataclasses.replace(f, flattened=flattened, measurement=f.measurement + why))
    return out


def flattening(ev: Evidence, f: Finding) -> tuple[bool | None, str]:
    """Whether training has flattened for this claim's verdict: its followed effect's pace at the peak rate (the slope
    over the last three curve points there, |pace| + its half-width), carried over the drift still ahead (the
    reference's moves shrink by r per stretch: r / (1 − r) paces, Evidence.horizon), stays inside the distance from a
    judged estimate's interval to a boundary of the verdict rule (cushion): the projected drift could not flip the
    verdict. A gap closing at a steady pace fails it though each stretch alone is smaller than its room. None where
    it cannot be read: no followed effect (a growth, a probe: measured once), or too few curve points at the peak rate
    (a decaying schedule, a short stable phase)."""
    if not f.converged or f.curve is None:
        return None, ""
    pace, horizon = ev.pace(*f.curve), ev.horizon()
    if pace is None or horizon is None:
        return None, ""
    e = pace[1]
    if math.isinf(horizon[1]):
        # the loss falls no slower than before: nothing can be projected to settle
        return False, "; not flattened: the reference's moves do not shrink"
    drift, room = (abs(e.value) + e.half_width) * horizon[1], cushion(f, ev.cfg.equivalence_margin)
    way = "flattened" if drift <= room else "not flattened"
    return drift <= room, (f"; {horizon[1]:.1f} × its pace's bound = {drift:.3f} of drift still ahead, against "
                           f"{room:.3f} of room to its rule's boundary ({way})")


def cushion(f: Finding, margin: float) -> float:
    """The smallest distance from a judged estimate's interval to a boundary of the claim's own verdict rule
    (Finding.boundaries; where a judge does not say, every rule's: 0, −margin, +margin): how far the effect could
    drift before its verdict could change. A decided verdict's interval lies on one side of its rule's boundary, so a
    boundary inside it belongs to another rule (0 inside an equivalence that holds) and is passed over; an undecided
    one has no room (0)."""
    room = math.inf
    for name, e in f.estimates.items():
        if e is None or name not in (f.judged or f.estimates):
            continue
        low, high = e.value - e.half_width, e.value + e.half_width
        for b in f.boundaries or (0.0, -margin, margin):
            if low <= b <= high:
                if f.verdict in ("reproduced", "contradicted"):
                    continue
                return 0.0
            room = min(room, abs(low - b), abs(high - b))
    return 0.0 if math.isinf(room) else room


def required_experiments() -> set[str]:
    """Every experiment some claim reads: a params.yaml without one of them is refused before anything trains."""
    return {run for c in CLAIMS for run in c.runs}


def check_experiments(names: set[str] | list[str]) -> None:
    """A claim's experiment renamed or removed from params.yaml is an error, not a silent 'not run'."""
    missing = sorted(required_experiments() - set(names))
    if missing:
        raise UserError(
            f"params: the report's claims need experiment(s) {', '.join(missing)}, which params.yaml does not define; "
            "restore them (or rename them back): see study/claims.py"
        )
    groups = {e: spec.get("group") for e, spec in names.items()} if isinstance(names, dict) else {}
    if groups and groups.get(REFERENCE) != "reference":
        raise UserError(f"params: the claims compare against experiment {REFERENCE!r}; give it `group: reference` "
                        "(and no other experiment), or name the new reference in study/roles.py")
