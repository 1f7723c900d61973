"""Figures for the report (and `miniformer attention`): each function draws one figure and returns it."""

from __future__ import annotations

import base64
import io
import zlib

import matplotlib
import matplotlib.font_manager
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

# No backend is chosen here: a notebook that imports this module keeps its inline figures. The CLI (and so the DAG's
# report and `miniformer attention`) picks the file-only Agg backend before anything imports matplotlib (cli.main).

# Tick labels are the corpus' own characters, in any script: matplotlib falls back glyph by glyph along this list, so
# Latin text keeps DejaVu Sans and CJK text (我打你) takes a CJK font: Noto Sans CJK from the `noto-cjk-sans-otc` wheel
# (the `course` extra, which `make venv` installs: no system package needed), Debian's fonts-wqy-microhei or Noto CJK,
# or the fonts macOS (PingFang, Heiti, Hiragino, Arial Unicode) and Windows (Microsoft YaHei, SimHei, DengXian) ship.
CJK_FONTS = ["Noto Sans CJK SC", "Noto Sans CJK JP", "WenQuanYi Micro Hei", "Source Han Sans SC", "PingFang SC",
             "Heiti SC", "STHeiti", "Hiragino Sans GB", "Arial Unicode MS", "Microsoft YaHei", "SimHei", "DengXian"]
CJK_FILES = ("wqy", "notosanscjk", "noto-cjk", "sourcehansans")  # how the Linux fonts' files are named on disk


def installed_fonts() -> set[str]:
    """The font names matplotlib can use. Its font list is cached on first use, so a CJK font installed after that
    (`apt-get install fonts-wqy-microhei` once a plot was drawn) is missing from it: such files are added from disk,
    and so is the font of the `noto-cjk-sans-otc` wheel, which matplotlib's own search never looks in."""
    manager = matplotlib.font_manager.fontManager
    if not {f.name for f in manager.ttflist} & set(CJK_FONTS):
        system = [p for p in matplotlib.font_manager.findSystemFonts()
                  if any(k in p.lower().replace(" ", "") for k in CJK_FILES)]
        for path in [*_wheel_fonts(), *system]:
                try:
                    manager.addfont(path)
                except (OSError, RuntimeError, ValueError):  # a file FreeType cannot read: the boxes stay
                    continue
    return {f.name for f in manager.ttflist}


def _wheel_fonts() -> list[str]:
    try:
        import noto_cjk_sans_otc
    except ImportError:
        return []
    return [str(noto_cjk_sans_otc.FONT_PATH)]


matplotlib.rcParams["font.family"] = ["DejaVu Sans", *(f for f in CJK_FONTS if f in installed_fonts())]


def missing_glyphs(text: str) -> list[str]:
    """The characters of ``text`` that no font in matplotlib's fallback list can draw (they would be empty boxes)."""
    from matplotlib.ft2font import FT2Font

    charmaps = []
    for family in matplotlib.rcParams["font.family"]:
        try:
            path = matplotlib.font_manager.findfont(family, fallback_to_default=False)
            charmaps.append(set(FT2Font(path).get_charmap()))
        except (ValueError, RuntimeError, OSError):
            continue
    return sorted({c for c in text if not c.isspace() and not any(ord(c) in m for m in charmaps)})


def glyph_note(text: str) -> str | None:
    """One line for a figure whose labels would draw as boxes, naming the fix; None when every glyph is there."""
    missing = missing_glyphs(text)
    if not missing:
        return None
    return (f"note: no installed font draws {''.join(missing[:10])}{'…' if len(missing) > 10 else ''}: the labels will "
            "be empty boxes; `pip install noto-cjk-sans-otc` (or on Debian `apt-get install fonts-wqy-microhei`; macOS "
            "and Windows have PingFang SC / Microsoft YaHei), then draw again")


# One colour per method in every figure: a name keeps its colour across figures (the report registers each position
# label under its experiment's colour, so "alibi" in the length figure is pos_alibi's colour in the curves).
PALETTE: dict[str, str] = {}
_CYCLE = [matplotlib.colors.to_hex(c) for c in plt.get_cmap("tab20").colors[::2] + plt.get_cmap("tab20").colors[1::2]]


def use_palette(names: list[str], aliases: dict[str, str] | None = None) -> None:
    """Give every name a colour, in order (the study's runs), and each alias the colour of the name it stands for."""
    PALETTE.clear()
    for i, name in enumerate(names):
        PALETTE[name] = _CYCLE[i % len(_CYCLE)]
    for alias, name in (aliases or {}).items():
        PALETTE[alias] = color_of(name)


def color_of(name: str) -> str:
    """The name's colour: registered, or a stable pick from the cycle (crc32, the same in every process)."""
    return PALETTE.get(name) or _CYCLE[zlib.crc32(name.encode()) % len(_CYCLE)]


