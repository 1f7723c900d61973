"""Intervals on synthetic data whose answer is known, and every branch of the one verdict rule."""

from __future__ import annotations

import math

import numpy as np
import pytest

from miniformer.study.stats import (
    Estimate,
    Interval,
    Samples,
    Spread,
    all_of,
    at_most,
    difference_quantity,
    equivalent,
    f_cdf,
    f_quantile,
    greater,
    less,
    nested_growth,
    outlying_spreads,
    seed_spread,
    source_quantity,
    t_quantile,
    z_quantile,
)


def test_quantiles_match_the_tables():
    assert z_quantile(0.95) == pytest.approx(1.95996, abs=1e-4)
    assert t_quantile(0.95, 1) == pytest.approx(12.706, abs=1e-2)
    assert t_quantile(0.95, 2) == pytest.approx(4.303, abs=1e-3)
    assert t_quantile(0.95, 10) == pytest.approx(2.228, abs=1e-3)
    assert t_quantile(0.90, 5) == pytest.approx(2.015, abs=1e-3)
    assert math.isinf(t_quantile(0.95, 0))


def windows_run(losses: np.ndarray) -> Samples:
    return Samples({"val": {"sum": (losses * 10).tolist(), "count": [10] * len(losses)}})


def test_bootstrap_error_of_a_mean_is_sigma_over_root_n():
    """One run, i.i.d. window losses with σ = 0.5: the evaluation error of the mean is 0.5 / √n."""
    rng = np.random.default_rng(1)
    n = 400
    run = windows_run(2.0 + 0.5 * rng.standard_normal(n))
    e = Interval(0.95, 3000).effect(source_quantity("val"), ["val"], [run])
    assert e.value == pytest.approx(run.mean("val"))
    assert e.eval_se == pytest.approx(0.5 / math.sqrt(n), rel=0.12)
    assert e.seed_se == 0 and e.half_width == pytest.approx(z_quantile(0.95) * e.eval_se, rel=1e-9)


def test_pairing_cancels_the_shared_window_difficulty():
    """Two runs share large per-window difficulty and differ by a constant 0.1 plus small noise: the paired interval
    is set by the small noise, not by the shared spread."""
    rng = np.random.default_rng(2)
    n = 500
    difficulty = 1.0 * rng.standard_normal(n)
    a = windows_run(2.1 + difficulty + 0.05 * rng.standard_normal(n))
    b = windows_run(2.0 + difficulty + 0.05 * rng.standard_normal(n))
    e = Interval(0.95, 2000).effect(source_quantity("val"), ["val"], [a], [b])
    assert e.value == pytest.approx(0.1, abs=0.01)
    expected_se = math.sqrt(2) * 0.05 / math.sqrt(n)  # the independent parts only
    assert e.eval_se == pytest.approx(expected_se, rel=0.15)
    assert greater(e) == "reproduced"


def test_seed_part_uses_student_t_and_both_group_sizes():
    run = windows_run(np.full(50, 2.0))  # no evaluation noise at all
    e = Interval(0.95, 200).effect(source_quantity("val"), ["val"], [run, run, run], [run], seed_sd=0.01, seed_df=2)
    assert e.eval_se == 0
    assert e.seed_se == pytest.approx(0.01 * math.sqrt(1 / 3 + 1))
    assert e.half_width == pytest.approx(4.3027 * e.seed_se, rel=1e-3)


def test_growth_quantity_and_unpaired_sources():
    raw = {"lengths": {"1": [2.0, 2.0, 2.0, 2.0], "8": [3.0, 3.2, 2.8, 3.0]}}
    run = Samples(raw)
    q = difference_quantity("length:8", "length:1")
    assert q(run, {}) == pytest.approx(1.0)
    e = Interval(0.95, 500).effect(q, ["length:8", "length:1"], [run])
    assert e.value == pytest.approx(1.0) and 0 < e.eval_se < 0.2


def test_probe_items_and_curve_points_are_sources():
    run = Samples({"probe": [1, 0, 1, 1], "curve": {"steps": [10, 20], "windows": [[3.0, 3.0], [2.0, 2.5]]}})
    assert run.mean("probe") == 0.75 and run.size("probe") == 4
    assert run.mean("curve:1") == 2.25 and run.curve_steps() == [10, 20]
    assert run.mean("curve:2") is None and run.mean("length:4") is None


