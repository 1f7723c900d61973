"""The published claims the study checks, as a table: what is claimed, where, which runs it reads, how it is judged.

Most claims compare one measured quantity between two runs under one rule of stats.py (greater, equivalent,
at most): they are a row built by ``compare``. The rest need more than one comparison (a U-shape, a claim judged at
each variant's best learning rate, two effects that must both hold) and name a function below, which returns the
same ``Judgement``. Adding a claim is adding a row; every row goes through the same verdict rule, and the experiments
a row names are the ones params.yaml must define (``required_experiments``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from miniformer.errors import UserError
from miniformer.layout import multiple_of_key
from miniformer.study.findings import Evidence, Finding, Judgement
from miniformer.study.roles import HEAD_RUNS, REFERENCE
from miniformer.study.stats import (
    Estimate,
    Samples,
    all_of,
    at_most,
    difference_quantity,
    equivalent,
    greater,
    minus,
    seed_spread,
    source_quantity,
)
from miniformer.training.divergence import SPIKE_RISE, SPIKE_WINDOW

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


@dataclass(frozen=True)
class Claim:
    claim: str
    source: str
    runs: tuple[str, ...]  # the experiments the judgement reads
    judge: Judge
    test: str  # a key of TESTS
    source_numbers: str  # what the source itself reports, from its own table or figure

    def finding(self, ev: Evidence) -> Finding:
        return Finding(claim=self.claim, source=self.source, test=TESTS[self.test], counted=self.test in COUNTED,
                       source_numbers=self.source_numbers, **vars(self.judge(ev)))


# --- the one-comparison claims ---------------------------------------------------------------------------------------

# rule name -> the verdict of an estimate, and what the measurement says the rule is; the margin comes from params
RULES: dict[str, Callable[[Evidence, Estimate | None], str]] = {
    "greater": lambda ev, e: greater(e),
    "equivalent": lambda ev, e: equivalent(e, ev.cfg.equivalence_margin),
    "at_most": lambda ev, e: at_most(e, ev.cfg.equivalence_margin),
}
RULE_NOTES = {"greater": "", "equivalent": " (equivalent: within ± {m})", "at_most": " (holds if ≤ {m})"}


# The quantities with per-window (or per-item) samples, so a paired-bootstrap interval: metrics.json key -> source.
SAMPLED = {"val_loss": "val", "recovery_accuracy": "probe", "finetune_accuracy": "finetune"}


def compare(a: str, b: str, rule: str, label: str, key: str = "val_loss", quantity: str = "val loss",
            unit: str = "") -> Judge:
    """a − b of one metrics.json quantity judged by ``rule``. Sampled quantities carry the paired-bootstrap + seed
    interval, the others the seed part alone; a val-loss effect is also followed over training."""

    def judge(ev: Evidence) -> Judgement:
        e = ev.effect(a, b, source=SAMPLED[key], key=key) if key in SAMPLED else ev.scalar_effect(a, b, key)
        note = RULE_NOTES[rule].format(m=ev.cfg.equivalence_margin)
        followed = key == "val_loss"
        trend = gap_over_training(ev, a, b) if followed else ""
        return Judgement(f"{label} {quantity} = {ev.text(e)}{unit}{note}{trend}", RULES[rule](ev, e), {label: e},
                         followed and ev.changing(a, b), (a, b) if followed else None)

    return judge


def gap_over_training(ev: Evidence, a: str, b: str) -> str:
    """Which way a val-loss gap moves: its value at the first and the last curve point (a verdict at the study's
    budget can be about learning speed, not capacity; this says which way it is heading)."""
    points = [(step, e) for step, e in ev.curve(a, b) if e is not None]
    if len(points) < 2:
        return ""
    (s0, first), (s1, last) = points[0], points[-1]
    way = "widening" if abs(last.value) > abs(first.value) else "closing"
    return f"; over training {first.value:+.3f} at step {s0} → {last.value:+.3f} at step {s1} ({way})"


# --- the compound claims ---------------------------------------------------------------------------------------------


def head_u_shape(ev: Evidence) -> Judgement:
    """Both ends of the head sweep (1 and 32 heads) worse than the best interior head count."""
    m = ev.m
    low, high = min(HEAD_RUNS), max(HEAD_RUNS)
    interior = [h for h in HEAD_RUNS if h not in (low, high) and m.has(HEAD_RUNS[h])]
    if not all(m.has(e) for e in HEAD_RUNS.values()) or not interior:
        return Judgement("head-count runs missing", "not run")
    best = min(interior, key=lambda h: m.mean(HEAD_RUNS[h], "val_loss"))
    low_end, high_end = ev.effect(HEAD_RUNS[low], HEAD_RUNS[best]), ev.effect(HEAD_RUNS[high], HEAD_RUNS[best])
    text = (", ".join(f"h={h}: {_fmt(m.mean(e, 'val_loss'))}" for h, e in HEAD_RUNS.items())
            + f"; h={low} − h={best}: {ev.text(low_end)}; h={high} − h={best}: {ev.text(high_end)}. With RoPE a "
            "head of width d rotates d/2 frequency pairs, so the many-heads end also has the fewest positional "
            "frequencies per head: this sweep does not separate 'too many heads' from 'too few RoPE frequencies'")
    return Judgement(text, all_of([greater(low_end), greater(high_end)]),
                     {f"h={low} − best": low_end, f"h={high} − best": high_end})


def _first_past(ev: Evidence) -> int | None:
    """The shortest evaluated length past block_size, as a multiple (2 in the shipped params): where Press's Table 2
    judges first (1012 tokens for a model trained at 512), and where every method still has room to grow before the
    unigram ceiling."""
    multiples = {multiple_of_key(k) for runs in ev.m.nested.values() for r in runs.values() for k in r} - {None}
    past = sorted(m for m in multiples if m > 1)
    return past[0] if past else None


def extrapolation_order(ev: Evidence) -> Judgement:
    """Press 2022: growth of the whole-window loss from 1× to the first length past block_size, sinusoidal > RoPE >
    ALiBi."""
    at = _first_past(ev)
    if at is None:
        return Judgement("no length past block_size evaluated", "not run")
    sin_vs_rope = ev.growth("pos_sinusoidal", "baseline", at)
    rope_vs_alibi = ev.growth("baseline", "pos_alibi", at)
    growth = {name: ev.scalar_growth(exp, at) for name, exp in
              (("sinusoidal", "pos_sinusoidal"), ("rope", "baseline"), ("alibi", "pos_alibi"))}
    text = (", ".join(f"{k} {_fmt(v)}" for k, v in growth.items()) + f" (loss at {at}× minus 1×); sinusoidal − RoPE "
            f"growth = {ev.text(sin_vs_rope)}; RoPE − ALiBi growth = {ev.text(rope_vs_alibi)}")
    return Judgement(text, all_of([greater(sin_vs_rope), greater(rope_vs_alibi)]),
                     {"sinusoidal − rope": sin_vs_rope, "rope − alibi": rope_vs_alibi})


def alibi_flat(ev: Evidence) -> Judgement:
    """Press 2022: ALiBi's own loss does not grow from 1× to the first length past block_size."""
    at = _first_past(ev)
    if at is None:
        return Judgement("no length past block_size evaluated", "not run")
    alibi = ev.growth("pos_alibi", None, at)
    return Judgement(f"ALiBi loss growth at {at}× = {ev.text(alibi)} (flat: ≤ {ev.cfg.equivalence_margin})",
                     at_most(alibi, ev.cfg.equivalence_margin), {"alibi growth": alibi})