def to_base64_png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _label(tok: str) -> str:
    return {"\n": "⏎", " ": "␣", "\t": "⇥"}.get(tok, tok)


def attention_heatmap(weights, tokens: list[str], title: str, ax=None):
    """One head's map: y = current position (query), x = attended-to token (key), ticks are the text's characters.
    Every map shares the colour scale 0–1 (a weight is a probability), so two maps compare by colour."""
    fig = None
    if ax is None:
        fig, ax = plt.subplots(figsize=(7, 6))
    labels = [_label(t) for t in tokens]
    sns.heatmap(
        np.asarray(weights),
        ax=ax,
        cmap="viridis",
        vmin=0,
        vmax=1,
        square=True,
        cbar=fig is not None,
        xticklabels=labels,
        yticklabels=labels,
    )
    ax.set_xlabel("attended-to token (key)")
    ax.set_ylabel("current position (query)")
    ax.set_title(title, fontsize=9)
    ax.tick_params(labelsize=max(5.0, min(11.0, 220 / max(len(tokens), 1))))  # legible for a short line
    ax.tick_params(axis="y", labelrotation=0)
    return fig or ax.figure


def head_grid(layer_weights, tokens: list[str], title: str):
    H = len(layer_weights)
    cols = min(H, 4)
    rows = (H + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 4 * rows), squeeze=False)
    for h, ax in enumerate(axes.flat):
        if h < H:
            attention_heatmap(layer_weights[h], tokens, f"head {h}", ax=ax)
        else:
            ax.axis("off")
    fig.suptitle(title)
    return fig


def curves(logs: dict[str, pd.DataFrame], column: str, title: str, ylabel: str = "loss (nats/char)",
           unigram: float | None = None, labels: dict[str, str] | None = None, source: str | None = None):
    """Step-log curves, one line per run; ``source`` says under the title which seed and which estimate they are."""
    fig, ax = plt.subplots(figsize=(7, 4))
    unigram_line(ax, unigram)
    for name, df in logs.items():
        if column in df and df[column].notna().any():
            ax.plot(df["step"], df[column], label=(labels or {}).get(name, name), color=color_of(name))
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.set_title(title if source is None else f"{title}\n{source}", fontsize=10 if source else None)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return fig


def loss_and_entropy(runs: dict[str, tuple[list[float], pd.DataFrame]]):
    """Zhai et al.'s view: the train loss of every step above, the mean attention entropy below, per run."""
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 5.5), sharex=True)
    for name, (losses, log) in runs.items():
        line = top.plot(range(1, len(losses) + 1), losses, lw=0.8, label=name, color=color_of(name))[0]
        if "mean_entropy" in log and log["mean_entropy"].notna().any():
            bottom.plot(log["step"], log["mean_entropy"], marker=".", color=line.get_color(), label=name)
    top.set_ylabel("train loss (every step)")
    bottom.set_ylabel("attention entropy (nats)")
    bottom.set_xlabel("step")
    top.set_title("Loss spikes and attention entropy")
    top.legend(fontsize=7)
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    return fig


def unigram_line(ax, unigram: float | None) -> None:
    """The no-context ceiling: a character model cannot lose much more than this, so growth saturates near it."""
    if unigram is not None:
        ax.axhline(unigram, color="black", ls=":", lw=1, label=f"unigram, no context ({unigram:.2f})")


def length_sweep(table: pd.DataFrame, block_size: int, unigram: float | None = None):
    """Loss vs evaluation length; methods with no value at a length (learned) are left out there, not faked."""
    fig, ax = plt.subplots(figsize=(7, 4))
    unigram_line(ax, unigram)
    for name, row in table.iterrows():
        xs = [m for m in table.columns if pd.notna(row[m])]
        ax.plot([m * block_size for m in xs], [row[m] for m in xs], marker="o", label=name, color=color_of(name))
    ax.set_xscale("log", base=2)
    return _past_the_block(fig, ax, block_size, "evaluation length (tokens); dashed = training block_size",
                           "val loss (nats/char)")


def per_position(series: dict[str, list[float]], length: int, block_size: int, unigram: float | None = None):
    fig, ax = plt.subplots(figsize=(7, 4))
    unigram_line(ax, unigram)
    for name, values in series.items():
        xs = np.linspace(0, length, num=len(values), endpoint=False) + length / len(values) / 2
        ax.plot(xs, values, label=name, color=color_of(name))
    return _past_the_block(fig, ax, block_size, "position in the sequence", "loss (nats/char, binned)")


def _past_the_block(fig, ax, block_size: int, xlabel: str, ylabel: str):
    """The length figures' common frame: the training block_size dashed, labels, legend, a light grid."""
    ax.axvline(block_size, color="grey", ls="--", lw=1)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return fig


