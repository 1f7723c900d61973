"""Where a verdict's seed error comes from: each run's own spread, or the spread pooled over every multi-seed
experiment — never the reference's spread lent to another run — and what the design can resolve."""

from __future__ import annotations

import math

import pytest

from miniformer.study.claims import claims
from miniformer.study.findings import Evidence
from miniformer.study.stats import (
    Estimate,
    Interval,
    Spread,
    describe_spreads,
    pooled_spread,
    rank_test,
    t_quantile,
    z_quantile,
)


def runs_of(values: list[float], key: str = "loss_at_2x") -> dict:
    return {f"seed{i}": {"val_loss": 2.0, "loss_at_1x": 2.0, key: v} for i, v in enumerate(values)}


def test_a_variant_with_its_own_seeds_uses_its_own_spread_not_the_baselines():
    """ALiBi's growth is flat over its own three seeds; RoPE's (the baseline's) varies by ±0.1. Borrowing RoPE's
    spread would give ALiBi's 'flat' an interval of ± 0.4 (undecided); its own gives ± 0.01 (reproduced)."""
    metrics = {"baseline": runs_of([2.2, 2.3, 2.4]), "pos_alibi": runs_of([2.001, 2.0, 1.999])}
    ev = Evidence(metrics)
    own = ev.growth("pos_alibi", None, 2)
    assert own.variance.startswith("own spread (pos_alibi 3 seeds)")
    assert own.half_width == pytest.approx(4.303 * 0.001 / math.sqrt(3), rel=1e-3)
    borrowed = Interval().combine(own.value, 0.0, [(1.0, 3, Spread(0.1, 2, "pooled"))])
    assert borrowed.half_width > 0.2
    verdict = {f.claim: f.verdict for f in claims(ev)}["ALiBi stays flat past the training length"]
    assert verdict == "reproduced"


def test_a_single_seed_run_borrows_the_pooled_spread_with_its_degrees_of_freedom():
    """One seed of pos_alibi: its spread is pooled over the baseline (df 2) and pos_sinusoidal (df 2): df 4, so t
    falls from 4.30 to 2.78, and the pooled sd mixes both."""
    metrics = {"baseline": runs_of([2.2, 2.3, 2.4]), "pos_sinusoidal": runs_of([2.5, 2.5, 2.5]),
               "pos_alibi": runs_of([2.0])}
    e = Evidence(metrics).growth("pos_alibi", None, 2)
    pooled_sd = math.sqrt((2 * 0.1**2 + 2 * 0.0) / 4)
    assert e.seed_df == 4 and "pooled" in e.variance
    assert e.half_width == pytest.approx(2.776 * pooled_sd, rel=1e-3)


def test_pooling_and_borrowing_give_different_verdicts():
    """A quiet variant against a noisy reference: borrowing the reference's spread for both sides cannot decide a
    0.05 effect; each side's own spread can."""
    metrics = {"baseline": {f"seed{i}": {"val_loss": v} for i, v in enumerate([2.0, 2.2, 1.8])},
               "block_rmsnorm": {f"seed{i}": {"val_loss": v} for i, v in enumerate([2.05, 2.051, 2.049])},
               "heads_8": {f"seed{i}": {"val_loss": v} for i, v in enumerate([2.3, 2.301, 2.299])}}
    ev = Evidence(metrics)
    own = ev.scalar_effect("heads_8", "block_rmsnorm", "val_loss")
    assert own.value == pytest.approx(0.25) and own.low > 0  # decided from the two quiet spreads
    borrowed = Interval().effect(lambda s, i: None, [], [], seed_sd=0.2)  # nothing to resample: no estimate
    assert borrowed is None
    lent = Interval().combine(0.25, 0.0, [(1.0, 3, Spread(0.2, 2, "pooled")), (-1.0, 3, Spread(0.2, 2, "pooled"))])
    assert lent.low < 0  # the reference's spread lent to both: undecided


def test_pooled_spread_weights_by_degrees_of_freedom_and_skips_single_seeds():
    sp = pooled_spread([[1.0, 2.0, 3.0], [5.0], [0.0, 0.0]])
    assert sp.df == 3 and sp.kind == "pooled" and sp.sd == pytest.approx(math.sqrt(2 * 1.0 / 3))
    assert pooled_spread([[1.0], [2.0]]).kind == "none"


def test_welch_degrees_of_freedom_for_two_own_spreads():
    e = Interval().combine(1.0, 0.0, [(1.0, 3, Spread(0.1, 2, "own")), (-1.0, 3, Spread(0.1, 2, "own"))])
    assert e.seed_df == 4  # two equal spreads of df 2: Welch-Satterthwaite gives 4
    assert e.seed_se == pytest.approx(0.1 * math.sqrt(2 / 3))


