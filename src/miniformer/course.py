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

import math
import os
from collections.abc import Callable

import torch
from torch import Tensor, nn

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


def textbook_self_attention(Q: Tensor, K: Tensor, V: Tensor, n_heads: int, causal: bool = True) -> Tensor:
    q, k, v = textbook_split(Q, K, V, n_heads)
    A = textbook_scaled(textbook_similarities(q, k), Q.size(-1), n_heads)
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
    return None


# --- the exercises: a textbook computation, its invariant, and random inputs ----------------------------------------

Args = Callable[[torch.Generator], tuple]


def _qk(g: torch.Generator, b: int = 2, t: int = 5, d: int = 8) -> tuple:
    return torch.randn(b, t, d, generator=g), torch.randn(b, t, d, generator=g)


def _qkv(g: torch.Generator, b: int, t: int, c: int, h: int, causal: bool = True) -> tuple:
    return (*(torch.randn(b, t, c, generator=g) for _ in range(3)), h, causal)


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
        lambda g: _qkv(g, 2, 6, 16, 4), lambda g: _qkv(g, 1, 5, 8, 1), lambda g: _qkv(g, 2, 4, 12, 3, False)]),
}
PRIMITIVES = [n for n in CASES if n not in ("init_qkv_proj", "self_attention")]  # what the model can run


def _describe(x) -> str:
    if isinstance(x, Tensor):
        return f"{tuple(x.shape)} {str(x.dtype).removeprefix('torch.')}"
    if isinstance(x, tuple | list):
        return "(" + ", ".join(_describe(v) for v in x) + ")"
    return type(x).__name__


def _shapes(args: tuple) -> str:
    return ", ".join(str(tuple(a.shape)) if isinstance(a, Tensor) else repr(a) for a in args)


def _difference(expected, got) -> str | None:
    """None when equal; else what differs: structure, shape, dtype, or the largest difference and where."""
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
        return f"值不同 · differs at {where}: {got[tuple(where)].item()} vs {expected[tuple(where)].item()}"
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


def check(fn: Callable) -> None:
    """Compare ``fn`` with the textbook computation of the exercise of the same name; prints one line on success,
    raises an AssertionError naming the failing invariant, shape, dtype and largest difference otherwise."""
    name = fn.__name__
    if name not in CASES:
        raise KeyError(f"no check for {name!r}; the exercises are {', '.join(CASES)}")
    textbook, invariant, makers = CASES[name]
    for k, make in enumerate(makers):
        args = make(torch.Generator().manual_seed(k))
        try:
            got = fn(*args)
        except NotImplementedError:
            raise
        except Exception as e:  # noqa: BLE001 - any failure of the student's code is the answer to report
            raise AssertionError(f"✗ {name}({_shapes(args)}) raised {type(e).__name__}: {e}") from None
        reasons = []
        broken = _invariant(invariant, args, got)
        if broken:
            reasons.append(broken)
        if textbook is not None:
            why = _difference(textbook(*args), got)
            if why:
                reasons.append(why)
        if reasons:
            raise AssertionError(f"✗ {name}({_shapes(args)}) -> {_describe(got)}\n  " + "\n  ".join(reasons))
    print(f"✓ {name} matches the textbook computation on {len(makers)} random input(s)")


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
        return getattr(attention, name)
    raise NotImplementedError(f"{name}: write your code in this cell (the comment says what it computes)")