def point_estimates(values: dict[str, float], errors: dict[str, float] | None, title: str, ylabel: str,
                    labels: dict[str, str] | None = None):
    """One point ± its interval per run, on an axis fitted to them: bars from 0 would hide the 0.05-sized effects the
    claims turn on, and a bar cut above 0 would draw its length wrong."""
    fig, ax = plt.subplots(figsize=(7, 3.6))
    names = list(values)
    for i, n in enumerate(names):
        ax.errorbar([i], [values[n]], yerr=[(errors or {}).get(n) or 0.0], marker="o", capsize=4, color=color_of(n))
    ax.set_xticks(range(len(names)), [(labels or {}).get(n, n) for n in names])
    ax.set_xlim(-0.5, len(names) - 0.5)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.tick_params(axis="x", rotation=30, labelsize=7)
    ax.grid(alpha=0.3, axis="y")
    return fig


def head_count(contrasts: dict[int, tuple[float, float, int]], reference: int, n_embd: int, min_width: int,
               rope: bool = False, unit: str = "char"):
    """Each head count's val loss minus the reference's (its 4 heads), ± the 95 % interval the claims table uses: the
    paired contrasts the verdicts read, not absolute losses whose bars hide the shared seeds. Counts whose heads are
    narrower than ``min_width`` (Vaswani's narrowest) are shaded: the counted verdict does not read them. Under RoPE a
    head of width d rotates d/2 frequency pairs, so more heads also means fewer positional frequencies per head."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0 if rope else 3.8))
    counts = sorted(contrasts)
    ax.errorbar(counts, [contrasts[h][0] for h in counts], yerr=[contrasts[h][1] for h in counts], marker="o",
                capsize=3, linestyle="none")
    ax.axhline(0, color="0.4", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xticks(counts, [f"{h}{' (ref.)' if h == reference else ''}\nd={n_embd // h}"
                           + (f"\n{n_embd // h // 2} freq." if rope else "")
                           + f"\n{contrasts[h][2]} seed{'s' if contrasts[h][2] != 1 else ''}" for h in counts])
    narrow = [h for h in counts if n_embd // h < min_width]
    if narrow:
        ax.axvspan(min(narrow) / 2 ** 0.5, max(narrow) * 2 ** 0.5, color="0.85", zorder=0,
                   label=f"heads narrower than {min_width} (outside Vaswani's range): a proxy")
        ax.legend(fontsize=8, loc="upper left")
    if rope:
        ax.set_title("with RoPE, more heads = fewer rotation frequencies per head (confounded)", fontsize=9)
    ax.set_xlabel("heads, head dim d" + (", RoPE frequencies per head" if rope else "") + ", seeds (fixed n_embd)")
    ax.set_ylabel(f"val loss − {reference} heads' (nats/{unit}), ± 95 %")
    ax.grid(alpha=0.3)
    return fig


def generation_quality(series: dict[str, list[tuple[str, float, float]]], real: float | None,
                       shuffled: float | None, block_size: int):
    """Trigram loss of generated text per position bin (mean over samples ± its 95 % interval), one line per method,
    with real held-out text and the same characters shuffled as the two ends of the scale."""
    fig, ax = plt.subplots(figsize=(7, 3.8))
    for name, points in series.items():
        xs = [int(b) for b, _, _ in points]
        ax.errorbar(xs, [v for _, v, _ in points], yerr=[h for _, _, h in points], marker="o", capsize=3,
                    label=name, color=color_of(name))
    if real is not None:
        ax.axhline(real, color="black", ls="--", lw=1, label=f"held-out text ({real:.2f})")
    if shuffled is not None:
        ax.axhline(shuffled, color="grey", ls=":", lw=1, label=f"its characters shuffled ({shuffled:.2f})")
    off_scale(ax, series, [v for v in (real, shuffled) if v is not None])
    ax.set_xscale("log", base=2)
    ticks = sorted({int(b) for points in series.values() for b, _, _ in points})
    ax.set_xticks(ticks, [f"{t}×" for t in ticks])
    ax.set_xlabel(f"position bin: up to this multiple of block_size ({block_size})")
    ax.set_ylabel("trigram loss of the generated text (nats/char)")
    ax.set_title("Generation quality inside and past the training length (lower = more like the training text)")
    ax.legend(fontsize=7)
    return fig


def off_scale(ax, series: dict[str, list[tuple[str, float, float]]], references: list[float]) -> None:
    """Cut the y-axis above the far-out points — a modified z-score over 3.5 (Iglewicz & Hoaglin 1993: 0.6745 × the
    distance from the median over the median absolute deviation), and above every reference line — so that one
    breakage far off the scale (the no-mask run writes text far worse than shuffled characters) does not squash the
    range the claims compare; each point cut off is written at the top edge with its value."""
    values = [v for points in series.values() for _, v, _ in points]
    if len(values) < 4:
        return
    median = float(np.median(values))
    spread = float(np.median([abs(v - median) for v in values]))
    top = max([median + 3.5 * spread / 0.6745, *references])
    beyond = [(name, int(b), v) for name, points in series.items() for b, v, _ in points if v > top]
    if not beyond:
        return
    ceiling = max([v + h for points in series.values() for _, v, h in points if v <= top] + references)
    ceiling += 0.15 * (ceiling - min(values + references))
    ax.set_ylim(top=ceiling)
    stacked: dict[int, int] = {}
    for name, b, v in beyond:
        stacked[b] = stacked.get(b, 0) + 1
        ax.annotate(f"{name}: {v:.1f} ↑", (b, ceiling), xytext=(0, -11 * stacked[b]), textcoords="offset points",
                    ha="center", fontsize=7, color=color_of(name))


def stability_map(cells: dict, unigram: float | None):
    """Final val loss per (norm placement, warm-up) row, in the order given, and learning-rate column; runs that
    diverged, sit at the unigram loss (learned nothing from context) or fail the claims' "trains" rule are marked."""
    rows = list(cells)
    lrs = sorted({lr for r in rows for lr in cells[r]})
    values = np.full((len(rows), len(lrs)), np.nan)
    notes = [["" for _ in lrs] for _ in rows]
    for i, r in enumerate(rows):
        for j, lr in enumerate(lrs):
            cell = cells[r].get(lr)
            if cell is None:
                notes[i][j] = "not run"
                continue
            values[i, j] = cell["val_loss"]
            mark = (" diverged" if cell["diverged"] else " = unigram" if cell["stuck"] else
                    "" if cell.get("trains", True) else " fails")  # fails: short of half the way to the reference
            notes[i][j] = f"{cell['val_loss']:.3f}{mark}"
    fig, ax = plt.subplots(figsize=(1.9 * len(lrs) + 3, 0.7 * len(rows) + 1.6))
    sns.heatmap(values, ax=ax, annot=np.array(notes), fmt="", cmap="rocket_r", cbar_kws={"label": "val loss"},
                vmax=unigram, xticklabels=[f"{lr:g}" for lr in lrs],
                yticklabels=[f"{norm}-norm, {warm_up}" for norm, warm_up in rows])
    for i, j in zip(*np.nonzero(np.isnan(values))):  # seaborn leaves a missing cell blank: say why it is empty
        ax.text(j + 0.5, i + 0.5, notes[i][j] or "n/a", ha="center", va="center", color="grey")
    ax.set_xlabel("peak learning rate")
    title = "Stability map: final val loss"
    ax.set_title(title + (f" (colour capped at the unigram loss {unigram:.3f})" if unigram is not None else ""))
    return fig


