"""The course notebook's checker: a student's attention code against a textbook computation, with reasons.

``check(fn)`` looks the exercise up by the function's name, feeds the student's function a few random inputs (batched
and not) and compares it with an independent, deliberately plain computation of the same thing written here (loops,
einsum, explicit exp/sum — not the package's own functions, so a bug in the package cannot pass a wrong answer).
Before the comparison it tests the exercise's invariant (rows sum to 1 over the keys; the mask is boolean and lower
triangular; the scale is √(head dim); masked scores are −inf), and a failure says — in Chinese and English — which
invariant fails, the shape and dtype it got, and the largest difference and where. One printed line when it passes,
an ``AssertionError`` with the reasons when it does not (the notebook stops in the cell where the mistake is).

``solution(name)`` is what a stub calls before the student fills it in: the package's function when
``MINIFORMER_COURSE_SOLUTIONS=1`` (how the tests run the notebook headless), else a NotImplementedError asking for the
student's code.
"""

from __future__ import annotations

import functools
import math
import os
import sys
from collections.abc import Callable

import torch
from torch import Tensor, nn

from miniformer.course import answers
from miniformer.course.parts import PART_CASES
from miniformer.network import attention

# --- textbook computations: the definitions written out, independent of network/attention.py -----------------------


def textbook_similarities(Q: Tensor, K: Tensor) -> Tensor:
    return torch.einsum("...qd,...kd->...qk", Q, K)


def textbook_scaled(A: Tensor, n_embd: int, n_heads: int) -> Tensor:
    head_dim = n_embd // n_heads
    return A * head_dim**-0.5


def textbook_softmax(A: Tensor) -> Tensor:
    shifted = A - A.amax(dim=-1, keepdim=True)
    e = shifted.exp()
    return e / e.sum(dim=-1, keepdim=True)


def textbook_outputs(A: Tensor, V: Tensor) -> Tensor:
    return torch.einsum("...qk,...kd->...qd", A, V)


def textbook_causal_mask(n_tok: int) -> Tensor:
    return torch.tensor([[key <= query for key in range(n_tok)] for query in range(n_tok)], dtype=torch.bool)


def textbook_apply_mask(mask: Tensor, A: Tensor) -> Tensor:
    return torch.where(mask, A, torch.full_like(A, -math.inf))


def textbook_split(Q: Tensor, K: Tensor, V: Tensor, n_heads: int) -> tuple[Tensor, Tensor, Tensor]:
    def split(X: Tensor) -> Tensor:
        D = X.size(-1) // n_heads
        return torch.stack([X[..., h * D:(h + 1) * D] for h in range(n_heads)], dim=1)

    return split(Q), split(K), split(V)


def textbook_merge(X: Tensor) -> Tensor:
    return torch.cat([X[:, h] for h in range(X.size(1))], dim=-1)


def textbook_self_attention(Q: Tensor, K: Tensor, V: Tensor, n_heads: int, causal: bool = True,
                             bias: Tensor | None = None) -> Tensor:
    q, k, v = textbook_split(Q, K, V, n_heads)
    A = textbook_scaled(textbook_similarities(q, k), Q.size(-1), n_heads)
    if bias is not None:
        A = A + bias
    if causal:
        A = textbook_apply_mask(textbook_causal_mask(Q.size(1)), A)
    return textbook_merge(textbook_outputs(textbook_softmax(A), v))


# --- invariants: what must hold whatever the inputs, said in both languages ------------------------------------------


def _rows_sum_to_one(args: tuple, got: Tensor) -> str | None:
    sums = got.sum(dim=-1)
    if torch.allclose(sums, torch.ones_like(sums), atol=1e-4):
        return None
    return (f"每一行（对 key，即最后一维）之和应为 1 · each query's row must sum to 1 over the keys (the last dim); "
            f"yours sum to {sums.min().item():.2f}…{sums.max().item():.2f} — softmax over dim=-1?")


def _lower_triangular_bool(args: tuple, got: Tensor) -> str | None:
    n = args[0]
    if got.dtype != torch.bool:
        return f"掩码应为布尔型 · the mask must be boolean (True = may attend), got {got.dtype}"
    if got.shape != (n, n):
        return None  # the shape line says it
    if got.triu(1).any():
        return ("掩码必须是下三角：位置 i 只能看 j ≤ i · the mask must be lower triangular (True where key j <= query "
                "i): yours lets a position see the future (True above the diagonal)")
    if not got.diagonal().all():
        return "每个位置都应能看到自己（对角线为 True）· every position must see itself (True on the diagonal)"
    return None


