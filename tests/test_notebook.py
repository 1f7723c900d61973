"""The course notebook: stored without outputs, its checks fail on wrong code, and it runs headless end to end."""

from __future__ import annotations

import json
import os
import re
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


def _no_scale_attention(Q, K, V, n_heads, causal=True):
    q, k, v = attention.split_heads_qkv(Q, K, V, n_heads)
    A = attention.pairwise_similarities(q, k)  # the scale forgotten
    if causal:
        A = attention.apply_causal_mask(attention.make_causal_mask(Q.size(1)), A)
    return attention.merge_heads(attention.compute_outputs(attention.attn_softmax(A), v))


def _one_projection_three_times(n_embd):
    layer = torch.nn.Linear(n_embd, n_embd)
    return layer, layer, layer


# One plausible mistake per exercise: each must be caught.
WRONG = {
    "init_qkv_proj": _one_projection_three_times,
    "self_attention": _no_scale_attention,
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
    check(getattr(attention, name))  # the package's own passes (and raises nothing)


def test_a_check_prints_one_line_and_returns_nothing(capsys):
    assert check(attention.attn_softmax) is None  # a notebook would echo a returned message a second time
    assert capsys.readouterr().out.count("✓ attn_softmax") == 1


# The three mistakes a student makes most: each message names the invariant that fails.
NAMED = [
    ("attn_softmax", lambda A: torch.softmax(A, dim=0), "sum to 1 over the keys"),
    ("make_causal_mask", lambda n: torch.ones(n, n, dtype=torch.bool).triu(), "lower triangular"),
    ("attn_scaled", lambda A, n_embd, n_heads: A / n_embd**0.5, "yours divides by √n_embd"),
]


@pytest.mark.parametrize(("name", "wrong", "invariant"), NAMED)
def test_a_failed_check_names_the_invariant_shape_and_largest_difference(name, wrong, invariant):
    wrong.__name__ = name
    with pytest.raises(AssertionError) as caught:
        check(wrong)
    message = str(caught.value)
    assert invariant in message
    assert "->" in message and ("largest difference" in message or "differs at" in message), message


def test_the_checker_does_not_trust_the_packages_own_functions(monkeypatch):
    """A package attn_softmax over the wrong dim must not pass: the reference is the textbook computation."""
    def attn_softmax(A):
        return torch.softmax(A, dim=-2)

    monkeypatch.setattr(attention, "attn_softmax", attn_softmax)
    with pytest.raises(AssertionError, match="sum to 1"):
        check(attention.attn_softmax)


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
    monkeypatch.delenv("MPLBACKEND", raising=False)  # Jupyter's own inline backend, as a student has it
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    for name in CASES:
        assert printed.count(f"✓ {name} matches") == 1, name  # once: a check prints, it returns nothing to echo
    assert "upper triangle: causal 0.0" in printed and "perplexity" in printed and "trained 200 steps" in printed
    assert "✓ 你的注意力训练成功 · your attention trained" in printed and "Generator" not in printed
    images = [c.source for c in nb.cells if c.cell_type == "code"
              for o in c.outputs if "image/png" in o.get("data", {})]
    assert any("attention_heatmap" in s for s in images) and any("plt.plot(log.step" in s for s in images)
    assert not list(tmp_path.glob("miniformer-course-*"))  # the last cell removed its temporary folder
    # §7: LoRA on q_proj and v_proj only (2 layers × 2 projections × r 8 × (64 + 64)), the loss lowered on held-out
    # lines of the new plays, the merged model exported and loaded back with its own logits
    assert "trainable params: 4,096 " in printed
    before, after = map(float, re.search(r"before LoRA ([\d.]+) -> after ([\d.]+)", printed).groups())
    assert after < before, (before, after)
    assert "loaded back: the same logits" in printed


# The same three mistakes, as a student would type them into the exercise cell.
MISTAKES = [
    ("attn_softmax", 'return solution("attn_softmax")(A)', "return torch.softmax(A, dim=0)", "sum to 1 over the keys"),
    ("make_causal_mask", 'return solution("make_causal_mask")(n_tok)',
     "return torch.ones(n_tok, n_tok, dtype=torch.bool).triu()", "lower triangular"),
    ("attn_scaled", 'return solution("attn_scaled")(A, n_embd, n_heads)', "return A / math.sqrt(n_embd)",
     "yours divides by √n_embd"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "stub", "mistake", "invariant"), MISTAKES)
def test_a_students_mistake_is_reported_in_its_own_cell(tmp_path, monkeypatch, name, stub, mistake, invariant):
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    monkeypatch.setenv("MINIFORMER_COURSE_SOLUTIONS", "1")
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code" and stub in c.source)
    cell.source = cell.source.replace(stub, mistake)
    client = NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    with pytest.raises(CellExecutionError):
        client.execute()
    failed = [c for c in nb.cells if c.cell_type == "code" and any(o.get("output_type") == "error" for o in c.outputs)]
    assert failed == [cell]
    error = next(o for o in cell.outputs if o.get("output_type") == "error")
    assert f"✗ {name}" in error["evalue"] and invariant in error["evalue"]


def _tiny_run(tmp_path, corpus):
    from miniformer.params import Study
    from miniformer.stages.prepare import prepare
    from tests.conftest import tiny_params

    study = Study(tiny_params(corpus))
    run = study.config("baseline", 0)
    prepare(study.data_config(), tmp_path / "data", min_tokens=200)
    return run


def test_the_model_trains_on_given_primitives_to_the_packages_loss(tmp_path, corpus):
    """Correct primitives handed in (as the notebook does) train to the package model's losses, step for step."""
    from miniformer.network.attention import Primitives
    from miniformer.stages.train import train

    run = _tiny_run(tmp_path, corpus)
    own = train(run, tmp_path / "data", tmp_path / "package", progress=False)
    given = train(run, tmp_path / "data", tmp_path / "given", progress=False,
                  primitives=Primitives(**{n: getattr(attention, n) for n in Primitives.__dataclass_fields__}))
    assert given["fingerprint"] != own["fingerprint"]  # another attention's training is never the package's
    assert given["final_train_loss"] == pytest.approx(own["final_train_loss"], abs=1e-3)


def test_a_wrong_primitive_changes_what_the_model_learns(tmp_path, corpus):
    from miniformer.network.attention import Primitives
    from miniformer.stages.train import train

    run = _tiny_run(tmp_path, corpus)
    own = train(run, tmp_path / "data", tmp_path / "package", progress=False)
    leaky = Primitives(make_causal_mask=lambda n: torch.ones(n, n, dtype=torch.bool).triu())  # sees the future
    wrong = train(run, tmp_path / "data", tmp_path / "leaky", progress=False, primitives=leaky)
    assert abs(wrong["final_train_loss"] - own["final_train_loss"]) > 0.05