def learned_cannot_extrapolate(ev: Evidence) -> Judgement:
    """Structural: the learned table has no vector past block_size, so every longer length must be undefined."""
    past = [v for r in ev.m.nested.get("pos_learned", {}).values() for k, v in r.items()
            if (multiple_of_key(k) or 0) > 1]
    undefined = bool(past) and all(v is None for v in past)
    text = "loss past block_size: " + ("undefined at every length (the model raises)" if undefined else "defined")
    return Judgement(text, "not run" if not past else ("reproduced" if undefined else "not reproduced"))


def order_without_positions(ev: Evidence) -> Judgement:
    """Haviv 2022: causal NoPE prefers the true order of minimal pairs; MLM NoPE cannot tell the orders apart."""
    causal, mlm = ev.preference("pos_none"), ev.preference("obj_mlm_nope")
    # A bidirectional model without positions is permutation-equivariant: it ties on every pair by construction,
    # whatever the seed — a structural result, judged as such; otherwise its preference must sit at chance.
    ties = ev.m.values("obj_mlm_nope", "order_ties")
    exact = bool(ties) and all(t == 1.0 for t in ties)
    mlm_verdict = "reproduced" if exact else equivalent(mlm, ev.cfg.chance_margin)
    mlm_text = "ties on every pair (permutation-equivariant)" if exact else (
        f"{ev.text(mlm)} (at chance: within ± {ev.cfg.chance_margin})")
    return Judgement(f"true order preferred − 50 % on minimal pairs: causal NoPE {ev.text(causal)}; MLM NoPE "
                     f"{mlm_text}", all_of([greater(causal), mlm_verdict if mlm is not None else "not run"]),
                     {"causal NoPE": causal, "MLM NoPE": mlm})


