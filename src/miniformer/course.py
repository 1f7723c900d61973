"""The course notebook's checker: a student's attention primitive against the package's own, on random tensors.

``check(fn)`` looks the primitive up by the function's name, feeds both implementations the same random inputs (a
few shapes, batched and not) and says in one line whether they agree; a wrong implementation raises an AssertionError
that names the first input shape where the two differ. ``solution(name)`` is what a stub calls before the student
fills it in: the package's function when ``MINIFORMER_COURSE_SOLUTIONS=1`` (how the tests run the notebook headless),
else a NotImplementedError asking for the student's code.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import torch

from miniformer.network import attention

# name -> (the package's function, a maker of random arguments for a given generator)
Args = Callable[[torch.Generator], tuple]


def _qk(g: torch.Generator, b: int = 2, t: int = 5, d: int = 8) -> tuple:
    return torch.randn(b, t, d, generator=g), torch.randn(b, t, d, generator=g)


CASES: dict[str, tuple[Callable, list[Args]]] = {
    "pairwise_similarities": (attention.pairwise_similarities, [
        lambda g: _qk(g), lambda g: _qk(g, 1, 7, 3), lambda g: (torch.randn(2, 3, 4, 6, generator=g),
                                                                 torch.randn(2, 3, 4, 6, generator=g))]),
    "attn_scaled": (attention.attn_scaled, [
        lambda g: (torch.randn(2, 5, 5, generator=g), 64, 4), lambda g: (torch.randn(3, 3, generator=g), 32, 2)]),
    "attn_softmax": (attention.attn_softmax, [
        lambda g: (torch.randn(2, 5, 5, generator=g) * 3,), lambda g: (torch.randn(4, 7, generator=g),)]),
    "compute_outputs": (attention.compute_outputs, [
        lambda g: (torch.softmax(torch.randn(2, 5, 5, generator=g), -1), torch.randn(2, 5, 8, generator=g))]),
    "make_causal_mask": (attention.make_causal_mask, [lambda g: (1,), lambda g: (4,), lambda g: (9,)]),
    "apply_causal_mask": (attention.apply_causal_mask, [
        lambda g: (attention.make_causal_mask(5), torch.randn(2, 5, 5, generator=g)),
        lambda g: (attention.make_causal_mask(3), torch.randn(3, 3, generator=g))]),
    "split_heads_qkv": (attention.split_heads_qkv, [
        lambda g: (*(torch.randn(2, 5, 12, generator=g) for _ in range(3)), 3),
        lambda g: (*(torch.randn(1, 4, 8, generator=g) for _ in range(3)), 1)]),
    "merge_heads": (attention.merge_heads, [lambda g: (torch.randn(2, 3, 5, 4, generator=g),)]),
}


def _same(a, b) -> bool:
    if isinstance(a, tuple | list):
        return isinstance(b, tuple | list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if not isinstance(b, torch.Tensor) or a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(torch.allclose(a, b, atol=1e-5, equal_nan=True)) if a.is_floating_point() else bool(torch.equal(a, b))


def _shapes(args: tuple) -> str:
    return ", ".join(str(tuple(a.shape)) if isinstance(a, torch.Tensor) else repr(a) for a in args)


def check(fn: Callable) -> str:
    """Compare ``fn`` with the package's primitive of the same name on random inputs; one line either way."""
    if fn.__name__ not in CASES:
        raise KeyError(f"no check for {fn.__name__!r}; the primitives are {', '.join(CASES)}")
    reference, makers = CASES[fn.__name__]
    for k, make in enumerate(makers):
        args = make(torch.Generator().manual_seed(k))
        expected = reference(*args)
        try:
            got = fn(*args)
        except NotImplementedError:
            raise
        except Exception as e:  # noqa: BLE001 - any failure of the student's code is the answer to report
            raise AssertionError(f"✗ {fn.__name__}({_shapes(args)}) raised {type(e).__name__}: {e}") from None
        if not _same(expected, got):
            shape = getattr(got, "shape", type(got).__name__)
            raise AssertionError(f"✗ {fn.__name__}({_shapes(args)}) differs from the reference (got "
                                 f"{tuple(shape) if isinstance(shape, torch.Size) else shape}, expected "
                                 f"{tuple(expected.shape) if isinstance(expected, torch.Tensor) else 'a tuple'})")
    message = f"✓ {fn.__name__} matches miniformer's on {len(makers)} random input(s)"
    print(message)
    return message


def solution(name: str) -> Callable:
    """The package's primitive, for headless runs of the notebook; otherwise the student has code to write."""
    if os.environ.get("MINIFORMER_COURSE_SOLUTIONS") == "1":
        return CASES[name][0]
    raise NotImplementedError(f"{name}: write your code in this cell (the comment says what it computes)")
