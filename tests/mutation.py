"""Mutation check: does the test suite notice when the code under test is subtly wrong?

Each mutant changes one thing in one module — a comparison (< ↔ >=, == ↔ !=, in ↔ not in, …), `and` ↔ `or`, an
arithmetic operator (+ ↔ −, × ↔ ÷), a numeric constant (n → n + 1, x → 2x), a returned value (→ None), or deletes one
statement (→ `pass`) — writes it, runs the given tests, and restores the file.

Only a test failure (pytest exit 1) kills a mutant. A mutant the tests still pass *survived*: a gap in the tests, or a
change that does not matter (an equivalent mutant) — each survivor is printed with file:line and the source line
before and after, to be read. Timeouts, errors (collection or import errors, pytest exit 2-4) and "no tests ran"
(exit 5) are counted apart and are not in the score: none of them is evidence that a test noticed the change.

Before any mutant: the unmutated tests must pass (else every mutant would look killed), and the module must be the one
Python imports (an editable install pointing at another checkout would make every mutant silently survive); the tests
run with this checkout's src/ first on the path, so a copy of the repository can be mutated while you work in another.

Tests run in a child forked from a process that has already imported the heavy libraries (torch, numpy, pytest), so a
mutant costs its tests, not an interpreter start. The child writes no bytecode, nor does any process its tests
start, so no stale .pyc can hide a mutant.

    python tests/mutation.py src/miniformer/study/stats.py -- tests/test_stats.py
    python tests/mutation.py src/miniformer/runtime/schedule.py -- tests/test_known_values.py

It edits the module in place while it runs (and restores it, even on Ctrl-C): do not edit the tree meanwhile.
"""

from __future__ import annotations

import argparse
import ast
import copy
import difflib
import os
import random
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy  # noqa: F401  (imported once here so that each forked test run starts with it loaded)
import pytest
import torch  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]

COMPARE_SWAP = {ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt, ast.Eq: ast.NotEq,
                ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}
BINOP_SWAP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Mult,
              ast.Pow: ast.Mult, ast.Mod: ast.FloorDiv}
KILLED, SURVIVED, TIMEOUT, ERROR, NO_TESTS = "killed", "SURVIVED", "timeout", "error", "no tests"


@dataclass
class Site:
    """One place a mutant can change: the node's index among the walk of the tree, and what the mutant does."""

    index: int
    kind: str
    line: int
    description: str


