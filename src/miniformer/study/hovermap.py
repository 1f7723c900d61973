"""Attention heatmaps a reader can explore: inline SVG, one rectangle per (query, key) cell whose <title> names the
query character, the key character and the weight — the browser shows it on hover, offline, with no script and no
network fetch. The report embeds one; `miniformer attention … --html` writes one page of them for your own text.
"""

from __future__ import annotations

import html

from matplotlib import colormaps

CELL = 22  # px: room for one character label per row and column
LABEL = 28  # px of margin for the axis labels


def _shown(token: str) -> str:
    return {"\n": "⏎", " ": "␠", "\t": "⇥"}.get(token, token)


def _colour(weight: float, top: float) -> str:
    r, g, b, _ = colormaps["viridis"](weight / top if top > 0 else 0.0)
    return f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"


def cell_title(i: int, j: int, query: str, key: str, weight: float) -> str:
    return f"query {i} {_shown(query)!r} → key {j} {_shown(key)!r}: {weight:.3f}"


def attention_svg(weights: list[list[float]], tokens: list[str], caption: str) -> str:
    """One head's map as SVG: rows are the current position (query), columns the attended-to token (key)."""
    n = len(tokens)
    top = max((w for row in weights for w in row), default=0.0)
    side = LABEL + n * CELL
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="hovermap" width="{side}" height="{side + 20}" '
             f'viewBox="0 0 {side} {side + 20}" role="img" aria-label="{html.escape(caption)}">',
             f'<text x="{LABEL}" y="14" font-size="12">{html.escape(caption)}</text>']
    for k, token in enumerate(tokens):
        label = html.escape(_shown(token))
        middle = LABEL + k * CELL + CELL // 2
        parts.append(f'<text x="{middle}" y="{side + 16}" font-size="13" text-anchor="middle">{label}</text>')
        parts.append(f'<text x="{LABEL - 6}" y="{20 + k * CELL + CELL // 2 + 5}" font-size="13" '
                     f'text-anchor="end">{label}</text>')
    for i, row in enumerate(weights):
        for j, w in enumerate(row):
            title = html.escape(cell_title(i, j, tokens[i], tokens[j], w))
            parts.append(f'<rect class="cell" data-q="{i}" data-k="{j}" x="{LABEL + j * CELL}" y="{20 + i * CELL}" '
                         f'width="{CELL}" height="{CELL}" fill="{_colour(w, top)}"><title>{title}</title></rect>')
    parts.append("</svg>")
    return "".join(parts)


def attention_page(maps: list[tuple[str, list[list[float]]]], tokens: list[str], heading: str) -> str:
    """A self-contained HTML page of hoverable maps (one per head)."""
    body = "".join(f"<figure>{attention_svg(w, tokens, caption)}</figure>" for caption, w in maps)
    return (f'<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(heading)}</title>'
            '<style>body{font-family:sans-serif}figure{display:inline-block;margin:8px}'
            'rect.cell:hover{stroke:#e00;stroke-width:2}</style></head>'
            f"<body><h1>{html.escape(heading)}</h1><p>Hover a cell: query character → key character: weight. Rows "
            "are the current position, columns the attended-to token.</p>"
            f"{body}</body></html>")
