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
    bars = figures.bars({"baseline": 2.0, "pos_alibi": 2.1}, None, "block", "val loss")
    bar_colours = [matplotlib.colors.to_hex(p.get_facecolor()) for p in bars.axes[0].patches]
    assert bar_colours == [colours[0]["rope (baseline)"], colours[0]["alibi"]]  # an experiment = its label's colour


def test_the_unigram_ceiling_is_drawn_where_a_loss_is_shown():
    for fig in (figures.length_sweep(pd.DataFrame({1: [2.0], 2: [2.3]}, index=["alibi"]), 8, unigram=3.25),
                figures.per_position({"alibi": [2.0, 2.1]}, 16, 8, unigram=3.25),
                figures.curves({"alibi": LOG}, "val_loss", "t", unigram=3.25)):
        ceiling = [line for line in fig.axes[0].get_lines() if line.get_label().startswith("unigram")]
        assert len(ceiling) == 1 and set(ceiling[0].get_ydata()) == {3.25}
    assert not any(line.get_label().startswith("unigram") for line in
                   figures.curves({"alibi": LOG}, "val_loss", "t").axes[0].get_lines())


def test_head_count_error_bars_are_the_given_intervals():
    fig = figures.head_count([1, 4, 32], [2.1, 2.0, 2.2], [0.03, 0.01, 0.05], 128)
    bars = fig.axes[0].collections[0].get_segments()  # one vertical segment per point: mean ± half-width
    assert [round(float(np.ptp([p[1] for p in seg])) / 2, 6) for seg in bars] == [0.03, 0.01, 0.05]


def test_heatmap_labels_grow_for_a_short_line():
    short = figures.attention_heatmap(np.eye(3).tolist(), list("我打你"), "short")
    long = figures.attention_heatmap(np.eye(60).tolist(), list("x" * 60), "long")
    size = lambda fig: fig.axes[0].xaxis.get_ticklabels()[0].get_fontsize()  # noqa: E731
    assert size(short) >= 10 > size(long)