# Xiong 2020's design at our scale: both placements at one high learning rate, without warm-up and with a long one
# (half the run; params.yaml).
WARMUP_RUNS = {("post", "none"): "block_post_norm_no_warmup", ("post", "long"): "block_post_norm_long_warmup",
               ("pre", "none"): "block_pre_norm_no_warmup", ("pre", "long"): "block_pre_norm_long_warmup"}


def difference_in_differences(ev: Evidence, a: str, b: str, c: str, d: str) -> Estimate | None:
    """(a − b) − (c − d) of the val loss, paired over the windows: half of it is the mean of {a, d} minus the mean of
    {b, c}, which the one interval rule already handles (each run one seed)."""
    groups = ev.runs(a) + ev.runs(d), ev.runs(b) + ev.runs(c)
    if not all(ev.runs(x) for x in (a, b, c, d)) or not all(r.size("val") for g in groups for r in g):
        values = [ev.m.values(x, "val_loss") for x in (a, b, c, d)]  # metrics.json alone: the seed part only
        if not all(values):
            return None
        va, vb, vc, vd = (sum(v) / len(v) for v in values)
        sd, df = seed_spread(ev.m.values(ev.reference, "val_loss"))
        return ev.interval.combine(va - vb - vc + vd, 0.0, sd * math.sqrt(sum(1 / len(v) for v in values)), df)
    half = ev.paired(source_quantity("val"), ["val"], *groups)
    return None if half is None else Estimate(2 * half.value, 2 * half.half_width, 2 * half.eval_se,
                                              2 * half.seed_se, half.confidence)


def warmup_needed(ev: Evidence) -> Judgement:
    """Xiong 2020, as their Figs. 2-3 test it: one high learning rate, warm-up varied, both placements. Post-norm
    needs the warm-up when, without it, it fails outright while pre-norm trains, or (all train) loses more from
    dropping it than pre-norm does — the difference in differences, which cancels what a long warm-up costs in steps
    at a short budget. If post-norm fails even with the long warm-up, this rate cannot show what warm-up buys."""
    runs = {k: e for k, e in WARMUP_RUNS.items() if ev.m.has(e)}
    if len(runs) < len(WARMUP_RUNS):
        return Judgement("runs missing", "not run")
    post = ev.effect(runs[("post", "none")], runs[("post", "long")])
    pre = ev.effect(runs[("pre", "none")], runs[("pre", "long")])
    did = difference_in_differences(ev, runs[("post", "none")], runs[("post", "long")], runs[("pre", "none")],
                                    runs[("pre", "long")])
    trains = {k: ev.trains(e) for k, e in runs.items()}
    text = (f"at one high rate, without − with the long warm-up: post-norm {ev.text(post)}, pre-norm {ev.text(pre)}; "
            f"post − pre of those = {ev.text(did)}; "
            + ", ".join(f"{e} {'trains' if trains[k] else 'fails'}" for k, e in runs.items()))
    estimates = {"post": post, "pre": pre, "post − pre": did}
    if not trains[("post", "long")]:
        return Judgement(f"untestable at this budget: post-norm fails at this rate even with the long warm-up; {text}",
                         "untestable", estimates)
    if not trains[("pre", "none")]:
        return Judgement(text, "not reproduced", estimates)  # pre-norm needs it too
    verdict = "reproduced" if not trains[("post", "none")] else greater(did)
    return Judgement(text, verdict, estimates)


