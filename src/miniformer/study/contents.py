"""A report's table of contents: every section heading gets an anchor, and the list of them goes where the template
marks it, so the contents can never name a section the page lacks (or miss one it has)."""

from __future__ import annotations

import html as html_lib
import re

MARK = "<!--contents-->"
_HEADING = re.compile(r"<h([23])(?P<attrs>[^>]*)>(?P<title>.*?)</h\1>", re.S)


def slug(title: str, taken: set[str]) -> str:
    """An anchor from a heading's text: lower case, letters and digits joined by '-', unique on the page."""
    text = re.sub(r"<[^>]+>", "", html_lib.unescape(title)).lower()
    base = "-".join(re.findall(r"\w+", text)) or "section"
    name, n = base, 2
    while name in taken:
        name, n = f"{base}-{n}", n + 1
    taken.add(name)
    return name


def with_contents(page: str) -> str:
    """The page with an id on every h2/h3 that has none and a nested list of links to them at MARK."""
    taken = set(re.findall(r'id="([^"]+)"', page))
    entries: list[tuple[int, str, str]] = []

    def anchor(m: re.Match) -> str:
        level, attrs, title = int(m.group(1)), m.group("attrs"), m.group("title")
        found = re.search(r'id="([^"]+)"', attrs)
        name = found.group(1) if found else slug(title, taken)
        entries.append((level, name, re.sub(r"<[^>]+>", "", title)))
        return m.group(0) if found else f'<h{level} id="{name}"{attrs}>{title}</h{level}>'

    page = _HEADING.sub(anchor, page)
    items, open_sub = [], False
    for level, name, title in entries:
        if level == 3 and not open_sub:
            items.append("<ul>")
            open_sub = True
        elif level == 2 and open_sub:
            items.append("</ul>")
            open_sub = False
        items.append(f'<li><a href="#{name}">{title}</a></li>')
    if open_sub:
        items.append("</ul>")
    nav = '<nav id="contents"><b>Contents</b><ul>' + "".join(items) + "</ul></nav>"
    return page.replace(MARK, nav, 1)
