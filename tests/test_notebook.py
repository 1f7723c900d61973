"""The course notebook: stored without outputs, its checks fail on wrong code, and it runs headless end to end."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import torch

from miniformer.course import CASES, check, solution
from miniformer.network import attention

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "course.ipynb"


def test_the_notebook_is_stored_without_outputs():
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(c["outputs"] == [] and c["execution_count"] is None for c in code)


def test_the_notebook_has_an_exercise_and_a_check_for_every_primitive():
    text = NOTEBOOK.read_text(encoding="utf-8")
    for name in CASES:
        assert f"def {name}(" in text and f"check({name})" in text and f'solution(\\"{name}\\")' in text, name


# One plausible mistake per primitive: each must be caught.
WRONG = {
    "pairwise_similarities": lambda Q, K: Q.transpose(-1, -2) @ K,  # contracts positions instead of channels
    "attn_scaled": lambda A, n_embd, n_heads: A / n_embd**0.5,  # the model width, not the head width
    "attn_softmax": lambda A: torch.softmax(A, dim=0),  # over queries
    "compute_outputs": lambda A, V: A.transpose(-1, -2) @ V,
    "make_causal_mask": lambda n: torch.ones(n, n, dtype=torch.bool).triu(),  # looks ahead
    "apply_causal_mask": lambda mask, A: A.masked_fill(~mask, 0.0),  # zero is not -inf
    "split_heads_qkv": lambda Q, K, V, h: tuple(X.reshape(X.size(0), h, X.size(1), -1) for X in (Q, K, V)),
    "merge_heads": lambda X: X.reshape(X.size(0), X.size(2), -1),  # no transpose back
}


@pytest.mark.parametrize("name", list(CASES))
def test_each_check_fails_on_a_wrong_implementation_and_passes_the_right_one(name):
    wrong = WRONG[name]
    wrong.__name__ = name
    with pytest.raises(AssertionError, match=f"✗ {name}"):
        check(wrong)
    right = getattr(attention, name)
    assert check(right).startswith(f"✓ {name}")


def test_a_stub_asks_for_code_unless_the_solutions_are_switched_on(monkeypatch):
    monkeypatch.delenv("MINIFORMER_COURSE_SOLUTIONS", raising=False)
    with pytest.raises(NotImplementedError, match="write your code"):
        solution("attn_softmax")
    monkeypatch.setenv("MINIFORMER_COURSE_SOLUTIONS", "1")
    assert solution("attn_softmax") is attention.attn_softmax


@pytest.mark.slow
def test_the_notebook_runs_headless(tmp_path, monkeypatch):
    """Executed as a student would run it (solutions switched on): primitives, heatmap, a 200-step model, its loss
    log, one sentence's loss and perplexity, a generation."""
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("MINIFORMER_COURSE_SOLUTIONS", "1")
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")  # the venv's kernel
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    for name in CASES:
        assert f"✓ {name} matches" in printed, name
    assert "upper triangle: causal 0.0" in printed and "perplexity" in printed and "trained 200 steps" in printed
