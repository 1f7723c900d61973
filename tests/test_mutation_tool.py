"""The mutation tool scores only what a test noticed: a failure kills; errors, timeouts and empty selections do not."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import mutation  # noqa: E402

SOURCE = '''
def clip(x, top=3):
    """Docstring constants are not mutated: 7."""
    if x > top:
        x = top
    return x + 0
'''


def test_sites_cover_comparisons_constants_returns_and_statement_deletion():
    kinds = {(s.kind, s.line) for s in mutation.sites(ast.parse(SOURCE))}
    assert ("compare", 4) in kinds and ("constant", 2) in kinds and ("binop", 6) in kinds
    assert ("return", 6) in kinds and ("delete", 5) in kinds and ("delete", 4) in kinds
    assert not any(line == 3 for _, line in kinds)  # the docstring's 7


def test_statement_deletion_leaves_valid_code_that_behaves_differently():
    tree = ast.parse(SOURCE)
    site = next(s for s in mutation.sites(tree) if s.kind == "delete" and s.line == 5)
    namespace: dict = {}
    exec(ast.unparse(mutation.mutate(tree, site)), namespace)  # noqa: S102
    assert namespace["clip"](10) == 10  # `x = top` is gone


@pytest.mark.slow  # a fresh interpreter (or Snakemake) per case: seconds each
def test_only_a_test_failure_kills(tmp_path):
    root = mutation.ROOT
    folder = root / "tests" / f"_mutation_probe_{tmp_path.name}"
    folder.mkdir()
    try:
        cases = {"passes": "def test_ok():\n    assert True\n", "fails": "def test_bad():\n    assert False\n",
                 "errors": "import nonexistent_module_xyz\n", "slow_only": (
                     "import pytest\n@pytest.mark.slow\ndef test_slow():\n    assert False\n"),
                 "hangs": "import time\ndef test_hang():\n    time.sleep(60)\n"}
        verdicts = {}
        for name, text in cases.items():
            path = folder / f"test_{name}.py"
            path.write_text(text)
            verdicts[name] = mutation.run_tests([str(path.relative_to(root))], timeout=20 if name != "hangs" else 3)
        assert verdicts == {"passes": "passed", "fails": mutation.KILLED, "errors": mutation.ERROR,
                            "slow_only": mutation.NO_TESTS, "hangs": mutation.TIMEOUT}
    finally:
        for f in folder.iterdir():
            f.unlink()
        folder.rmdir()