def _scale_is_head_dim(args: tuple, got: Tensor) -> str | None:
    A, n_embd, n_heads = args
    ratio = (A.abs().sum() / got.abs().sum().clamp_min(1e-12)).item()
    want = math.sqrt(n_embd / n_heads)
    if math.isclose(ratio, want, rel_tol=1e-3):
        return None
    said = f"√n_embd = {math.sqrt(n_embd):.2f}" if math.isclose(ratio, math.sqrt(n_embd), rel_tol=1e-3) else \
        f"{ratio:.2f}"
    return (f"缩放应除以 √(head dim) = √(n_embd / n_heads) = {want:.2f} · the scale is √(head dim) = √(n_embd / "
            f"n_heads) = {want:.2f}; yours divides by {said}")


def _masked_are_minus_inf(args: tuple, got: Tensor) -> str | None:
    mask, A = args
    hidden = got.masked_select(~mask.expand_as(got)) if got.shape == A.shape else None
    if hidden is None or hidden.numel() == 0 or bool((hidden == -math.inf).all()):
        return None
    return ("被遮住的分数必须是 −∞（softmax 之后才恰好为 0）· masked scores must be −inf, so softmax gives them "
            f"exactly 0 weight; yours holds {hidden.flatten()[0].item():g} there")


def _three_linears(args: tuple, got) -> str | None:
    n = args[0]
    ok = isinstance(got, tuple | list) and len(got) == 3 and all(isinstance(m, nn.Linear) for m in got)
    if not ok:
        return f"应返回三个 nn.Linear（W_q, W_k, W_v）· return three nn.Linear layers (W_q, W_k, W_v), got {got!r:.80}"
    if any((m.in_features, m.out_features) != (n, n) for m in got):
        return f"每个投影都是 n_embd → n_embd = {n} → {n} · each projection maps n_embd -> n_embd ({n} -> {n})"
    if len({id(m) for m in got}) < 3 or any(got[0].weight is m.weight for m in got[1:]):
        return "三个投影必须是不同的层 · the three projections must be separate layers with their own weights"
    if any(m.bias is not None for m in got):
        return ("模型的层没有偏置 · the model's layers have no bias: nn.Linear(n_embd, n_embd, bias=False), so your "
                "projections can replace the model's")
    return None


# --- the exercises: a textbook computation, its invariant, and random inputs ----------------------------------------

Args = Callable[[torch.Generator], tuple]


def _qk(g: torch.Generator, b: int = 2, t: int = 5, d: int = 8) -> tuple:
    return torch.randn(b, t, d, generator=g), torch.randn(b, t, d, generator=g)


def _qkv(g: torch.Generator, b: int, t: int, c: int, h: int, causal: bool = True, bias: bool = False) -> tuple:
    qkv = tuple(torch.randn(b, t, c, generator=g) for _ in range(3))
    return (*qkv, h, causal, torch.randn(h, t, t, generator=g) if bias else None)


# name -> (textbook computation, invariant check or None, makers of random arguments)
CASES: dict[str, tuple[Callable, Callable | None, list[Args]]] = {
    "pairwise_similarities": (textbook_similarities, None, [
        lambda g: _qk(g), lambda g: _qk(g, 1, 7, 3), lambda g: (torch.randn(2, 3, 4, 6, generator=g),
                                                                 torch.randn(2, 3, 4, 6, generator=g))]),
    "attn_scaled": (textbook_scaled, _scale_is_head_dim, [
        lambda g: (torch.randn(2, 5, 5, generator=g), 64, 4), lambda g: (torch.randn(3, 3, generator=g), 32, 2)]),
    "attn_softmax": (textbook_softmax, _rows_sum_to_one, [
        lambda g: (torch.randn(2, 5, 5, generator=g) * 3,), lambda g: (torch.randn(4, 7, generator=g),)]),
    "compute_outputs": (textbook_outputs, None, [
        lambda g: (torch.softmax(torch.randn(2, 5, 5, generator=g), -1), torch.randn(2, 5, 8, generator=g))]),
    "make_causal_mask": (textbook_causal_mask, _lower_triangular_bool, [lambda g: (1,), lambda g: (4,),
                                                                         lambda g: (9,)]),
    "apply_causal_mask": (textbook_apply_mask, _masked_are_minus_inf, [
        lambda g: (textbook_causal_mask(5), torch.randn(2, 5, 5, generator=g)),
        lambda g: (textbook_causal_mask(3), torch.randn(3, 3, generator=g))]),
    "split_heads_qkv": (textbook_split, None, [
        lambda g: (*(torch.randn(2, 5, 12, generator=g) for _ in range(3)), 3),
        lambda g: (*(torch.randn(1, 4, 8, generator=g) for _ in range(3)), 1)]),
    "merge_heads": (textbook_merge, None, [lambda g: (torch.randn(2, 3, 5, 4, generator=g),)]),
    "init_qkv_proj": (None, _three_linears, [lambda g: (16,), lambda g: (8,)]),
    "self_attention": (textbook_self_attention, None, [
        lambda g: _qkv(g, 2, 6, 16, 4), lambda g: _qkv(g, 1, 5, 8, 1), lambda g: _qkv(g, 2, 4, 12, 3, False),
        lambda g: _qkv(g, 2, 5, 8, 2, bias=True)]),  # a position bias (ALiBi, T5) on the scores
}
PRIMITIVES = [n for n in CASES if n not in ("init_qkv_proj", "self_attention")]  # what the model can run
CASES.update(PART_CASES)  # projects 3, 5, 6, 7 and 8