def _skipped_nodes(tree: ast.AST) -> set[int]:
    """Annotations and docstrings are not behaviour."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        for ann in (getattr(node, "annotation", None), getattr(node, "returns", None)):
            if ann is not None:
                skip |= {id(n) for n in ast.walk(ann)}
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            skip |= {id(n) for n in ast.walk(body[0])}
    return skip


def _deletable(node: ast.AST, parent_bodies: set[int]) -> bool:
    """A statement inside a function body whose deletion still parses (not a def, class or lone `pass`)."""
    return (id(node) in parent_bodies and isinstance(node, ast.stmt)
            and not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Pass
                               | ast.Import | ast.ImportFrom | ast.Global | ast.Nonlocal))


def _function_statements(tree: ast.AST) -> set[int]:
    """Ids of statements that sit (at any depth) inside a function: module-level set-up is not a mutant site."""
    inside: set[int] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            inside |= {id(n) for n in ast.walk(fn) if n is not fn}
    return inside


def sites(tree: ast.AST, lines: range | None = None) -> list[Site]:
    """Every mutant of the tree, in a fixed order (the order of ast.walk)."""
    skip, in_functions = _skipped_nodes(tree), _function_statements(tree)
    found = []
    for i, node in enumerate(ast.walk(tree)):
        line = getattr(node, "lineno", None)
        if line is None or id(node) in skip or (lines is not None and line not in lines):
            continue
        if isinstance(node, ast.Compare) and type(node.ops[0]) in COMPARE_SWAP:
            found.append(Site(i, "compare", line, f"{type(node.ops[0]).__name__} -> "
                                                  f"{COMPARE_SWAP[type(node.ops[0])].__name__}"))
        elif isinstance(node, ast.BoolOp):
            found.append(Site(i, "boolop", line, "and <-> or"))
        elif isinstance(node, ast.BinOp) and type(node.op) in BINOP_SWAP:
            found.append(Site(i, "binop", line, f"{type(node.op).__name__} -> {BINOP_SWAP[type(node.op)].__name__}"))
        elif isinstance(node, ast.Constant) and type(node.value) in (int, float):
            found.append(Site(i, "constant", line, f"constant {node.value!r} changed"))
        if isinstance(node, ast.Return) and node.value is not None and not (
                isinstance(node.value, ast.Constant) and node.value.value is None):
            found.append(Site(i, "return", line, "return value -> None"))
        elif _deletable(node, in_functions):
            found.append(Site(i, "delete", line, f"{type(node).__name__} statement deleted"))
    return found


def mutate(tree: ast.AST, site: Site) -> ast.AST:
    """A copy of the tree with the one change ``site`` describes."""
    mutant = copy.deepcopy(tree)
    node = next(n for i, n in enumerate(ast.walk(mutant)) if i == site.index)
    if site.kind == "compare":
        node.ops[0] = COMPARE_SWAP[type(node.ops[0])]()
    elif site.kind == "boolop":
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif site.kind == "binop":
        node.op = BINOP_SWAP[type(node.op)]()
    elif site.kind == "constant":
        node.value = node.value + 1 if isinstance(node.value, int) else (node.value * 2 or 1.0)
    elif site.kind == "return":
        node.value = ast.Constant(None)
    elif site.kind == "delete":
        _replace_statement(mutant, node, ast.Pass())
    return ast.fix_missing_locations(mutant)


def _replace_statement(tree: ast.AST, old: ast.stmt, new: ast.stmt) -> None:
    for parent in ast.walk(tree):
        for name in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(parent, name, None)
            if isinstance(block, list) and any(s is old for s in block):
                block[[s is old for s in block].index(True)] = new
                return
    raise ValueError("statement not found")


def changed_line(original: str, mutant_src: str, site: Site) -> tuple[str, str]:
    """The source line before the change, and the mutant's statement at that line (unparsed, so comments are gone)."""
    before = original.splitlines()[site.line - 1].strip()
    return before, _line_in(mutant_src, before)


def _line_in(mutant_src: str, before: str) -> str:
    """The mutant's line most like ``before`` (ast.unparse reflows code, so lines do not keep their numbers)."""
    candidates = [ln.strip() for ln in mutant_src.splitlines() if ln.strip()]
    best = difflib.get_close_matches(before, candidates, n=1, cutoff=0.0)
    return best[0] if best else "?"


@dataclass
class Outcome:
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys((KILLED, SURVIVED, TIMEOUT, ERROR, NO_TESTS),
                                                                          0))
    survivors: list[str] = field(default_factory=list)


def run_tests(tests: list[str], timeout: float, check_module: tuple[str, Path] | None = None) -> str:
    """Run pytest on ``tests`` in a forked child; its verdict: killed (exit 1), passed, timeout, error or no tests."""
    pid = os.fork()
    if pid == 0:  # the child: quiet, fresh imports of the project, then pytest
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.chdir(ROOT)
        # no bytecode, here or in a process the tests start: a mutant's .pyc could be reused for the next mutant of
        # the same size within the same second (set in the child: the tests importing this module write theirs)
        sys.dont_write_bytecode = True
        os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
        sys.path.insert(0, str(ROOT / "src"))  # this checkout's package, whatever an editable install points at
        if check_module is not None:
            import importlib

            module = importlib.import_module(check_module[0])
            os._exit(0 if Path(module.__file__).resolve() == check_module[1] else 7)
        code = pytest.main(["-x", "-q", "-p", "no:cacheprovider", "-m", "not slow", *tests])
        os._exit(int(code))
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return TIMEOUT
        time.sleep(0.02)
    code = os.waitstatus_to_exitcode(status)
    return {0: "passed", 1: KILLED, 5: NO_TESTS}.get(code, ERROR)