def post_norm_not_worse(ev: Evidence) -> Judgement:
    """Nguyen & Salazar 2019: with warm-up, post-norm at its best learning rate is not worse than pre-norm at its."""
    best_post, best_pre = ev.best_lr_run("block_post_norm"), ev.best_lr_run("baseline")
    both = bool(best_post and best_pre)
    e = ev.effect(best_post, best_pre) if both else None
    return Judgement(f"post − pre val loss, each at its best learning rate ({best_post}, {best_pre}) = {ev.text(e)} "
                     f"(holds if ≤ {ev.cfg.equivalence_margin})", at_most(e, ev.cfg.equivalence_margin),
                     {"post − pre": e}, both and ev.changing(best_post, best_pre),
                     (best_post, best_pre) if both else None)


def paired_over_inits(ev: Evidence, a: list[float], b: list[float]) -> Estimate | None:
    """mean(a − b) over random initialisations paired by seed, with its t interval (n − 1 degrees of freedom)."""
    diffs = [x - y for x, y in zip(a, b)]
    if len(diffs) < 2:
        return None
    sd, df = seed_spread(diffs)
    return ev.interval.combine(sum(diffs) / len(diffs), 0.0, sd / math.sqrt(len(diffs)), df)


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
    return Judgement(f"mean cosine of token states at init, depth {depth_names}: without residuals {curve(without)}, "
                     f"with {curve(with_)} ({ev.init['inits']} inits); depth {depths[-1]} − {depths[0]} without = "
                     f"{ev.text(rise)}; without − with at depth {depths[-1]} = {ev.text(gap)}. After training: "
                     f"{', '.join(trained)} (not judged: a run stuck at the unigram loss reads 1 too)",
                     all_of([greater(rise), greater(gap)]), {"rise with depth": rise, "without − with": gap})


def residual_trains_worse(ev: Evidence) -> Judgement:
    """Without residuals the loss is worse even at the best learning rate tried."""
    best_nores = ev.best_lr_run("block_no_residual") or "block_no_residual"
    d_loss = ev.effect(best_nores, "baseline")
    return Judgement(f"val loss at its best learning rate ({best_nores}) − baseline = {ev.text(d_loss)}",
                     greater(d_loss), {"val loss": d_loss})


def highest_rate_run(ev: Evidence, exp: str) -> str:
    """The run of exp's learning-rate sweep (itself included) at the highest rate."""
    return max(ev.sweeps.get(exp, [(exp, 0.0)]), key=lambda point: point[1])[0]


def entropy_and_instability(ev: Evidence) -> Judgement:
    """Zhai 2023: at a high learning rate the unscaled head's attention entropy collapses and its loss spikes; the
    scaled head's does not. Spikes are counted per step against a running median (training/divergence.py); when the
    detector fires in none of the runs, the claim is untestable at this budget, not 'within noise'."""
    runs = [name for exp in ("attn_single_head", "attn_no_scale") for name, _ in ev.sweeps.get(exp, [(exp, 0.0)])]
    runs = [r for r in runs if ev.m.has(r)]
    scaled, unscaled = highest_rate_run(ev, "attn_single_head"), highest_rate_run(ev, "attn_no_scale")
    if not (ev.m.has(scaled) and ev.m.has(unscaled)):
        return Judgement("runs missing", "not run")
    events = sum((ev.m.mean(r, "loss_spikes") or 0) + ev.m.any_true(r, "diverged") for r in runs)
    ent = ev.scalar_effect(scaled, unscaled, "attention_entropy")
    spikes = ev.count_effect(unscaled, scaled, "loss_spikes")
    text = (f"at the highest rate ({scaled} vs {unscaled}): scaled − unscaled entropy = {ev.text(ent)} nats; "
            f"unscaled − scaled loss spikes (per step, > {1 + SPIKE_RISE:g} × the running median of {SPIKE_WINDOW} "
            f"steps) = {ev.text(spikes)}")
    if not events:
        return Judgement(f"untestable at this budget: no spike or divergence in any of {len(runs)} runs "
                         f"({', '.join(runs)}); {text}", "untestable", {"entropy": ent, "spikes": spikes})
    return Judgement(text, all_of([greater(ent), greater(spikes)]), {"entropy": ent, "spikes": spikes})