def _describe(x) -> str:
    if isinstance(x, Tensor):
        return f"{tuple(x.shape)} {str(x.dtype).removeprefix('torch.')}"
    if isinstance(x, tuple | list):
        return "(" + ", ".join(_describe(v) for v in x) + ")"
    return type(x).__name__


def _shapes(args: tuple) -> str:
    def said(a) -> str:
        if isinstance(a, Tensor):
            return str(tuple(a.shape))
        return getattr(a, "__name__", "fn").replace("<lambda>", "fn") if callable(a) else repr(a)

    return ", ".join(said(a) for a in args)


def _difference(expected, got) -> str | None:
    """None when equal; else what differs: structure, shape, dtype, or the largest difference and where."""
    if expected is None:
        return None if got is None else f"应为 None · expected None, got {_describe(got)}"
    if isinstance(expected, tuple | list):
        if not isinstance(got, tuple | list) or len(got) != len(expected):
            return f"应返回 {len(expected)} 个张量 · expected a tuple of {len(expected)}, got {_describe(got)}"
        for i, (e, g) in enumerate(zip(expected, got)):
            why = _difference(e, g)
            if why:
                return f"[{i}] {why}"
        return None
    if not isinstance(got, Tensor):
        return f"应返回张量 · expected a tensor, got {type(got).__name__}"
    if got.shape != expected.shape:
        return f"形状不对 · shape {tuple(got.shape)}, expected {tuple(expected.shape)}"
    if got.dtype != expected.dtype:
        return f"类型不对 · dtype {got.dtype}, expected {expected.dtype}"
    if not expected.is_floating_point():
        if torch.equal(got, expected):
            return None
        where = (got != expected).nonzero()[0].tolist()
        return (f"值不同 · differs at {where}: yours {got[tuple(where)].item()}, textbook "
                f"{expected[tuple(where)].item()}")
    if torch.allclose(got, expected, atol=1e-5, equal_nan=False):
        return None
    diff = (got - expected).abs().nan_to_num(nan=math.inf)
    both_inf = (got == expected) & expected.isinf()
    diff = diff.masked_fill(both_inf, 0.0)
    where = tuple(int(i) for i in divmod_index(int(diff.argmax()), tuple(diff.shape)))
    return (f"最大差异 · largest difference {diff.max().item():.4g} at {list(where)}: yours "
            f"{got[where].item():.4g}, textbook {expected[where].item():.4g}")