def test_welch_degrees_of_freedom_stay_fractional():
    """Unequal spreads: Welch-Satterthwaite gives 1.26 df here, and t is read there (≈ 9.2), not at a df rounded
    down to 1 (12.7), which would make the interval 40 % wider than the rule says."""
    e = Interval().combine(0.0, 0.0, [(1.0, 2, Spread(0.02, 1, "own")), (-1.0, 3, Spread(0.008, 2, "own"))])
    v1, v2 = 0.02**2 / 2, 0.008**2 / 3
    assert e.seed_df == pytest.approx((v1 + v2) ** 2 / (v1**2 / 1 + v2**2 / 2))
    assert 1 < e.seed_df < 2
    assert e.half_width == pytest.approx(t_quantile(0.95, e.seed_df) * math.sqrt(v1 + v2), rel=1e-6)
    assert e.half_width < t_quantile(0.95, 1) * math.sqrt(v1 + v2) * 0.9


def test_seeds_to_resolve_shrinks_the_seed_part_with_root_n():
    e = Estimate(0.02, 0.04, 0.0, 0.04 / 4.303, 0.95, 2, "", 3)
    n = e.seeds_to_resolve(0.02)
    assert n == math.ceil(3 * 4)  # half the half-width needs four times the seeds
    assert Estimate(0.02, 0.04, 0.02, 0.0, 0.95).seeds_to_resolve(0.02) is None  # evaluation error alone is wider


