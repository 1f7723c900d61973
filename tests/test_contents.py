"""The report's table of contents: every section heading is anchored and listed, in order, nothing invented."""

from __future__ import annotations

import re

import pytest

from miniformer.study.contents import MARK, with_contents


def test_every_heading_gets_an_anchor_and_a_line_in_the_contents():
    page = (f"<h1>t</h1>{MARK}<h2>3. Positions</h2><h3>我打你 / 你打我</h3><h3>Loss &amp; length</h3>"
            '<h2 id="claims">Claims</h2><h2>3. Positions</h2>')
    out = with_contents(page)
    ids = re.findall(r'<h[23] id="([^"]+)"', out)
    assert ids == ["3-positions", "我打你-你打我", "loss-length", "claims", "3-positions-2"]
    links = re.findall(r'<a href="#([^"]+)">', out)
    assert links == ids  # in page order, one per heading, the existing id kept
    assert out.index('<nav id="contents">') < out.index("<h2")
    assert MARK not in out and "<h1>t</h1>" in out


def test_the_report_template_refuses_a_name_no_section_gave():
    """StrictUndefined: a misspelt name in report.html.j2 is an error at render time, never an empty cell."""
    import jinja2

    from miniformer.stages.report import template_environment

    with pytest.raises(jinja2.exceptions.UndefinedError, match="nope"):
        template_environment().from_string("<td>{{ nope }}</td>").render()
    assert template_environment().from_string("{{ x }}").render(x=1) == "1"