def test_seed_spread():
    assert seed_spread([1.0, 2.0, 3.0]) == (1.0, 2)
    assert seed_spread([1.0]) == (0.0, 0)
    assert seed_spread([1.0, None, float("nan"), 3.0])[1] == 1


def est(value: float, half: float) -> Estimate:
    return Estimate(value, half, 0.0, 0.0, 0.95)


def test_greater_and_less_branches():
    assert greater(None) == "not run"
    assert greater(est(0.5, 0.1)) == "reproduced"
    assert greater(est(-0.5, 0.1)) == "contradicted"
    assert greater(est(0.05, 0.1)) == "undecided"
    assert less(est(-0.5, 0.1)) == "reproduced"
    assert less(est(0.5, 0.1)) == "contradicted"
    assert less(est(0.0, 0.1)) == "undecided"
    assert less(None) == "not run"


def test_equivalent_branches():
    assert equivalent(None, 0.05) == "not run"
    assert equivalent(est(0.01, 0.02), 0.05) == "reproduced"
    assert equivalent(est(0.2, 0.05), 0.05) == "contradicted"
    assert equivalent(est(-0.2, 0.05), 0.05) == "contradicted"
    assert equivalent(est(0.04, 0.05), 0.05) == "undecided"


def test_at_most_branches():
    assert at_most(None, 0.05) == "not run"
    assert at_most(est(-0.3, 0.1), 0.05) == "reproduced"
    assert at_most(est(0.3, 0.1), 0.05) == "contradicted"
    assert at_most(est(0.05, 0.1), 0.05) == "undecided"


def test_compound_rule():
    assert all_of(["reproduced", "reproduced"]) == "reproduced"
    assert all_of(["reproduced", "undecided"]) == "undecided"
    assert all_of(["reproduced", "contradicted"]) == "contradicted"
    assert all_of(["undecided", "not run"]) == "not run"
    assert all_of([]) == "not run"


def test_an_estimate_prints_as_effect_plus_minus_half_width():
    from miniformer.study.stats import Estimate

    assert Estimate(0.1234, 0.05, 0.02, 0.01, 0.95).text() == "+0.123 ± 0.050"
    assert Estimate(-0.5, math.inf, 0.0, 1.0, 0.95).text(2) == "-0.50 ± ∞"


def test_the_t_quantile_is_exact_over_the_confidences_params_allow():
    assert t_quantile(0.5, 10) == pytest.approx(0.6998, rel=1e-3)  # below 1: the bisection starts from 0
    assert t_quantile(0.999, 1) == pytest.approx(636.62, rel=1e-4)  # Cauchy: tan(0.4995 π)
    assert t_quantile(0.999, 2) == pytest.approx(31.599, rel=1e-4)


def test_an_unknown_sample_source_is_an_error():
    with pytest.raises(ValueError, match="unknown sample source 'bogus'"):
        Samples({}).mean("bogus")


def test_an_effect_with_no_runs_or_a_missing_quantity_is_none_and_quiet():
    import warnings

    runs = [Samples({"val": {"sum": [1.0, 2.0], "count": [1, 1]}})]

    def missing(run, idx):
        return None  # e.g. a run without a length-sweep entry

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "mean of empty slice" on the way to None
        assert Interval(bootstrap=50).effect(source_quantity("val"), ["val"], []) is None
        assert Interval(bootstrap=50).effect(missing, ["val"], runs) is None
        assert Interval(bootstrap=50).effect(source_quantity("val"), ["val"], runs, [Samples({})]) is None


def test_the_seed_part_for_one_sample_and_unequal_groups():
    run = windows_run(np.full(50, 2.0))
    alone = Interval(0.95, 200).effect(source_quantity("val"), ["val"], [run, run, run], seed_sd=0.03, seed_df=2)
    assert alone.seed_se == pytest.approx(0.03 / math.sqrt(3))  # one group: sd / √n, nothing from a second group
    two = Interval(0.95, 200).effect(source_quantity("val"), ["val"], [run, run, run], [run, run], seed_sd=0.03)
    assert two.seed_se == pytest.approx(0.03 * math.sqrt(1 / 3 + 1 / 2))