def module_name(path: Path) -> str:
    rel = path.resolve().relative_to(ROOT / "src")
    return ".".join(rel.with_suffix("").parts)


def function_lines(tree: ast.AST, name: str) -> range:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return range(node.lineno, node.end_lineno + 1)
    raise SystemExit(f"mutation: no function {name!r} in the module")


def preflight(module: Path, tests: list[str], timeout: float) -> None:
    """Refuse to score when the unmutated tests fail or the module Python imports is not this file."""
    if run_tests(tests, timeout, (module_name(module), module.resolve())) != "passed":
        raise SystemExit(f"mutation: `import {module_name(module)}` does not load {module}; install this checkout "
                         "(pip install -e .) or run from it")
    baseline = run_tests(tests, timeout)
    if baseline != "passed":
        raise SystemExit(f"mutation: the unmutated tests do not pass ({baseline}); fix them before scoring mutants")


def score(module: Path, tests: list[str], chosen: list[Site], tree: ast.AST, original: str, timeout: float
          ) -> Outcome:
    outcome = Outcome()
    rel = module.resolve().relative_to(ROOT)
    for k, site in enumerate(chosen, 1):
        mutant_src = ast.unparse(mutate(tree, site))
        module.write_text(mutant_src, encoding="utf-8")
        verdict = run_tests(tests, timeout)
        verdict = SURVIVED if verdict == "passed" else verdict
        outcome.counts[verdict] += 1
        if verdict == SURVIVED:
            before, after = changed_line(original, mutant_src, site)
            outcome.survivors.append(f"{rel}:{site.line}: {site.description}\n      - {before}\n      + {after}")
        print(f"[{k}/{len(chosen)}] {rel}:{site.line}: {site.description}: {verdict}", flush=True)
    return outcome


def report(module: Path, outcome: Outcome) -> float:
    c = outcome.counts
    decided = c[KILLED] + c[SURVIVED]
    pct = c[KILLED] / decided if decided else 0.0
    print(f"\n{module}: {c[KILLED]}/{decided} mutants killed ({pct:.0%}); not scored: {c[TIMEOUT]} timeout, "
          f"{c[ERROR]} error, {c[NO_TESTS]} no tests")
    for s in outcome.survivors:
        print("  survived:", s)
    return pct


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("module", type=Path)
    p.add_argument("--function", help="mutate only inside this function")
    p.add_argument("--sample", type=int, default=0, help="test this many mutants chosen at random (0 = all)")
    p.add_argument("--indices", default="", help="test only these mutants, by their [k/N] number in a full run's "
                   "output (comma-separated): to re-check the survivors of a run against new tests")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=120, help="seconds per test run (a hang is a timeout, not a kill)")
    p.add_argument("--min-score", type=float, default=0.0, help="exit 1 when the killed share is below this")
    p.add_argument("tests", nargs="+", help="test files or node ids, after --")
    args = p.parse_args()
    module = args.module
    original = module.read_text(encoding="utf-8")
    tree = ast.parse(original)
    all_sites = sites(tree, function_lines(tree, args.function) if args.function else None)
    chosen = sorted(random.Random(args.seed).sample(all_sites, args.sample), key=lambda s: s.index) \
        if 0 < args.sample < len(all_sites) else all_sites
    if args.indices:
        chosen = [all_sites[int(k) - 1] for k in args.indices.split(",")]
    preflight(module, args.tests, args.timeout)
    try:
        outcome = score(module, args.tests, chosen, tree, original, args.timeout)
    finally:
        module.write_text(original, encoding="utf-8")
    return 0 if report(module, outcome) >= args.min_score else 1


if __name__ == "__main__":
    sys.exit(main())
