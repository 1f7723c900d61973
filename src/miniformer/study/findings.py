"""Verdicts computed from the run's metrics: every claim is an effect ± interval judged by one rule (stats.py).

Every verdict is one of VERDICTS and comes from a comparison written here as code; the template only prints them.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from miniformer.errors import UserError
from miniformer.params import FindingsConfig
from miniformer.study.stats import (
    VERDICTS,
    Estimate,
    Interval,
    Samples,
    all_of,
    at_most,
    difference_quantity,
    equivalent,
    greater,
    seed_spread,
    source_quantity,
    still_changing,
)

__all__ = ["VERDICTS", "Evidence", "Finding", "Metrics", "claims", "breakages", "required_experiments"]

# Which experiment of params.yaml plays which role in the claims (and in the report's figures).
HEAD_RUNS = {1: "attn_single_head", 2: "heads_2", 4: "baseline", 8: "heads_8", 16: "heads_16", 32: "heads_32"}
POSITION_RUNS = {"rope (baseline)": "baseline", "learned": "pos_learned", "sinusoidal": "pos_sinusoidal",
                 "alibi": "pos_alibi", "t5": "pos_t5", "none": "pos_none"}
# The stability map: (norm placement, warm-up) -> the experiment whose learning-rate sweep fills that row.
STABILITY_ROWS = {("pre", True): "baseline", ("pre", False): "block_pre_norm_no_warmup",
                  ("post", True): "block_post_norm", ("post", False): "block_post_norm_no_warmup"}


def required_experiments() -> set[str]:
    """Every experiment some claim reads: a params.yaml without one of them is refused when the report loads."""
    return {*HEAD_RUNS.values(), *POSITION_RUNS.values(), *STABILITY_ROWS.values(), "attn_no_scale", "attn_no_mask",
            "attn_qkv_swap", "block_rmsnorm", "block_no_residual", "obj_mlm", "obj_mlm_nope"}


@dataclass
class Finding:
    claim: str
    source: str
    measurement: str
    verdict: str
    estimates: dict[str, Estimate | None] = field(default_factory=dict)
    still_changing: bool = False  # a val-loss effect that moved by more than its interval over the last curve points
    curve: tuple[str, str] | None = None  # the (a, b) runs whose val-loss effect the report follows over training


class Metrics:
    """Per-experiment means over seeds of results/metrics.json."""

    def __init__(self, nested: dict) -> None:
        self.nested = nested

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
        """Standard deviation of the baseline seeds (0 when fewer than two seeds ran)."""
        return seed_spread(self.values("baseline", key))[0]


class Evidence:
    """What the claims read: scalars (metrics.json), resamplable samples (windows.json), the findings params."""

    def __init__(
        self,
        nested: dict,
        samples: dict | None = None,
        cfg: FindingsConfig | None = None,
        unigram: float | None = None,
        sweeps: dict[str, list[tuple[str, float]]] | None = None,
    ) -> None:
        self.m = Metrics(nested)
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
        sd, df = seed_spread([q(r, {}) for r in self.runs("baseline")])
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
        ga, gb = self._scalar_growth(a, top), self._scalar_growth(b, top) if b else 0.0
        if ga is None or gb is None:
            return None
        base = [r.get(f"loss_at_{top}x") - r.get("loss_at_1x") for r in self.m.nested.get("baseline", {}).values()
                if r.get(f"loss_at_{top}x") is not None and r.get("loss_at_1x") is not None]
        sd, df = seed_spread(base)
        return self.interval.combine(ga - gb, 0.0, sd * math.sqrt(1 + (1 if b else 0)), df)

    def _scalar_growth(self, exp: str, top: int) -> float | None:
        hi, lo = self.m.mean(exp, f"loss_at_{top}x"), self.m.mean(exp, "loss_at_1x")
        return None if hi is None or lo is None else hi - lo

    def preference(self, exp: str) -> Estimate | None:
        """Share of minimal pairs where exp prefers the true order, minus chance (0.5), with its interval."""
        if not self.m.has(exp):
            return None
        if self._has_samples([exp], "pairs"):
            return self.paired(lambda s, idx: _sub(s.mean("pairs", idx.get("pairs")), 0.5), ["pairs"], self.runs(exp))
        v = self.m.mean(exp, "order_preference")
        if v is None:
            return None
        sd, df = seed_spread(self.m.values("baseline", "order_preference"))
        return self.interval.combine(v - 0.5, 0.0, sd / math.sqrt(len(self.m.values(exp, "order_preference"))), df)

    def scalar_effect(self, a: str, b: str | None, key: str) -> Estimate | None:
        """From metrics.json alone: the seed part of the interval (used for quantities with no per-window samples:
        attention entropy, hidden-state uniformity, final train loss)."""
        va, vb = self.m.values(a, key), self.m.values(b, key) if b else []
        if not va or (b and not vb):
            return None
        sd, df = seed_spread(self.m.values("baseline", key))
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

    def sweep_note(self, exp: str) -> str:
        """For a run that failed: whether it fails at every learning rate of its sweep, or only at its own."""
        sweep = self.sweeps.get(exp, [])
        if len(sweep) < 2 or self.trains(exp):
            return ""
        training = [f"{lr:g}" for name, lr in sweep if self.trains(name)]
        if training:
            return f"; trains at lr {', '.join(training)}: its own learning rate, not the architecture, fails"
        return f"; fails at every learning rate tried ({', '.join(f'{lr:g}' for _, lr in sweep)})"

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


def _sub(x: float | None, y: float) -> float | None:
    return None if x is None else x - y


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def claims(ev: Evidence) -> list[Finding]:
    """One Finding per published claim the study checks (source in each Finding), each computed from the metrics."""
    m, margin = ev.m, ev.cfg.equivalence_margin
    out: list[Finding] = []

    def compare(claim: str, source: str, a: str, b: str, rule, label: str, curve: bool = True) -> None:
        e = ev.effect(a, b)
        verdict = rule(e)
        out.append(Finding(claim, source, f"{label} val loss = {ev.text(e)}", verdict, {label: e},
                           curve and ev.changing(a, b), (a, b) if curve else None))

    # heads: a U has both ends worse than the best interior head count
    interior = [h for h in HEAD_RUNS if h not in (1, 32) and m.has(HEAD_RUNS[h])]
    if all(m.has(e) for e in HEAD_RUNS.values()) and interior:
        best = min(interior, key=lambda h: m.mean(HEAD_RUNS[h], "val_loss"))
        low_end, high_end = ev.effect(HEAD_RUNS[1], HEAD_RUNS[best]), ev.effect(HEAD_RUNS[32], HEAD_RUNS[best])
        verdict = all_of([greater(low_end), greater(high_end)])
        text = (", ".join(f"h={h}: {_fmt(m.mean(e, 'val_loss'))}" for h, e in HEAD_RUNS.items())
                + f"; h=1 − h={best}: {ev.text(low_end)}; h=32 − h={best}: {ev.text(high_end)}")
        ests = {"h=1 − best": low_end, "h=32 − best": high_end}
    else:
        verdict, text, ests = "not run", "head-count runs missing", {}
    out.append(Finding("Head count has a U-shape at fixed width", "Vaswani 2017 T3-A", text, verdict, ests))

    compare("Learned ≈ sinusoidal positions in distribution", "Vaswani 2017 T3-E", "pos_learned", "pos_sinusoidal",
            lambda e: equivalent(e, margin), "learned − sinusoidal")

    e = ev.scalar_effect("attn_single_head", "attn_no_scale", "attention_entropy")
    out.append(Finding("1/√d keeps softmax out of saturation (no-scale: lower entropy)", "Vaswani 2017 §3.2.1",
                       f"entropy scaled − unscaled = {ev.text(e)} nats", greater(e), {"entropy": e}))

    out.extend(extrapolation_findings(ev))

    e = ev.effect("pos_sinusoidal", "pos_alibi")
    out.append(Finding("At short training length ALiBi does not win in distribution", "Press 2022 App. T5",
                       f"sinusoidal − ALiBi val loss = {ev.text(e)} (holds if ≤ {margin})", at_most(e, margin),
                       {"sinusoidal − alibi": e}, ev.changing("pos_sinusoidal", "pos_alibi"),
                       ("pos_sinusoidal", "pos_alibi")))

    # every evaluated length past block_size (the multiples come from params: keys loss_at_<m>x with m > 1)
    past = [v for r in m.nested.get("pos_learned", {}).values() for k, v in r.items()
            if k.startswith("loss_at_") and int(k[len("loss_at_"):-1]) > 1]
    undefined = bool(past) and all(v is None for v in past)
    out.append(Finding("Learned absolute positions cannot extrapolate", "Press 2022 fn. 4",
                       "loss past block_size: " + ("undefined at every length (the model raises)" if undefined
                                                   else "defined"),
                       "not run" if not past else ("reproduced" if undefined else "not reproduced")))

    e = ev.effect("pos_none", "baseline")
    out.append(Finding("Causal LM without positions is close to with", "Haviv 2022 T1",
                       f"NoPE − RoPE val loss = {ev.text(e)} (close: ≤ {margin})", at_most(e, margin),
                       {"none − rope": e}, ev.changing("pos_none", "baseline"), ("pos_none", "baseline")))

    compare("Masked LM without positions fails", "Haviv 2022 T4", "obj_mlm_nope", "obj_mlm", greater,
            "MLM NoPE − MLM RoPE")

    causal, mlm = ev.preference("pos_none"), ev.preference("obj_mlm_nope")
    # A bidirectional model without positions is permutation-equivariant: it ties on every pair by construction,
    # whatever the seed — a structural result, judged as such; otherwise its preference must sit at chance.
    ties = m.values("obj_mlm_nope", "order_ties")
    exact = bool(ties) and all(t == 1.0 for t in ties)
    mlm_verdict = "reproduced" if exact else equivalent(mlm, ev.cfg.chance_margin)
    mlm_text = "ties on every pair (permutation-equivariant)" if exact else (
        f"{ev.text(mlm)} (at chance: within ± {ev.cfg.chance_margin})")
    out.append(Finding("Without positions a causal LM still tells order (the mask leaks it); an MLM cannot",
                       "Haviv 2022 T1/T4", f"true order preferred − 50 % on minimal pairs: causal NoPE "
                       f"{ev.text(causal)}; MLM NoPE {mlm_text}",
                       all_of([greater(causal), mlm_verdict if mlm is not None else "not run"]),
                       {"causal NoPE": causal, "MLM NoPE": mlm}))

    out.append(warmup_finding(ev))

    best_post, best_pre = ev.best_lr_run("block_post_norm"), ev.best_lr_run("baseline")
    e = ev.effect(best_post, best_pre) if best_post and best_pre else None
    out.append(Finding("With warm-up, pre-norm is not always better at the end", "Nguyen & Salazar 2019",
                       f"post − pre val loss, each at its best learning rate ({best_post}, {best_pre}) = "
                       f"{ev.text(e)} (holds if ≤ {margin})", at_most(e, margin), {"post − pre": e},
                       bool(best_post and best_pre) and ev.changing(best_post, best_pre),
                       (best_post, best_pre) if best_post and best_pre else None))

    compare("RMSNorm ≈ LayerNorm", "Zhang & Sennrich 2019", "block_rmsnorm", "baseline",
            lambda e: equivalent(e, margin), "RMSNorm − LayerNorm")

    best_nores = ev.best_lr_run("block_no_residual") or "block_no_residual"
    d_loss = ev.effect(best_nores, "baseline")  # "much worse" must hold at the best learning rate tried
    d_u = ev.scalar_effect("block_no_residual", "baseline", "hidden_uniformity")
    out.append(Finding("No residual → token representations collapse toward uniform", "Dong 2021",
                       f"mean cosine without − with residual = {ev.text(d_u)}; val loss at its best learning rate "
                       f"({best_nores}) − baseline = {ev.text(d_loss)}",
                       all_of([greater(d_loss), greater(d_u)]), {"uniformity": d_u, "val loss": d_loss}))

    ent = ev.scalar_effect("attn_single_head", "attn_no_scale", "attention_entropy")
    spikes = ev.count_effect("attn_no_scale", "attn_single_head", "loss_spikes")
    out.append(Finding("Low attention entropy goes with instability", "Zhai 2023",
                       f"scaled − unscaled entropy = {ev.text(ent)} nats; unscaled − scaled loss spikes = "
                       f"{ev.text(spikes)}", all_of([greater(ent), greater(spikes)]),
                       {"entropy": ent, "spikes": spikes}))

    e = ev.effect("obj_mlm", "baseline", source="probe", key="recovery_accuracy")
    out.append(Finding("Denoising objectives beat plain LM on a recovery probe", "Raffel 2020 T2/T4",
                       f"recovery accuracy MLM − causal = {ev.text(e)} "
                       f"(MLM {_fmt(m.mean('obj_mlm', 'recovery_accuracy'))}, causal "
                       f"{_fmt(m.mean('baseline', 'recovery_accuracy'))})", greater(e), {"accuracy": e}))

    leak = ev.scalar_effect("attn_single_head", "attn_no_mask", "final_train_loss")
    restored = restored_effect(ev)
    out.append(Finding("No causal mask → leaked, too-low train loss", "first principles",
                       f"train loss with − without the mask = {ev.text(leak)}; val loss without the mask, scored "
                       f"with it restored, minus with = {ev.text(restored)}",
                       all_of([greater(leak), greater(restored)]), {"train": leak, "restored": restored}))

    compare("Swapping Q/K roles is a relabelling (no change)", "first principles", "attn_qkv_swap",
            "attn_single_head", lambda e: equivalent(e, margin), "swapped − single-head")
    return out


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


def warmup_finding(ev: Evidence) -> Finding:
    """Xiong 2020, judged over the learning-rate sweep: without warm-up post-norm cannot reach, at any rate tried,
    what it reaches with warm-up; pre-norm without warm-up reaches (within the margin) what it does with it."""
    margin = ev.cfg.equivalence_margin
    best = {row: ev.best_lr_run(exp) for row, exp in STABILITY_ROWS.items()}
    if any(v is None for v in best.values()):
        return Finding("Post-norm needs warm-up; pre-norm trains without", "Xiong 2020", "runs missing", "not run")
    post = ev.effect(best[("post", False)], best[("post", True)])
    pre = ev.effect(best[("pre", False)], best[("pre", True)])
    lrs = {exp: len(ev.sweeps.get(exp, [])) or 1 for exp in STABILITY_ROWS.values()}
    text = (f"best over {lrs['block_post_norm_no_warmup']} learning rates: post-norm without − with warm-up = "
            f"{ev.text(post)}; pre-norm without − with warm-up = {ev.text(pre)} (holds if ≤ {margin}); "
            f"best runs: {', '.join(best.values())}")
    return Finding("Post-norm needs warm-up; pre-norm trains without", "Xiong 2020", text,
                   all_of([greater(post), at_most(pre, margin)]), {"post": post, "pre": pre})


def extrapolation_findings(ev: Evidence) -> list[Finding]:
    """Press 2022: past the training length sinusoidal explodes, RoPE degrades, ALiBi stays flat. Growth = loss at the
    longest evaluated length (params' eval.length_multiples) minus loss at block_size."""
    m, margin = ev.m, ev.cfg.equivalence_margin
    multiples = sorted({int(k[len("loss_at_"):-1]) for runs in m.nested.values() for r in runs.values() for k in r
                        if k.startswith("loss_at_")})
    top = max(multiples) if multiples else None
    if top is None or top == 1:
        return [Finding("Past the training length: sinusoidal worst, RoPE degrades, ALiBi best", "Press 2022 App. T2",
                        "no length past block_size evaluated", "not run"),
                Finding("ALiBi stays flat past the training length", "Press 2022 App. T2",
                        "no length past block_size evaluated", "not run")]
    sin_vs_rope = ev.growth("pos_sinusoidal", "baseline", top)
    rope_vs_alibi = ev.growth("baseline", "pos_alibi", top)
    alibi = ev.growth("pos_alibi", None, top)
    growth = {name: ev._scalar_growth(exp, top) for name, exp in
              (("sinusoidal", "pos_sinusoidal"), ("rope", "baseline"), ("alibi", "pos_alibi"))}
    text = (", ".join(f"{k} {_fmt(v)}" for k, v in growth.items()) + f" (loss at {top}× minus 1×); sinusoidal − RoPE "
            f"growth = {ev.text(sin_vs_rope)}; RoPE − ALiBi growth = {ev.text(rope_vs_alibi)}")
    return [
        Finding("Past the training length: sinusoidal worst, RoPE degrades, ALiBi best", "Press 2022 App. T2", text,
                all_of([greater(sin_vs_rope), greater(rope_vs_alibi)]),
                {"sinusoidal − rope": sin_vs_rope, "rope − alibi": rope_vs_alibi}),
        Finding("ALiBi stays flat past the training length", "Press 2022 App. T2",
                f"ALiBi loss growth at {top}× = {ev.text(alibi)} (flat: ≤ {margin})", at_most(alibi, margin),
                {"alibi growth": alibi}),
    ]


def check_experiments(names: set[str] | list[str]) -> None:
    """A claim's experiment renamed or removed from params.yaml is an error, not a silent 'not run'."""
    missing = sorted(required_experiments() - set(names))
    if missing:
        raise UserError(
            f"params: the report's claims need experiment(s) {', '.join(missing)}, which params.yaml does not define; "
            "restore them (or rename them back): see findings.required_experiments"
        )


def breakages(ev: Evidence, hypotheses: dict[str, str], groups: dict[str, str]) -> list[dict]:
    """Every params.yaml experiment but the baseline: its hypothesis, what happened in numbers, and its outcome
    against the baseline by the same interval rule. A run within ``unigram_margin`` of the unigram loss (the val
    loss of the train split's character frequencies, no context) trained but learned nothing from context."""
    m = ev.m
    rows = []
    for exp in hypotheses:
        if exp == "baseline" or not m.has(exp):
            continue
        v, base = m.mean(exp, "val_loss"), m.mean("baseline", "val_loss")
        e = ev.effect(exp, "baseline") if groups.get(exp) != "objective" else None
        steps = m.values(exp, "divergence_step")
        if m.any_true(exp, "diverged"):
            outcome = f"diverged at step {int(min(steps)) if steps else '?'}"
        elif v is None:
            outcome = "no val loss"
        elif groups.get(exp) == "objective":
            outcome = "loss not comparable across objectives; see the shared probe"
        elif m.mean(exp, "val_loss_with_causal_mask") is not None:
            restored = m.mean(exp, "val_loss_with_causal_mask")
            outcome = (f"leaked: {v:.3f} reading the future, {restored:.3f} once the causal mask is restored "
                       f"(baseline {base:.3f})")
        elif ev.unigram is not None and v >= ev.unigram - ev.cfg.unigram_margin:
            outcome = f"stuck at the unigram loss ({ev.unigram:.3f}): learned no use of context"
        else:
            outcome = {"reproduced": "worse than the baseline", "not reproduced": "better than the baseline",
                       "within noise": "within noise of the baseline", "not run": "no interval"}[greater(e)]
        outcome += ev.sweep_note(exp)
        rows.append({"experiment": exp, "hypothesis": hypotheses.get(exp, ""), "val_loss": v,
                     "delta": None if e is None else e.value, "interval": None if e is None else e.half_width,
                     "diverged": m.any_true(exp, "diverged"), "outcome": outcome,
                     "spikes": m.mean(exp, "loss_spikes"), "train_loss": m.mean(exp, "final_train_loss")})
    return rows


# --- cross-check against the peer implementation ---------------------------------------------------------------------

AGREEMENT_MARGIN = 0.05  # nats beyond the noise floor before a difference with the peer is flagged
NOISE_SIGMAS = 2.0  # the cross-check's floor: 2 baseline standard deviations (one seed of each side)


@dataclass
class PeerComparison:
    experiment: str
    ours: float | None
    peer: float | None  # the peer with its own init
    peer_our_init: float | None  # the peer with our (Vaswani's) init
    tolerance: float
    ours_at: dict[str, float | None]
    peer_at: dict[str, float]

    @property
    def diff(self) -> float | None:
        return None if self.ours is None or self.peer is None else self.ours - self.peer

    @property
    def diff_our_init(self) -> float | None:
        return None if self.ours is None or self.peer_our_init is None else self.ours - self.peer_our_init

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
        run = m.nested.get(exp, {}).get(seed_key.get(exp, "seed0"), {})
        own, ours_init = p["inits"].get("own", {}), p["inits"].get("vaswani", {})
        rows.append(
            PeerComparison(
                exp,
                run.get("val_loss"),
                own.get("val_loss"),
                ours_init.get("val_loss"),
                tolerance,
                {k: run.get(f"loss_at_{k}x") for k in own.get("loss_at", {})},
                own.get("loss_at", {}),
            )
        )
    return rows
