"""A small mutation check: does the test suite notice when the code under test is subtly wrong?

Each mutant flips one thing in one module — a comparison (< ↔ >=, == ↔ !=, …), `and` ↔ `or`, + ↔ −, × ↔ ÷, or a
numeric constant (n → n + 1, x → 2x) — writes it, runs the given tests, and restores the file. A mutant the tests still
pass ("survived") is either a gap in the tests or a change that does not matter (an equivalent mutant); read the list.

    python tests/mutation.py src/miniformer/study/findings.py -- tests/test_findings.py
    python tests/mutation.py src/miniformer/network/objectives.py --sample 40 -- \
        tests/test_core.py tests/test_fidelity.py

Run it on a copy of the repository you are not using: it edits the module in place while it runs.
"""

from __future__ import annotations

import argparse
import ast
import copy
import random
import subprocess
import sys
from pathlib import Path

COMPARE_SWAP = {ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt, ast.Eq: ast.NotEq,
                ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}
BINOP_SWAP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Mult}


def sites(tree: ast.AST) -> list[tuple[ast.AST, str]]:
    """Every node a mutant can change, with a description, in a fixed order."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and type(node.ops[0]) in COMPARE_SWAP:
            found.append((node, f"{type(node.ops[0]).__name__} -> {COMPARE_SWAP[type(node.ops[0])].__name__}"))
        elif isinstance(node, ast.BoolOp):
            found.append((node, "and <-> or"))
        elif isinstance(node, ast.BinOp) and type(node.op) in BINOP_SWAP:
            found.append((node, f"{type(node.op).__name__} -> {BINOP_SWAP[type(node.op)].__name__}"))
        elif isinstance(node, ast.Constant) and type(node.value) in (int, float) and not isinstance(node.value, bool):
            found.append((node, f"constant {node.value!r} changed"))
    return [(n, d) for n, d in found if getattr(n, "lineno", None)]


def mutate(node: ast.AST) -> None:
    if isinstance(node, ast.Compare):
        node.ops[0] = COMPARE_SWAP[type(node.ops[0])]()
    elif isinstance(node, ast.BoolOp):
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif isinstance(node, ast.BinOp):
        node.op = BINOP_SWAP[type(node.op)]()
    elif isinstance(node, ast.Constant):
        node.value = node.value + 1 if isinstance(node.value, int) else (node.value * 2 or 1.0)


def in_docstring_or_annotation(tree: ast.AST) -> set[int]:
    """Constants inside annotations and docstrings are not behaviour; skip them."""
    skip = set()
    for node in ast.walk(tree):
        for ann in [getattr(node, "annotation", None), getattr(node, "returns", None)]:
            if ann is not None:
                skip |= {id(n) for n in ast.walk(ann)}
    return skip


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("module", type=Path)
    p.add_argument("--sample", type=int, default=0, help="test this many mutants chosen at random (0 = all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=int, default=300, help="seconds per test run (a hang counts as killed)")
    p.add_argument("tests", nargs="+", help="test files or node ids, after --")
    args = p.parse_args()
    original = args.module.read_text(encoding="utf-8")
    tree = ast.parse(original)
    skip = in_docstring_or_annotation(tree)
    candidates = [i for i, (n, _) in enumerate(sites(tree)) if id(n) not in skip]
    chosen = sorted(random.Random(args.seed).sample(candidates, args.sample)) if 0 < args.sample < len(candidates) \
        else candidates
    killed, survived = 0, []
    try:
        for k, index in enumerate(chosen, 1):
            mutant = copy.deepcopy(tree)
            node, description = sites(mutant)[index]
            mutate(node)
            args.module.write_text(ast.unparse(mutant), encoding="utf-8")
            try:
                result = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                                         "-m", "not slow", *args.tests], capture_output=True, timeout=args.timeout)
                caught = result.returncode != 0
            except subprocess.TimeoutExpired:
                caught = True
            killed += caught
            if not caught:
                survived.append(f"line {node.lineno}: {description}")
            print(f"[{k}/{len(chosen)}] line {node.lineno}: {description}: {'killed' if caught else 'SURVIVED'}",
                  flush=True)
    finally:
        args.module.write_text(original, encoding="utf-8")
    total = len(chosen)
    print(f"\n{args.module}: {killed}/{total} mutants killed ({killed / max(total, 1):.0%})")
    for s in survived:
        print("  survived:", s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
