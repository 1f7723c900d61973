"""The report's figures, drawn from small fixtures: one colour per method across figures, the floors drawn, error bars
that are the tables' 95 % intervals."""

from __future__ import annotations

import matplotlib.colors
import numpy as np
import pandas as pd
import pytest

from miniformer.study import figures

LOG = pd.DataFrame({"step": [10, 20, 30], "val_loss": [3.0, 2.5, 2.2], "train_loss": [3.1, 2.6, 2.3]})


def line_colours(fig) -> dict[str, str]:
    return {line.get_label(): matplotlib.colors.to_hex(line.get_color()) for line in fig.axes[0].get_lines()}


@pytest.fixture(autouse=True)
def palette():
    # registered in another order than the figures draw them, so matplotlib's own colour cycle cannot pass for it
    figures.use_palette(["pos_t5", "heads_2", "pos_alibi", "pos_sinusoidal", "baseline"],
                        aliases={"rope (baseline)": "baseline", "sinusoidal": "pos_sinusoidal", "alibi": "pos_alibi",
                                 "t5": "pos_t5"})
    yield
    figures.PALETTE.clear()


def test_a_method_has_one_colour_in_every_figure():
    names = ["rope (baseline)", "sinusoidal", "alibi", "t5"]
    drawn = [
        figures.curves({n: LOG for n in names}, "val_loss", "position methods"),
        figures.length_sweep(pd.DataFrame({1: [2.0, 2.1, 2.2, 2.0], 2: [2.3, 2.9, 2.1, 2.1]}, index=names), 8),
        figures.per_position({n: [2.0, 2.1, 2.3] for n in names}, 24, 8),
    ]
    colours = [line_colours(fig) for fig in drawn]
    quality = figures.generation_quality({n: [("1", 2.0, 0.1), ("4", 2.5, 0.2)] for n in names}, 1.9, 8.4, 8)
    colours.append({c.get_label(): matplotlib.colors.to_hex(c.lines[0].get_color())
                    for c in quality.axes[0].containers})
    for name in names:
        assert len({c[name] for c in colours}) == 1, name  # the same colour in all four figures
    assert len({colours[0][n] for n in names}) == len(names)  # and a different one for each method
    points = figures.point_estimates({"baseline": 2.0, "pos_alibi": 2.1}, None, "block", "val loss")
    point_colours = [matplotlib.colors.to_hex(c.lines[0].get_color()) for c in points.axes[0].containers]
    assert point_colours == [colours[0]["rope (baseline)"], colours[0]["alibi"]]  # an experiment = its label's colour


def test_the_unigram_ceiling_is_drawn_where_a_loss_is_shown():
    for fig in (figures.length_sweep(pd.DataFrame({1: [2.0], 2: [2.3]}, index=["alibi"]), 8, unigram=3.25),
                figures.per_position({"alibi": [2.0, 2.1]}, 16, 8, unigram=3.25),
                figures.curves({"alibi": LOG}, "val_loss", "t", unigram=3.25)):
        ceiling = [line for line in fig.axes[0].get_lines() if line.get_label().startswith("unigram")]
        assert len(ceiling) == 1 and set(ceiling[0].get_ydata()) == {3.25}
    assert not any(line.get_label().startswith("unigram") for line in
                   figures.curves({"alibi": LOG}, "val_loss", "t").axes[0].get_lines())


HEAD_CONTRASTS = {1: (0.1, 0.03, 3), 4: (0.0, 0.0, 3), 8: (-0.01, 0.02, 3), 32: (0.2, 0.05, 1)}


def test_head_count_draws_the_contrasts_with_the_given_intervals():
    fig = figures.head_count(HEAD_CONTRASTS, 4, 128, 16)
    ax = fig.axes[0]
    bars = ax.collections[0].get_segments()  # one vertical segment per point: contrast ± half-width
    assert [round(float(np.ptp([p[1] for p in seg])) / 2, 6) for seg in bars] == [0.03, 0.0, 0.02, 0.05]
    assert [round(float(np.mean([p[1] for p in seg])), 6) for seg in bars] == [0.1, 0.0, -0.01, 0.2]  # not losses
    assert "− 4 heads'" in ax.get_ylabel()