def test_the_bootstrap_error_is_the_spread_of_its_replicates():
    """A quantity equal to the first resampled window's index makes each replicate a known number: the error is
    their standard deviation (ddof 1), from indices drawn over every window 0 … n-1 by the interval's own seed."""
    run = windows_run(np.arange(10.0))

    def first_index(run, idx):  # resamples arrive stacked (B, n): one value per resample
        return idx["val"][..., 0].astype(float) if idx else 4.5

    rng = np.random.default_rng(0)
    expected = [float(rng.integers(0, 10, 10)[0]) for _ in range(5)]
    e = Interval(0.95, 5).effect(first_index, ["val"], [run])
    assert e.eval_se == pytest.approx(float(np.std(expected, ddof=1)))
    assert Interval(0.95, 2).effect(first_index, ["val"], [run]).eval_se == pytest.approx(
        float(np.std(expected[:2], ddof=1)))  # two replicates already have a spread
    assert Interval(0.95, 1).effect(first_index, ["val"], [run]).eval_se == 0.0  # one replicate: no spread


def test_replicates_that_are_not_numbers_are_left_out():
    run = windows_run(np.arange(10.0))

    def sometimes_nan(run, idx):
        return np.where(idx["val"][..., 0] % 2, float("nan"), 1.0) if idx else 1.0

    e = Interval(0.95, 50).effect(sometimes_nan, ["val"], [run])
    assert e.eval_se == 0.0 and math.isfinite(e.half_width)


def test_a_window_with_one_counted_token_weighs_one():
    assert Samples({"val": {"sum": [3.0], "count": [1]}}).mean("val") == 3.0
    assert Samples({"val": {"sum": [0.0], "count": [0]}}).mean("val") == 0.0  # an empty window: no division by zero


def test_a_difference_with_a_missing_side_is_none():
    run = Samples({"lengths": {"1": [1.0, 2.0]}})
    assert difference_quantity("length:8", "length:1")(run, {}) is None
    assert difference_quantity("length:1", "length:8")(run, {}) is None


def test_resamples_evaluated_together_equal_resamples_evaluated_one_by_one():
    """The bootstrap evaluates blocks of resamples at once; each replicate must be exactly the one-at-a-time value:
    a token-weighted difference over three runs against a second group, paired on shared windows."""
    rng = np.random.default_rng(3)

    def run() -> Samples:
        return Samples({"val": {"sum": rng.uniform(10, 40, 300).tolist(), "count": rng.integers(5, 20, 300).tolist()},
                        "pairs": rng.integers(0, 2, 50).astype(float).tolist()})

    a, b = [run() for _ in range(3)], [run() for _ in range(2)]

    def quantity(s, idx):
        return difference_quantity("val", "pairs")(s, idx)

    interval = Interval(0.95, 600, seed=7)  # more than one block of resamples
    e = interval.contrast(quantity, ["val", "pairs"], [(1.0, a), (-1.0, b)], [Spread(0.0, 0, "none")] * 2)
    draw = np.random.default_rng(7)
    one_by_one = []
    for _ in range(600):
        idx = {"val": draw.integers(0, 300, 300), "pairs": draw.integers(0, 50, 50)}
        one_by_one.append(float(np.mean([quantity(r, idx) for r in a])) - float(np.mean([quantity(r, idx) for r in b])))
    assert e.eval_se == float(np.std(one_by_one, ddof=1))


@pytest.mark.parametrize(("upper", "d1", "d2", "value"), [
    (0.05, 2, 2, 19.0),  # F(2, 2): CDF x / (1 + x), so the quantile is exactly 0.95 / 0.05
    (0.025, 2, 2, 39.0),
    (0.05, 2, 20, 3.4928),  # the tables' values
    (0.05, 1, 10, 4.9646),
    (0.01, 2, 10, 7.5594),
])
def test_the_f_quantile_matches_worked_values(upper, d1, d2, value):
    assert f_quantile(upper, d1, d2) == pytest.approx(value, rel=2e-3)
    assert f_cdf(f_quantile(upper, d1, d2), d1, d2) == pytest.approx(1 - upper, abs=1e-4)