def denoising_recovers(ev: Evidence) -> Judgement:
    e = compare("obj_mlm", "baseline", "greater", "MLM − causal", "recovery_accuracy", "recovery accuracy")(ev)
    e.measurement += (f" (MLM {_fmt(ev.m.mean('obj_mlm', 'recovery_accuracy'))}, causal "
                      f"{_fmt(ev.m.mean('baseline', 'recovery_accuracy'))}; always guessing the commonest hidden "
                      f"character scores {_fmt(ev.m.mean('baseline', 'probe_constant_guess'))})")
    return e


def denoising_downstream(ev: Evidence) -> Judgement:
    """Raffel 2020 T4: after the same fine-tuning, the denoising (BERT-style) model scores higher downstream."""
    e = compare("obj_mlm", "baseline", "greater", "MLM − causal", "finetune_accuracy",
                "acceptability accuracy after fine-tuning")(ev)
    runs = (("causal", "baseline"), ("prefix", "obj_prefix"), ("MLM", "obj_mlm"), ("span", "obj_span"),
            ("MLM NoPE", "obj_mlm_nope"))
    accuracy = {name: ev.m.mean(exp, "finetune_accuracy") for name, exp in runs}
    e.measurement += f" ({', '.join(f'{k} {_fmt(v)}' for k, v in accuracy.items())}; chance 0.5)"
    known = [v for v in accuracy.values() if v is not None]
    if e.verdict != "not run" and known and all(abs(v - 0.5) <= ev.cfg.chance_margin for v in known):
        # no objective learned the task: the comparison cannot show which objective serves it better
        e.measurement = "untestable at this budget: every objective fine-tunes to chance; " + e.measurement
        e.verdict = "untestable"
    return e


def restored_effect(ev: Evidence) -> Estimate | None:
    """The no-mask run scored with the causal mask put back, minus the masked single-head run (paired windows)."""
    a, b = ev.runs("attn_no_mask"), ev.runs("attn_single_head")
    if a and b and all(r.size("val_with_causal_mask") for r in a) and all(r.size("val") for r in b):
        # the same windows: pair window i of one source with window i of the other
        renamed = [Samples({"val": r.raw["val_with_causal_mask"]}) for r in a]
        return ev.paired(source_quantity("val"), ["val"], renamed, b)
    va, vb = ev.m.mean("attn_no_mask", "val_loss_with_causal_mask"), ev.m.mean("attn_single_head", "val_loss")
    if va is None or vb is None:
        return None
    sd, df = seed_spread(ev.m.values("baseline", "val_loss"))
    return ev.interval.combine(va - vb, 0.0, sd * math.sqrt(2), df)


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
        return ev.paired(difference_quantity(a, b), [a, b], ev.runs(exp))
    diffs = [minus(r.get(f"role_swap_{a.partition(':')[2]}"), r.get(f"role_swap_{b.partition(':')[2]}"))
             for r in ev.m.nested.get(exp, {}).values()]
    diffs = [d for d in diffs if d is not None]
    if not diffs:
        return None
    sd, df = seed_spread(diffs)
    return ev.interval.combine(sum(diffs) / len(diffs), 0.0, sd / math.sqrt(len(diffs)), df)


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


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


# --- the table -------------------------------------------------------------------------------------------------------

