"""The course's commands on its Chinese corpus: `miniformer course`, then every command of the README's course table,
as written (slow: about two minutes)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.studies import ROOT, project_copy, sh

pytestmark = pytest.mark.slow


def course_table_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("| course project | module |"):readme.index("## Running the study yourself")]
    return re.findall(r"`(miniformer [^`]+)`\s*\|\s*$", table, flags=re.M)


def test_the_course_table_is_read():
    commands = course_table_commands()
    assert len(commands) == 6 and any("我打你然后你打我" in c for c in commands)


def test_every_course_table_command_runs_as_written_after_miniformer_course(tmp_path):
    from miniformer.study.roles import COURSE_RUNS

    study = project_copy(tmp_path / "study")
    sh(study, "python", "-m", "miniformer", "course", timeout=1200)
    for command in course_table_commands():
        words = shlex.split(command)
        assert words[2] in COURSE_RUNS, command  # the table uses only the runs `miniformer course` trains
        done = sh(study, "python", "-m", *words)
        assert "Traceback" not in done.stderr and "note: no installed font" not in done.stderr, command
    assert (study / "attention.png").stat().st_size > 0 and (study / "heads.png").stat().st_size > 0


def test_the_heatmap_of_the_course_line_has_every_glyph():
    """我打你然后你打我 draws with a font installed by pip (no Debian font needed): no glyph is missing."""
    from miniformer.study.figures import glyph_note, missing_glyphs

    assert missing_glyphs("我打你然后你打我") == [] and glyph_note("我打你然后你打我") is None
    assert missing_glyphs("\u0f00") == ["\u0f00"]  # and the check can fail: a Tibetan syllable no font here draws
    assert "pip install noto-cjk-sans-otc" in glyph_note("\u0f00")


def test_a_corpus_packaged_for_the_course_loads_by_name():
    from miniformer.corpus import PACKAGED, check_versioned, load_corpus

    splits = load_corpus("ershinian", 0.05, 0.05, 2, 2, 0)
    assert "我" in splits.train and "打" in splits.val + splits.train and len(splits.train) > 400_000
    check_versioned("ershinian")  # versioned with the code: the DAG accepts it
    assert Path(PACKAGED["ershinian"]).is_file()