def test_a_seed_spread_far_wider_than_the_rests_is_screened_out_of_the_pool():
    """Five arms spread ± 0.01 over three seeds, one ± 0.1 (a variance 100× theirs, against an F(2, 10) quantile at
    0.05 / 6 of 8.03): the wide one is named; the quiet ones, a two-seed arm (it cannot read its own spread) and a
    rest that is constant are never left out."""
    quiet = {f"arm{i}": [1.0, 1.01, 1.02] for i in range(5)}
    wide = {**quiet, "wide": [1.0, 1.1, 1.2]}
    out = outlying_spreads(wide, 0.05)
    assert list(out) == ["wide"] and out["wide"] == pytest.approx(100.0)
    assert outlying_spreads(quiet, 0.05) == {}
    assert outlying_spreads({**quiet, "two": [1.0, 1.2]}, 0.05) == {}
    assert outlying_spreads({"flat": [1.0, 1.0, 1.0], "flat2": [2.0, 2.0, 2.0], "wide": [1.0, 1.1, 1.2]}, 0.05) == {}
    assert outlying_spreads({**quiet, "moderate": [1.0, 1.02, 1.04]}, 0.05) == {}  # 4× the rest's: under 8.03
    assert list(outlying_spreads({**quiet, "over": [1.0, 1.03, 1.06]}, 0.05)) == ["over"]  # 9×: over it
    # one-seed arms have no spread to screen: they neither join the rest nor count among the k of the Bonferroni screen
    singles = {f"single{i}": [1.0 + i] for i in range(30)}
    assert list(outlying_spreads({**quiet, "over": [1.0, 1.03, 1.06], **singles}, 0.05)) == ["over"]


def test_the_distribution_edges_are_exact():
    assert f_cdf(0.0, 2, 2) == 0.0 and f_cdf(-1.0, 1, 10) == 0.0  # F is never negative
    assert f_cdf(1.0, 2, 2) == pytest.approx(0.5, abs=1e-6)  # F(2, 2)'s CDF is x / (1 + x)


def test_nested_growth_needs_both_lengths_and_one_whole_long_window():
    assert nested_growth({"1": [1.0, 2.0]}, 2) is None and nested_growth({"2": [1.0]}, 2) is None
    assert nested_growth({"1": [1.0], "2": [3.0]}, 2) is None  # one short window: no long one is covered whole
    assert nested_growth({"1": [1.0, 2.0, 9.0], "2": [3.0, 5.0]}, 2) == [1.5]


def test_sources_scoring_the_same_items_are_paired_only_when_said():
    """Two sources of one size, the second the first plus 1 item by item: drawn with one set of indices
    (same_items) their difference never varies; drawn apart (the default: other items that merely number the same)
    it does."""
    rng = np.random.default_rng(3)
    pairs = rng.integers(0, 2, 40).astype(float)
    run = Samples({"pairs": pairs.tolist(), "pairs_floor": (pairs + 1.0).tolist()})
    interval, none = Interval(0.95, 400, seed=1), [Spread(0.0, 0, "none")]
    paired = interval.contrast(difference_quantity("pairs_floor", "pairs"), ["pairs_floor", "pairs"], [(1.0, [run])],
                               none, same_items=True)
    apart = interval.contrast(difference_quantity("pairs_floor", "pairs"), ["pairs_floor", "pairs"], [(1.0, [run])],
                              none)
    assert paired.value == apart.value == pytest.approx(1.0)
    assert paired.eval_se == pytest.approx(0.0, abs=1e-12) and apart.eval_se > 0.05


def test_the_change_between_curve_points_reads_the_same_windows_at_both_points():
    run = Samples({"curve": {"steps": [10, 20, 30], "windows": [[3.0, 3.0, 3.0], [2.0, 2.5], [1.0, 1.5, 2.0]]}})
    assert run.mean("curve_change:1") is None  # 3 windows, then 2: not the same windows
    assert run.mean("curve_change:2") is None and run.mean("curve_change:0") is None
    steady = Samples({"curve": {"steps": [10, 20], "windows": [[3.0, 3.0], [2.0, 2.5]]}})
    assert steady.mean("curve_change:1") == pytest.approx(-0.75)  # (−1.0 − 0.5) / 2: the first change is one