CLAIMS: tuple[Claim, ...] = (
    Claim("Head count has a U-shape at fixed width", "Vaswani 2017 T3-A", tuple(HEAD_RUNS.values()), head_u_shape,
          "paper", "dev PPL at fixed d_model, h (d_k): 1 (512) 5.29, 4 (128) 5.00, 8 (64) 4.92, 16 (32) 4.91, 32 (16) "
          "5.01"),
    Claim("Learned ≈ sinusoidal positions in distribution", "Vaswani 2017 T3-E", ("pos_learned", "pos_sinusoidal"),
          compare("pos_learned", "pos_sinusoidal", "equivalent", "learned − sinusoidal"), "paper",
          "dev PPL 4.92 learned vs 4.92 sinusoidal (BLEU 25.7 vs 25.8), converged (ours: the study's budget; the "
          "trend column says whether the gap is still moving)"),
    Claim("1/√d keeps softmax out of saturation (no-scale: lower entropy)", "Vaswani 2017 §3.2.1",
          ("attn_single_head", "attn_no_scale"),
          compare("attn_single_head", "attn_no_scale", "greater", "scaled − unscaled", "attention_entropy",
                  "attention entropy", " nats"), "direct",
          "an argument, no measurement: dot products grow with d_k and push the softmax to small gradients"),
    Claim("Past the training length: sinusoidal worst, RoPE degrades, ALiBi best", "Press 2022 App. T2",
          ("pos_sinusoidal", "baseline", "pos_alibi"), extrapolation_order, "paper",
          "PPL at L_valid 512 / 1012 / 2512 (trained at 512): sinusoidal 20.05 / 43.54 / 132.41, rotary 20.07 / "
          "21.37 / 31.58, T5 19.65 / 18.79 / 20.41, ALiBi 19.73 / 18.73 / 18.41"),
    Claim("ALiBi stays flat past the training length", "Press 2022 App. T2", ("pos_alibi",), alibi_flat, "paper",
          "ALiBi PPL 19.73 at 512, 18.73 at 1012, 18.41 at 2512 (trained at 512)"),
    Claim("At short training length ALiBi does not win in distribution", "Press 2022 App. T5",
          ("pos_sinusoidal", "pos_alibi"), compare("pos_sinusoidal", "pos_alibi", "at_most", "sinusoidal − ALiBi"),
          "paper", "T5, in distribution: L = 128 sinusoidal 23.81 vs ALiBi 23.98 PPL, L = 64 28.03 vs 28.46; from "
          "L = 256 ALiBi wins (21.29 vs 21.45). The text says ALiBi wins at every L, from Fig. 4 (L ≥ 512)"),
    Claim("Learned absolute positions cannot extrapolate", "Press 2022 fn. 4", ("pos_learned",),
          learned_cannot_extrapolate, "structural", "by construction: no trained vector past L"),
    Claim("Causal LM without positions is close to with", "Haviv 2022 T1", ("pos_none", "baseline"),
          compare("pos_none", "baseline", "at_most", "NoPE − RoPE"), "paper",
          "WikiText-103 PPL: no positions 20.97, learned 20.42, sinusoidal 20.16, ALiBi 19.71"),
    Claim("Masked LM without positions fails", "Haviv 2022 T4", ("obj_mlm_nope", "obj_mlm"),
          compare("obj_mlm_nope", "obj_mlm", "greater", "MLM NoPE − MLM RoPE"), "paper",
          "MLM PPL: no positions 147.18 vs 4.06 / 4.07 / 4.00 with positions"),
    Claim("Without positions a causal LM still tells order (the mask leaks it); an MLM cannot", "Haviv 2022 T1/T4",
          ("pos_none", "obj_mlm_nope"), order_without_positions, "proxy",
          "Haviv probe the layers for position (and compare perplexities); minimal pairs are our instrument"),
    Claim("Post-norm needs warm-up; pre-norm trains without", "Xiong 2020 Figs. 2-3", tuple(WARMUP_RUNS.values()),
          warmup_needed, "paper",
          "Post-LN fails at lr 5e-4 / 1e-3 with a 500-step warm-up and trains with 4000; Pre-LN trains without "
          "warm-up. Here: both placements at the high rate of params.yaml, no warm-up vs half the run; what "
          "post-norm loses without it, beyond what pre-norm loses"),
    Claim("With warm-up, pre-norm is not always better at the end", "Nguyen & Salazar 2019",
          ("block_post_norm", "baseline"), post_norm_not_worse, "paper",
          "qualitative: with warm-up, post-norm is on par or better on high-resource pairs"),
    Claim("RMSNorm ≈ LayerNorm", "Zhang & Sennrich 2019", ("block_rmsnorm", "baseline"),
          compare("block_rmsnorm", "baseline", "equivalent", "RMSNorm − LayerNorm"), "paper",
          "\"comparable\" quality (and 7-64 % faster: a speed claim for benchmarks, not for this table)"),
    Claim("Without residuals token states collapse toward uniform with depth", "Dong 2021 Thm. 2.2",
          (), collapse_at_init, "direct",
          "theory, for any weights: pure attention loses rank doubly exponentially with depth; skip connections "
          "prevent it. Measured here at initialisation, over random inits"),
    Claim("No residual trains worse, even at its best learning rate", "Dong 2021 §4", ("block_no_residual", "baseline"),
          residual_trains_worse, "direct", "no loss number: networks without skips are argued to be hard to train"),
    Claim("Low attention entropy goes with instability", "Zhai 2023 Figs. 1-2", ("attn_single_head", "attn_no_scale"),
          entropy_and_instability, "paper",
          "qualitative: in runs at a high learning rate, attention entropy collapses as the loss spikes or diverges; "
          "here loss per step and entropy every log_every steps, scaled vs unscaled head at the highest rate"),
    Claim("Denoising objectives beat plain LM downstream, after the same fine-tuning", "Raffel 2020 T4",
          ("obj_mlm", "baseline"), denoising_downstream, "proxy",
          "GLUE average after fine-tuning: BERT-style denoising 82.96 vs prefix LM 80.69 (and deshuffling 73.17). "
          "Here one task built from the corpus, after CoLA: a line of the play, or its words shuffled?"),
    Claim("Denoising objectives beat plain LM on a recovery probe", "Raffel 2020 T2/T4", ("obj_mlm", "baseline"),
          denoising_recovers, "proxy",
          "T5 scores objectives downstream (the row above); filling in a hidden character is not a downstream "
          "score, and an MLM predicts 15 % of its tokens per step"),
    Claim("No causal mask → leaked, too-low train loss", "first principles", ("attn_single_head", "attn_no_mask"),
          mask_leak, "direct", "no published number: a model that sees the next token can copy it"),
    Claim("The learned Q/K/V roles matter: swapped in the trained model, it breaks", "first principles",
          ("baseline",), learned_roles_matter, "direct",
          "no published number: the course project's question (scramble Q/K/V: can it still work?), asked of a "
          "trained model"),
    Claim("Tied Q = K (symmetric scores) trains worse", "first principles", ("attn_tied_qk", "attn_single_head"),
          compare("attn_tied_qk", "attn_single_head", "greater", "tied − untied"), "direct",
          "no published number: with k = q, token i scores j exactly as j scores i, so attention cannot be directed"),
    Claim("One head needs no separate value projection", "first principles", ("attn_no_value", "attn_single_head"),
          compare("attn_no_value", "attn_single_head", "equivalent", "no W_v − with W_v"), "direct",
          "no published number: for one head W_o·W_v is a single matrix, so dropping W_v loses no expressiveness"),
    Claim("Swapping Q/K roles is a relabelling (no change)", "first principles", ("attn_qkv_swap", "attn_single_head"),
          compare("attn_qkv_swap", "attn_single_head", "equivalent", "swapped − single-head"), "control",
          "none: the roles are chunks of one projection with one init, so a swap must tie (a check of the code)"),
)


def claims(ev: Evidence) -> list[Finding]:
    """One Finding per published claim the study checks, each computed from the run's metrics."""
    return [c.finding(ev) for c in CLAIMS]


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