def test_rank_test_exact_values():
    p_low, p_high, min_p = rank_test([0.1, 0.2], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    assert p_low == pytest.approx(1 / 28) and min_p == pytest.approx(1 / 28) and p_high == pytest.approx(1.0)
    p_low, _, min_p = rank_test([0.1], [1.0, 2.0, 3.0])
    assert p_low == pytest.approx(0.25) and min_p == pytest.approx(0.25)
    p_low, p_high, _ = rank_test([5.0], [1.0, 9.0])  # in the middle: neither tail
    assert p_low == pytest.approx(2 / 3) and p_high == pytest.approx(2 / 3)
    p_low, p_high, min_p = rank_test([1.0], [1.0, 2.0])  # tied with the lowest: both share rank 1.5
    assert (p_low, p_high, min_p) == pytest.approx((2 / 3, 1.0, 2 / 3))


def test_an_undecided_comparison_says_what_would_decide_it():
    metrics = {"baseline": {f"seed{i}": {"val_loss": v} for i, v in enumerate([2.0, 2.01, 1.99])},
               "block_rmsnorm": {"seed0": {"val_loss": 2.04}}}
    (f,) = [f for f in claims(Evidence(metrics)) if f.claim == "RMSNorm ≈ LayerNorm"]
    assert f.verdict == "undecided"
    assert "showing it needs a half-width under the distance to the ± 0.05 band" in f.measurement
    assert "seeds per run to find an effect of 0.010 with 80 % power" in f.measurement
    assert f.resolves.startswith("± ") and "pooled" in f.resolves


def test_two_seeds_join_the_pool_rather_than_stand_alone():
    """Two seeds are a spread with one degree of freedom (t = 12.7): the experiment's seeds join the pool instead."""
    metrics = {"baseline": runs_of([2.2, 2.3, 2.4]), "obj_mlm": runs_of([2.0, 2.02])}
    e = Evidence(metrics).growth("obj_mlm", None, 2)
    assert "pooled" in e.variance and e.seed_df == 3  # baseline's 2 + its own 1
    pooled_sd = math.sqrt((2 * 0.1**2 + 1 * (0.02**2 / 2)) / 3)
    assert e.seed_se == pytest.approx(pooled_sd / math.sqrt(2))


def test_a_spread_is_pooled_within_the_runs_objective():
    """A one-seed causal run borrows the spread pooled over the causal runs only: an MLM's two wildly different
    seeds (its masked-token loss) would otherwise widen every causal interval."""
    metrics = {"baseline": runs_of([2.2, 2.3, 2.4]), "obj_mlm": runs_of([1.0, 3.0]), "pos_alibi": runs_of([2.0])}
    pools = {"baseline": "causal", "pos_alibi": "causal", "obj_mlm": "mlm"}
    within = Evidence(metrics, pools=pools).growth("pos_alibi", None, 2)
    assert within.seed_df == 2 and "over the causal runs (df 2)" in within.variance
    assert within.half_width == pytest.approx(4.303 * 0.1, rel=1e-3)
    mixed = Evidence(metrics).growth("pos_alibi", None, 2)  # one pool for every run: the MLM's spread leaks in
    assert mixed.seed_df == 3 and mixed.half_width > 3 * within.half_width


def test_an_objective_without_two_seeds_pools_over_every_objective_and_says_so():
    metrics = {"baseline": runs_of([2.2, 2.3, 2.4]), "obj_span": runs_of([2.0])}
    e = Evidence(metrics, pools={"baseline": "causal", "obj_span": "span"}).growth("obj_span", None, 2)
    assert e.seed_df == 2 and "every objective's runs (no span run has two seeds)" in e.variance


def test_two_pools_are_two_sources_of_seed_variance():
    """Terms pooled from different objectives are independent estimates (Welch df adds up); one pool is counted
    once."""
    a, b = Spread(0.1, 2, "pooled", "a"), Spread(0.1, 2, "pooled", "b")
    one = Interval().combine(0.0, 0.0, [(1.0, 1, a), (-1.0, 1, a)])
    two = Interval().combine(0.0, 0.0, [(1.0, 1, a), (-1.0, 1, b)])
    assert one.seed_se == pytest.approx(two.seed_se) and (one.seed_df, two.seed_df) == (2, 4)


def test_a_high_rate_arm_borrows_the_spread_of_its_own_rate_and_says_when_none_has_seeds():
    """A one-seed arm at lr 0.01 borrows the spread of the causal runs at lr 0.01 (a chaotic rate), not the quiet
    reference rate's; where no run at its rate has two seeds it borrows every rate's, and says so."""
    metrics = {"baseline": runs_of([2.2, 2.3, 2.4]), "hot": runs_of([2.0, 2.3, 2.6]), "hot1": runs_of([2.0])}
    pools = dict.fromkeys(metrics, "causal")
    rates = {"baseline": 0.002, "hot": 0.01, "hot1": 0.01}
    e = Evidence(metrics, pools=pools, rates=rates).growth("hot1", None, 2)
    assert "over the causal runs at lr 0.01 (df 2)" in e.variance
    assert e.half_width == pytest.approx(4.303 * 0.3, rel=1e-3)
    alone = {k: v for k, v in metrics.items() if k != "hot"}
    e = Evidence(alone, pools=pools, rates=rates).growth("hot1", None, 2)
    assert "the causal runs at every rate (none at lr 0.01 has two seeds)" in e.variance
    assert e.half_width == pytest.approx(4.303 * 0.1, rel=1e-3)


def test_an_arm_whose_spread_is_an_outlier_is_left_out_of_the_pool_and_named():
    """Five arms ± 0.01 over three seeds and one ± 0.1: a one-seed arm borrows the five's spread (df 10), not one
    the wide arm sets (df 12, sd ≈ 0.042), and the interval names what was left out."""
    metrics = {**{f"arm{i}": runs_of([2.0, 2.01, 2.02]) for i in range(5)}, "wide": runs_of([2.0, 2.1, 2.2]),
               "one": runs_of([2.0])}
    e = Evidence(metrics, pools=dict.fromkeys(metrics, "causal")).growth("one", None, 2)
    assert e.seed_df == 10 and "less wide (variance 100.0× the rest's)" in e.variance
    assert e.seed_se == pytest.approx(0.01, rel=1e-6)


def test_what_would_decide_worked_by_hand():
    """Half-width 0.05 at 95 %, all of it seed spread, one seed per run. z = 1.960: with 80 % power the design finds
    0.05 × (1.960 + 0.8416) / 1.960 = 0.0715. Seeds to find a target effect d: ⌈(0.05 / (d × 1.960 / 2.8016))²⌉, at
    least 2: d = 0.020 → ⌈12.77⌉ = 13; an equivalence at +0.02 is 0.030 from the band → ⌈5.67⌉ = 6; at −0.01 it is
    0.040 → ⌈3.19⌉ = 4, while "at most 0.05" is 0.060 away → ⌈1.42⌉ → 2."""
    from miniformer.study.claims import what_would_decide
    from miniformer.study.stats import Estimate

    def text(value: float, rule: str) -> str:
        return what_would_decide(Estimate(value, 0.05, 0.0, 0.0255, 0.95, seeds=1), rule, 0.05)

    assert text(0.02, "greater").startswith("; with 80 % power this design finds effects of ± 0.071 or more (≈ 13 ")
    assert "(≈ 6 seeds per run to find an effect of 0.030" in text(0.02, "equivalent")
    assert "(≈ 4 seeds per run to find an effect of 0.040" in text(-0.01, "equivalent")
    assert "(≈ 2 seeds per run to find an effect of 0.060" in text(-0.01, "at_most")
    assert text(0.07, "equivalent").startswith("; the point estimate lies beyond the ± 0.05 band")
    assert "seeds per run" not in text(0.001, "greater")  # ≈ 5100 seeds: past any design, not offered
    assert "seeds per run" not in text(0.0, "greater")  # no effect to find


def test_two_seeds_of_windows_join_the_pool_too():
    """The per-window path reads a run's spread as the metrics path does: two seeds are one degree of freedom, so
    they join the pool rather than stand alone."""
    def windows(shift: float) -> dict:
        return {"val": {"sum": [2.0 + shift, 2.1 + shift], "count": [1, 1]}}

    metrics = {"baseline": runs_of([2.05, 2.15, 2.25]), "pos_alibi": runs_of([2.0, 2.02])}
    samples = {"baseline": {f"seed{i}": windows(s) for i, s in enumerate([0.0, 0.1, 0.2])},
               "pos_alibi": {f"seed{i}": windows(s) for i, s in enumerate([0.0, 0.02])}}
    e = Evidence(metrics, samples).effect("pos_alibi", None)
    assert "pooled" in e.variance and e.seed_df == 3  # the baseline's 2 + its own 1


def test_seeds_to_resolve_leaves_the_evaluation_part_alone():
    """Half-width 0.5 with an evaluation s.e. of 0.1: the evaluation part z·0.1 stays, only the seed part
    √(0.5² − (z·0.1)²) shrinks with √n; 3 seeds now, target 0.3 → ⌈3·(seed part / √(0.3² − (z·0.1)²))²⌉ = 13."""
    z = 1.959963984540054
    e = Estimate(0.0, 0.5, 0.1, 0.2, 0.95, 2, "", 3)
    assert e.seeds_to_resolve(0.3) == math.ceil(3 * (0.25 - (z * 0.1) ** 2) / (0.09 - (z * 0.1) ** 2)) == 13
    assert e.seeds_to_resolve(0.6) == 4  # a target already met still asks for one seed more, never fewer
    evaluation_only = Estimate(0.0, z_quantile(0.95) * 0.1, 0.1, 0.0, 0.95, 0, "", 3)
    assert evaluation_only.seeds_to_resolve(0.3) is None  # no seed part to shrink, though the target is not met


def test_rank_test_shares_a_tie_at_the_top():
    assert rank_test([2.0], [1.0, 2.0]) == pytest.approx((1.0, 2 / 3, 1 / 3))  # rank 2.5 among 1, 2.5, 2.5


def test_a_contrasts_weights_enter_the_seed_variance_squared():
    """0.5·a − b with own spreads 0.2 and 0.1 over 2 seeds each: 0.25·0.04/2 + 0.01/2 = 0.01, two equal parts of
    df 1 → Welch–Satterthwaite df 2. Halves of a pooled spread (df 4): (0.25/2 + 0.25/2)·0.04 = 0.01, df 4."""
    own = Interval().combine(0.0, 0.0, [(0.5, 2, Spread(0.2, 1, "own")), (-1.0, 2, Spread(0.1, 1, "own"))])
    assert own.seed_se == pytest.approx(0.1) and own.seed_df == pytest.approx(2.0)
    pooled = Interval().combine(0.0, 0.0, [(0.5, 2, Spread(0.2, 4, "pooled")), (-0.5, 2, Spread(0.2, 4, "pooled"))])
    assert pooled.seed_se == pytest.approx(0.1) and pooled.seed_df == pytest.approx(4.0)


def test_the_spreads_an_effect_used_are_named():
    one_seed = Spread(0.0, 0, "none")
    nothing = describe_spreads([(1.0, 1, one_seed), (-1.0, 1, one_seed)], ["a", "b"])
    assert nothing == "no seed spread: one seed everywhere"
    assert describe_spreads([], []) == ""
    assert describe_spreads([(1.0, 3, Spread(0.1, 2, "own"))], ["pos_alibi"]) == "own spread (pos_alibi 3 seeds)"
    mixed = [(1.0, 3, Spread(0.1, 2, "own")), (-1.0, 1, Spread(0.2, 9, "pooled", "causal runs"))]
    assert describe_spreads(mixed, ["a", "b"]) == ("own spread (a 3 seeds); "
                                                   "pooled within-experiment spread over causal runs (df 9)")


def test_the_resolution_column_names_the_estimate_whose_half_width_it_shows():
    """The report's half-width column showed the widest of a claim's intervals beside its first estimate (claim 25:
    `swap_qk: +0.008 ± 0.009` beside `± 0.368`): with several estimates it now says which one."""
    from miniformer.study.claims import resolution
    from miniformer.study.findings import Judgement

    narrow, wide = Estimate(0.008, 0.009, 0.0, 0.0, 0.95, variance="own"), Estimate(0.5, 0.368, 0, 0, 0.95)
    two = Judgement("m", "reproduced", {"swap_qk": narrow, "swap_v": wide})
    assert resolution(two) == "± 0.368 (of swap_v)"
    assert resolution(Judgement("m", "reproduced", {"swap_qk": narrow})) == "± 0.009 (own)"
    assert resolution(Judgement("m", "reproduced", {"swap_v": wide, "swap_qk": narrow})) == "± 0.368 (of swap_v)"