def divmod_index(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for size in reversed(shape):
        flat, r = divmod(flat, size)
        out.append(r)
    return tuple(reversed(out))


# An exercise built from the student's earlier functions: when its check fails, those are checked too and a failing
# one is named (a student who skipped the check of attn_softmax learns it there, not from self_attention's numbers).
BUILT_FROM = {"self_attention": ["split_heads_qkv", "pairwise_similarities", "attn_scaled", "make_causal_mask",
                                 "apply_causal_mask", "attn_softmax", "compute_outputs", "merge_heads"],
              "MultiHeadAttention": ["init_qkv_proj", "self_attention"]}


def check(fn: Callable, name: str | None = None, namespace: dict | None = None) -> None:
    """Compare ``fn`` with the textbook computation of the exercise of the same name; prints one line on success,
    raises an AssertionError naming the failing invariant, shape, dtype and largest difference otherwise (and, for
    an exercise built from earlier ones, the earlier function of ``namespace`` — the caller's globals — that fails)."""
    __tracebackhide__ = True  # noqa: F841 - IPython and pytest show the message, not this function's frames
    name = name or fn.__name__
    if name not in CASES:
        raise KeyError(f"no check for {name!r}; the exercises are {', '.join(CASES)}")
    try:
        _compare(fn, name)
    except AssertionError as failed:
        culprit = _failing_part(name, sys._getframe(1).f_globals if namespace is None else namespace)
        if culprit:
            raise AssertionError(f"{failed}\n  → {culprit}") from None
        raise
    print(f"✓ {name} matches the textbook computation on {len(CASES[name][2])} random input(s)")


def _failing_part(name: str, namespace: dict) -> str | None:
    """'your X fails its own check: reason' for the first earlier function of ``name`` that fails, or None."""
    for part in BUILT_FROM.get(name, []):
        fn = namespace.get(part)
        if not callable(fn):
            continue
        try:
            _compare(fn, part)
        except AssertionError as failed:
            lines = str(failed).splitlines()
            reason = lines[min(1, len(lines) - 1)].strip()
            return f"你的 {part} 没有通过它自己的检查 · your {part} fails its own check: {reason}"
        except NotImplementedError:
            continue
    return None


# What each element of a returned tuple is, where the exercise returns one: a difference names it.
PARTS = {"causal_batch": ("x", "y", "mask"), "masked_batch": ("x", "y", "mask"), "prefix_batch": ("x", "y", "mask"),
         "split_heads_qkv": ("q", "k", "v"), "init_qkv_proj": ("W_q", "W_k", "W_v")}


def _compare(fn: Callable, name: str) -> None:
    __tracebackhide__ = True  # noqa: F841
    textbook, invariant, makers, *runner = CASES[name]
    for k, make in enumerate(makers):
        args = make(torch.Generator().manual_seed(k))
        try:
            if runner:  # a class or a training step: the runner builds, runs and gives both results
                got, expected = runner[0](fn, args)
            else:
                got, expected = fn(*args), (None if textbook is None else textbook(*args))
        except NotImplementedError:
            raise
        except AssertionError as e:
            if str(e).startswith("✗"):  # the runner's own sentence
                raise
            raise AssertionError(f"✗ {name}({_shapes(args)}) raised AssertionError: {e}") from None
        except Exception as e:  # noqa: BLE001 - any failure of the student's code is the answer to report
            raise AssertionError(f"✗ {name}({_shapes(args)}) raised {type(e).__name__}: {e}") from None
        reasons = []
        broken = _invariant(invariant, args, got)
        if broken:
            reasons.append(broken)
        if textbook is not None or runner:
            why = _difference(expected, got)
            if why:
                reasons.append(_named_part(name, why))
        if reasons:
            raise AssertionError(f"✗ {name}({_shapes(args)}) -> {_describe(got)}\n  " + "\n  ".join(reasons))


def _named_part(name: str, why: str) -> str:
    """'[1] …' as '[1] = y: …' where the exercise's tuple has names."""
    parts = PARTS.get(name)
    if parts and why.startswith("[") and (i := why[1:why.index("]")]).isdigit() and int(i) < len(parts):
        return f"[{i}] = {parts[int(i)]}: {why[why.index(']') + 2:]}"
    return why


def _invariant(invariant: Callable | None, args: tuple, got) -> str | None:
    """The invariant's complaint, or None; an output too malformed for it is left to the shape comparison."""
    if invariant is None:
        return None
    try:
        return invariant(args, got)
    except Exception:  # noqa: BLE001 - a wrong shape or type: the comparison below names it
        return None


def solution(name: str) -> Callable:
    """The package's function, for headless runs of the notebook; otherwise the student has code to write."""
    if os.environ.get("MINIFORMER_COURSE_SOLUTIONS") == "1":
        answer = getattr(answers, name.replace(".", "_"), None) or getattr(attention, name)
        if name in answers.CALLS_THE_STUDENTS:  # a student's answer calls their own functions: from their namespace
            return functools.partial(answer, using=sys._getframe(1).f_globals)
        return answer
    raise NotImplementedError(f"{name}: write your code in this cell (the comment says what it computes)")