def test_head_count_names_widths_seeds_and_the_range_outside_vaswanis():
    """Each tick says the head's width and how many seeds the point rests on; the counts whose heads are narrower than
    Vaswani's narrowest are shaded and named a proxy; with RoPE the axis says the frequencies per head, and the title
    that the two are confounded; under another position method it says neither."""
    fig = figures.head_count(HEAD_CONTRASTS, 4, 128, 16, rope=True)
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels == ["1\nd=128\n64 freq.\n3 seeds", "4 (ref.)\nd=32\n16 freq.\n3 seeds",
                      "8\nd=16\n8 freq.\n3 seeds", "32\nd=4\n2 freq.\n1 seed"]
    assert "confounded" in fig.axes[0].get_title() and "RoPE frequencies per head" in fig.axes[0].get_xlabel()
    (shade,) = fig.axes[0].patches
    assert shade.get_x() < 32 < shade.get_x() + shade.get_width() and shade.get_x() > 8  # 32 shaded; 8 (16 wide) not
    assert "proxy" in fig.axes[0].get_legend().get_texts()[0].get_text()
    plain = figures.head_count({1: (0.1, 0.03, 3), 4: (0.0, 0.0, 3)}, 4, 128, 16)
    assert "freq" not in " ".join(t.get_text() for t in plain.axes[0].get_xticklabels()) + plain.axes[0].get_title()
    assert "RoPE" not in plain.axes[0].get_xlabel() and not plain.axes[0].patches  # every head in range: no shade


def test_heatmap_labels_grow_for_a_short_line():
    short = figures.attention_heatmap(np.eye(3).tolist(), list("我打你"), "short")
    long = figures.attention_heatmap(np.eye(60).tolist(), list("x" * 60), "long")
    size = lambda fig: fig.axes[0].xaxis.get_ticklabels()[0].get_fontsize()  # noqa: E731
    assert size(short) >= 10 > size(long)


def test_block_estimates_sit_on_an_axis_that_shows_a_005_difference():
    """The block figure's points ± intervals on an axis fitted to them: a 0.05 difference at losses near 2 spans a
    visible share of the axis (bars from 0 made it 2 % of their height)."""
    fig = figures.point_estimates({"baseline": 2.00, "block_rmsnorm": 2.05, "block_post_norm": 2.02},
                                  {"baseline": 0.01, "block_rmsnorm": 0.01, "block_post_norm": 0.02}, "block", "val")
    low, high = fig.axes[0].get_ylim()
    assert low > 1.5 and (2.05 - 2.00) / (high - low) > 0.3
    segments = [c.lines[2][0].get_segments()[0] for c in fig.axes[0].containers]  # each point's error bar
    assert [round(seg[1][1] - seg[0][1], 6) for seg in segments] == [0.02, 0.02, 0.04]


def test_attention_maps_share_one_colour_scale():
    """A causal map (weights up to 1) and a no-mask map (weights up to 0.37) are drawn on the same 0–1 scale."""
    causal = np.tril(np.ones((4, 4))) / np.arange(1, 5)[:, None]
    spread = np.full((4, 4), 0.25) + np.eye(4) * 0.12
    for weights in (causal, spread):
        fig = figures.attention_heatmap(weights, list("abcd"), "map")
        assert fig.axes[0].collections[0].get_clim() == (0, 1)


