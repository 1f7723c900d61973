"""Verdicts computed from the run's metrics, with the baseline seeds' spread as the noise floor.

Every verdict is one of VERDICTS and comes from a comparison written here as code; the template only prints them.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

VERDICTS = ("reproduced", "not reproduced", "within noise", "not run")
NOISE_SIGMAS = 2.0  # a difference counts once it exceeds 2 baseline standard deviations

# Which experiment of params.yaml plays which role in the claims (and in the report's figures).
HEAD_RUNS = {1: "attn_single_head", 2: "heads_2", 4: "baseline", 8: "heads_8", 16: "heads_16", 32: "heads_32"}
POSITION_RUNS = {"rope (baseline)": "baseline", "learned": "pos_learned", "sinusoidal": "pos_sinusoidal",
                 "alibi": "pos_alibi", "t5": "pos_t5", "none": "pos_none"}


@dataclass
class Finding:
    claim: str
    source: str
    measurement: str
    verdict: str


class Metrics:
    """Per-experiment means over seeds of results/metrics.json, and the baseline noise floor."""

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
        v = self.values("baseline", key)
        return statistics.stdev(v) if len(v) >= 2 else 0.0


def directional(delta: float | None, noise: float, expect_positive: bool = True) -> str:
    """Verdict for 'delta should be > 0' (or < 0): beyond the floor in the expected direction = reproduced."""
    if delta is None:
        return "not run"
    floor = NOISE_SIGMAS * noise
    if abs(delta) <= floor:
        return "within noise"
    return "reproduced" if (delta > 0) == expect_positive else "not reproduced"


def equality(delta: float | None, noise: float) -> str:
    """Verdict for 'these are equal': inside the floor = reproduced, outside = not reproduced."""
    if delta is None:
        return "not run"
    return "reproduced" if abs(delta) <= NOISE_SIGMAS * noise else "not reproduced"


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def claims(m: Metrics) -> list[Finding]:
    """One Finding per published claim the study checks (source in each Finding), each computed from the metrics."""
    σ = m.noise("val_loss")
    floor = f"noise floor 2σ = {NOISE_SIGMAS * σ:.3f}"
    val = lambda e: m.mean(e, "val_loss")  # noqa: E731
    out: list[Finding] = []

    loss_by_h = {h: val(e) for h, e in HEAD_RUNS.items()}
    if all(v is not None for v in loss_by_h.values()):
        # A U: both ends worse than the best count beyond the floor. Not a U: one end is itself the best while the
        # other is worse beyond the floor (monotone). Anything else cannot be told from the noise.
        best = min(loss_by_h.values())
        ends = [loss_by_h[1] - best, loss_by_h[32] - best]
        worse = [directional(e, σ) == "reproduced" for e in ends]
        if all(worse):
            verdict = "reproduced"
        elif any(worse) and min(ends) == 0:
            verdict = "not reproduced"
        else:
            verdict = "within noise"
        text = ", ".join(f"h={h}: {_fmt(v)}" for h, v in loss_by_h.items()) + f"; {floor}"
    else:
        verdict, text = "not run", "head-count runs missing"
    out.append(Finding("Head count has a U-shape at fixed width", "Vaswani 2017 T3-A", text, verdict))

    d = _diff(val("pos_learned"), val("pos_sinusoidal"))
    out.append(
        Finding(
            "Learned ≈ sinusoidal positions in distribution",
            "Vaswani 2017 T3-E",
            f"learned − sinusoidal val loss = {_fmt(d)}; {floor}",
            equality(d, σ),
        )
    )

    e_scaled, e_noscale = m.mean("attn_single_head", "attention_entropy"), m.mean("attn_no_scale", "attention_entropy")
    d = _diff(e_scaled, e_noscale)
    σe = m.noise("attention_entropy")
    out.append(
        Finding(
            "1/√d keeps softmax out of saturation (no-scale: lower entropy)",
            "Vaswani 2017 §3.2.1",
            f"entropy scaled {_fmt(e_scaled)} vs unscaled {_fmt(e_noscale)} nats (baseline σ {σe:.3f})",
            directional(d, σe),
        )
    )

    out.extend(extrapolation_findings(m, σ))

    d = _diff(val("pos_alibi"), val("pos_sinusoidal"))
    verdict = "not run" if d is None else ("reproduced" if d >= -NOISE_SIGMAS * σ else "not reproduced")
    out.append(
        Finding(
            "At short training length ALiBi does not win in distribution",
            "Press 2022 App. T5",
            f"ALiBi − sinusoidal val loss = {_fmt(d)}; {floor}",
            verdict,
        )
    )

    # every evaluated length past block_size (the multiples come from params: keys loss_at_<m>x with m > 1)
    past = [v for r in m.nested.get("pos_learned", {}).values() for k, v in r.items()
            if k.startswith("loss_at_") and int(k[len("loss_at_"):-1]) > 1]
    undefined = bool(past) and all(v is None for v in past)
    out.append(
        Finding(
            "Learned absolute positions cannot extrapolate",
            "Press 2022 fn. 4",
            "loss past block_size: " + ("undefined at every length (the model raises)" if undefined else "defined"),
            "not run" if not past else ("reproduced" if undefined else "not reproduced"),
        )
    )

    d = _diff(val("pos_none"), val("baseline"))
    base = val("baseline")
    if d is None or base is None:
        verdict = "not run"
    elif abs(d) <= NOISE_SIGMAS * σ:
        verdict = "within noise"
    else:  # "close, not broken": worse by less than a tenth of the baseline loss
        verdict = "reproduced" if d < 0.1 * base else "not reproduced"
    out.append(
        Finding(
            "Causal LM without positions is close to with",
            "Haviv 2022 T1",
            f"NoPE − RoPE val loss = {_fmt(d)} (criterion: < 10 % of {_fmt(base)}); {floor}",
            verdict,
        )
    )

    d = _diff(val("obj_mlm_nope"), val("obj_mlm"))
    out.append(
        Finding(
            "Masked LM without positions fails",
            "Haviv 2022 T4",
            f"MLM NoPE − MLM RoPE val loss = {_fmt(d)}; {floor}",
            directional(d, σ),
        )
    )

    post_nw, pre_nw, post_w = "block_post_norm_no_warmup", "block_pre_norm_no_warmup", "block_post_norm"
    if all(m.has(e) for e in (post_nw, pre_nw, post_w)):
        # "needs warm-up" takes both: without warm-up post-norm is worse than pre-norm, AND worse than itself with it
        vs_pre, vs_warm = _diff(val(post_nw), val(pre_nw)), _diff(val(post_nw), val(post_w))
        diverged = m.any_true(post_nw, "diverged")
        parts = {directional(vs_pre, σ), "reproduced" if diverged and not m.any_true(post_w, "diverged")
                 else directional(vs_warm, σ)}
        verdict = "reproduced" if parts == {"reproduced"} else (
            "not reproduced" if "not reproduced" in parts else "within noise")
        text = (f"without warm-up: post − pre = {_fmt(vs_pre)}; post-norm without − with warm-up = {_fmt(vs_warm)}; "
                f"post diverged: {diverged}; {floor}")
    else:
        verdict, text = "not run", "runs missing"
    out.append(Finding("Post-norm needs warm-up; pre-norm trains without", "Xiong 2020", text, verdict))

    d = _diff(val("block_post_norm"), val("baseline"))
    verdict = "not run" if d is None else ("reproduced" if d <= NOISE_SIGMAS * σ else "not reproduced")
    out.append(
        Finding(
            "With warm-up, pre-norm is not always better at the end",
            "Nguyen & Salazar 2019",
            f"post − pre val loss = {_fmt(d)}; {floor}",
            verdict,
        )
    )

    d = _diff(val("block_rmsnorm"), val("baseline"))
    out.append(
        Finding(
            "RMSNorm ≈ LayerNorm",
            "Zhang & Sennrich 2019",
            f"RMSNorm − LayerNorm val loss = {_fmt(d)}; {floor}",
            equality(d, σ),
        )
    )

    u_res, u_nores = m.mean("baseline", "hidden_uniformity"), m.mean("block_no_residual", "hidden_uniformity")
    d_loss = _diff(val("block_no_residual"), val("baseline"))
    d_u = _diff(u_nores, u_res)
    verdict = (
        "not run"
        if d_u is None or d_loss is None
        else (
            "reproduced"
            if directional(d_loss, σ) == "reproduced" and d_u > NOISE_SIGMAS * m.noise("hidden_uniformity")
            else "not reproduced"
        )
    )
    out.append(
        Finding(
            "No residual → token representations collapse toward uniform",
            "Dong 2021",
            f"mean cosine {_fmt(u_nores)} vs {_fmt(u_res)}; val loss +{_fmt(d_loss)}",
            verdict,
        )
    )

    spikes = m.mean("attn_no_scale", "loss_spikes")
    out.append(
        Finding(
            "Low attention entropy goes with instability",
            "Zhai 2023",
            f"no-scale: entropy {_fmt(e_noscale)}, loss spikes {_fmt(spikes)}; "
            f"scaled: entropy {_fmt(e_scaled)}, spikes {_fmt(m.mean('attn_single_head', 'loss_spikes'))}",
            "not run"
            if spikes is None or e_noscale is None or e_scaled is None
            else (
                "reproduced"
                if e_noscale < e_scaled and spikes > (m.mean("attn_single_head", "loss_spikes") or 0)
                else "not reproduced"
            ),
        )
    )

    acc_mlm, acc_lm = m.mean("obj_mlm", "recovery_accuracy"), m.mean("baseline", "recovery_accuracy")
    d = _diff(acc_mlm, acc_lm)
    out.append(
        Finding(
            "Denoising objectives beat plain LM on a recovery probe",
            "Raffel 2020 T2/T4",
            f"recovery accuracy MLM {_fmt(acc_mlm)} vs causal {_fmt(acc_lm)} "
            f"(baseline σ {m.noise('recovery_accuracy'):.3f})",
            directional(d, m.noise("recovery_accuracy")),
        )
    )

    leak_train = _diff(m.mean("attn_single_head", "final_train_loss"), m.mean("attn_no_mask", "final_train_loss"))
    true_loss = m.mean("attn_no_mask", "val_loss_with_causal_mask")
    d_true = _diff(true_loss, val("attn_single_head"))
    verdict = (
        "not run"
        if leak_train is None or d_true is None
        else (
            "reproduced"
            if directional(leak_train, σ) == "reproduced" and directional(d_true, σ) == "reproduced"
            else "not reproduced"
        )
    )
    out.append(
        Finding(
            "No causal mask → leaked, too-low train loss",
            "first principles",
            f"train loss lower by {_fmt(leak_train)}; with the mask restored val loss {_fmt(true_loss)} vs "
            f"{_fmt(val('attn_single_head'))}",
            verdict,
        )
    )

    d = _diff(val("attn_qkv_swap"), val("attn_single_head"))
    out.append(
        Finding(
            "Swapping Q/K roles is a relabelling (no change)",
            "first principles",
            f"swapped − single-head val loss = {_fmt(d)}; {floor}",
            equality(d, σ),
        )
    )
    return out


def extrapolation_findings(m: Metrics, σ: float) -> list[Finding]:
    """Press 2022: past the training length sinusoidal explodes, RoPE degrades, ALiBi stays flat."""
    # methods defined past block_size (learned is not; none has no claim here)
    methods = {k.split()[0]: v for k, v in POSITION_RUNS.items() if k not in ("learned", "none")}
    multiples = sorted(
        {
            int(k.split("_")[2][:-1])
            for runs in m.nested.values()
            for r in runs.values()
            for k in r
            if k.startswith("loss_at_")
        }
    )
    top = max(multiples) if multiples else None
    growth = {}
    for name, exp in methods.items():
        a, b = m.mean(exp, "loss_at_1x"), m.mean(exp, f"loss_at_{top}x") if top else None
        growth[name] = _diff(b, a)
    text = (
        ", ".join(f"{k} {_fmt(v)}" for k, v in growth.items()) + f" (loss at {top}× minus 1×); {NOISE_SIGMAS}σ = "
        f"{NOISE_SIGMAS * σ:.3f}"
    )
    if any(growth[k] is None for k in ("sinusoidal", "rope", "alibi")):
        order = "not run"
    else:
        ordered = growth["sinusoidal"] > growth["rope"] + NOISE_SIGMAS * σ and growth["rope"] > growth["alibi"]
        order = "reproduced" if ordered else "not reproduced"
    flat = (
        "not run"
        if growth["alibi"] is None
        else ("reproduced" if growth["alibi"] <= NOISE_SIGMAS * σ else "not reproduced")
    )
    return [
        Finding(
            "Past the training length: sinusoidal worst, RoPE degrades, ALiBi best", "Press 2022 App. T2", text, order
        ),
        Finding(
            "ALiBi stays flat past the training length",
            "Press 2022 App. T2",
            f"ALiBi loss growth {_fmt(growth['alibi'])}",
            flat,
        ),
    ]


UNIGRAM_MARGIN = 0.02  # a causal model within this of the context-free unigram loss has learned nothing from context


def breakages(m: Metrics, hypotheses: dict[str, str], groups: dict[str, str],
              unigram_loss: float | None = None) -> list[dict]:
    """Every non-baseline experiment: its hypothesis, what happened in numbers, and a verdict against the baseline.

    ``unigram_loss`` (val loss of the train split's character frequencies, no context) flags runs that trained but
    never got past predicting the marginal distribution: not a divergence, but as much a failure.
    """
    σ = m.noise("val_loss")
    rows = []
    for exp in m.nested:
        if exp == "baseline":
            continue
        v, base = m.mean(exp, "val_loss"), m.mean("baseline", "val_loss")
        diverged = m.any_true(exp, "diverged")
        steps = m.values(exp, "divergence_step")
        d = _diff(v, base)
        if diverged:
            outcome = f"diverged at step {int(min(steps)) if steps else '?'}"
        elif d is None:
            outcome = "no val loss"
        elif groups.get(exp) == "objective":
            outcome = "loss not comparable across objectives; see the shared probe"
        elif m.mean(exp, "val_loss_with_causal_mask") is not None:
            restored = m.mean(exp, "val_loss_with_causal_mask")
            outcome = (f"leaked: {v:.3f} reading the future, {restored:.3f} once the causal mask is restored "
                       f"(baseline {base:.3f})")
        elif unigram_loss is not None and v >= unigram_loss - UNIGRAM_MARGIN:
            outcome = f"stuck at the unigram loss ({unigram_loss:.3f}): learned no use of context"
        elif abs(d) <= NOISE_SIGMAS * σ:
            outcome = "within noise of the baseline"
        else:
            outcome = "worse than the baseline" if d > 0 else "better than the baseline"
        rows.append(
            {
                "experiment": exp,
                "hypothesis": hypotheses.get(exp, ""),
                "val_loss": v,
                "delta": d,
                "diverged": diverged,
                "outcome": outcome,
                "spikes": m.mean(exp, "loss_spikes"),
                "train_loss": m.mean(exp, "final_train_loss"),
            }
        )
    return rows


# --- cross-check against the peer implementation ---------------------------------------------------------------------

AGREEMENT_MARGIN = 0.05  # nats beyond the noise floor before a difference with the peer is flagged


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