def effects_over_training(effects: dict[str, list]):
    """Each claim's val-loss effect (a − b, ± its interval) at every point of the training curve."""
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for label, points in effects.items():
        points = [(s, e) for s, e in points if e is not None]
        if not points:
            continue
        steps = [s for s, _ in points]
        values = np.array([e.value for _, e in points])
        half = np.array([e.half_width for _, e in points])
        line = ax.plot(steps, values, marker="o", label=label)[0]
        ax.fill_between(steps, values - half, values + half, color=line.get_color(), alpha=0.15)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlabel("step")
    ax.set_ylabel("val loss difference (nats)")
    ax.set_title("Effects over training (bands: the claims' intervals)")
    # beside the axes, never over them: a dozen labelled curves cover any corner "best" can find
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    fig.tight_layout()
    return fig


def uniformity_vs_depth(init: dict):
    """Mean pairwise cosine of token states against depth at initialisation, with and without residuals; the band is
    the 95 % range of the mean over random inits (t interval)."""
    from miniformer.study.stats import t_quantile

    fig, ax = plt.subplots(figsize=(7, 3.8))
    depths = init["depths"]
    for name, label in (("without_residual", "without residuals"), ("with_residual", "with residuals")):
        per_depth = [np.asarray(v, dtype=float) for v in init[name]["cosine"]]
        means = np.array([v.mean() for v in per_depth])
        half = np.array([t_quantile(0.95, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else 0.0
                         for v in per_depth])
        ax.plot(depths, means, marker="o", label=label)
        ax.fill_between(depths, means - half, means + half, alpha=0.25)
    ax.set_xscale("log", base=2)
    ax.set_xticks(depths, [str(d) for d in depths])
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("depth (blocks), freshly initialised")
    ax.set_ylabel("mean cosine between token states")
    ax.set_title(f"Token uniformity at init ({init['inits']} random inits per point)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig
