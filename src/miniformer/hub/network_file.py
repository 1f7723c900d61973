"""The network modules joined into one file for an export, so that transformers loads the folder without miniformer.

The modules are written in their import order with the imports between them removed; what they need besides
each other is torch and the standard library. The file is the package's code as it ran, not a copy kept by hand.
"""

from __future__ import annotations

import ast
from pathlib import Path

NETWORK = Path(__file__).resolve().parent.parent / "network"


def _network_imports(name: str) -> list[str]:
    """The network modules ``name`` imports at its top level (the ones it needs to run), as file names."""
    tree = ast.parse((NETWORK / name).read_text(encoding="utf-8"))
    return [node.module.rsplit(".", 1)[1] + ".py" for node in tree.body
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("miniformer.network.")]


def modules_in_order(root: str = "model.py") -> list[str]:
    """``root`` and every network module it needs, each after the ones it imports: read from the imports themselves,
    so a module the model comes to need joins the export without an edit here."""
    order: list[str] = []

    def visit(name: str) -> None:
        if name not in order:
            for needed in _network_imports(name):
                visit(needed)
            order.append(name)

    visit(root)
    return order


def _without_package_imports(source: str) -> str:
    """The module's source less its ``from __future__`` and ``miniformer`` imports (the joined file has one future
    import, and the names those imports bring are defined above)."""
    drop: set[int] = set()
    for node in ast.parse(source).body:
        package = node.module.split(".")[0] if isinstance(node, ast.ImportFrom) and node.module else None
        if package in ("__future__", "miniformer"):
            drop.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return "".join(line for i, line in enumerate(source.splitlines(keepends=True), 1) if i not in drop)


def network_source() -> str:
    modules = modules_in_order()
    parts = [f'"""miniformer\'s network ({", ".join(m.removesuffix(".py") for m in modules)}), joined by '
             '`miniformer export`."""\n', "\nfrom __future__ import annotations\n"]
    for name in modules:
        parts.append(f"\n# {'-' * 50} miniformer/network/{name}\n")
        parts.append(_without_package_imports((NETWORK / name).read_text(encoding="utf-8")))
    return "".join(parts)