def test_a_generation_far_past_the_others_is_written_at_the_edge_not_scaled_to():
    """The no-mask run's text scores 12 nats, the others 2.5–4.1 between held-out text (1.9) and shuffled text (3.9):
    the axis stops above the others' intervals and the lines, and the 12 is written at its edge. Where every run sits
    near the shuffled line (an untrained smoke model), nothing is cut."""
    rope = [("1", 2.5, 0.1), ("2", 3.0, 0.1), ("4", 4.1, 0.2)]
    series = {"rope": rope, "alibi": [("1", 2.6, 0.1), ("2", 2.7, 0.1), ("4", 2.8, 0.1)],
              "no mask": [("1", 12.0, 0.5), ("4", 11.0, 0.5)]}
    fig = figures.generation_quality(series, 1.9, 3.9, 8)
    assert 4.3 < fig.axes[0].get_ylim()[1] < 5.0
    assert [t.get_text() for t in fig.axes[0].texts] == ["no mask: 12.0 ↑", "no mask: 11.0 ↑"]
    untrained = {"rope": [("1", 9.0, 0.3), ("4", 10.9, 0.4)], "alibi": [("1", 9.4, 0.3), ("4", 10.2, 0.4)]}
    near = figures.generation_quality(untrained, 1.9, 8.4, 8)
    assert near.axes[0].get_ylim()[1] > 10.9 + 0.4 and not near.axes[0].texts


def test_a_step_log_curve_says_which_seed_and_which_estimate_it_shows():
    fig = figures.curves({"baseline": LOG}, "val_loss", "Position methods: val loss",
                         source="seed 0 of each run; the step log's estimate on 4 fixed val batches")
    assert fig.axes[0].get_title() == ("Position methods: val loss\n"
                                       "seed 0 of each run; the step log's estimate on 4 fixed val batches")


def test_a_stability_cell_the_rows_count_as_failing_says_so():
    """The warm-up row counts a run 0.08 below the unigram loss as failing: its cell in the map says the same."""
    cells = {("post", "warm-up"): {0.01: {"val_loss": 3.145, "diverged": False, "stuck": False, "trains": False}},
             ("pre", "warm-up"): {0.01: {"val_loss": 1.775, "diverged": False, "stuck": False, "trains": True}}}
    texts = [t.get_text() for t in figures.stability_map(cells, 3.227).axes[0].texts]
    assert "3.145 fails" in texts and "1.775" in texts


def test_a_stability_cell_that_did_not_run_says_so():
    """seaborn leaves a missing cell blank; the map writes "not run" in it, so an empty square is never a mystery."""
    cells = {("pre", "warm-up"): {0.002: {"val_loss": 1.8, "diverged": False, "stuck": False},
                             0.01: {"val_loss": 1.78, "diverged": False, "stuck": False}},
             ("pre", "no warm-up"): {0.01: {"val_loss": 1.9, "diverged": False, "stuck": False}}}
    texts = [t.get_text() for t in figures.stability_map(cells, 3.2).axes[0].texts]
    assert "not run" in texts and "1.900" in texts


def test_stability_rows_are_drawn_in_the_order_given_with_their_warm_up():
    cell = {"val_loss": 2.0, "diverged": False, "stuck": False}
    cells = {("pre", "warm-up"): {0.002: cell}, ("pre", "long warm-up"): {0.01: cell},
             ("post", "no warm-up"): {0.01: cell}}
    labels = [t.get_text() for t in figures.stability_map(cells, 3.2).axes[0].get_yticklabels()]
    assert labels == ["pre-norm, warm-up", "pre-norm, long warm-up", "post-norm, no warm-up"]


def test_the_effects_over_training_legend_sits_beside_the_curves_not_over_them():
    """A dozen labelled effects: the legend at loc="best" covered the curves. It goes beside the axes."""
    import matplotlib

    matplotlib.use("Agg")
    from miniformer.study.figures import effects_over_training
    from miniformer.study.stats import Estimate

    effects = {f"claim {i}: a − b": [(s, Estimate(0.1 * i - s / 1000, 0.02, 0, 0, 0.95)) for s in (100, 200, 300)]
               for i in range(12)}
    fig = effects_over_training(effects)
    fig.canvas.draw()
    ax = fig.axes[0]
    legend, axes_box = ax.get_legend().get_window_extent(), ax.get_window_extent()
    assert not legend.overlaps(axes_box)
    assert legend.x1 <= fig.bbox.x1 + 1  # and inside the figure, so it is not cut off
