"""The network modules joined into one file for an export, so that transformers loads the folder without miniformer.

The modules are written in their import order with the imports between them removed; what they need besides
each other is torch and the standard library. The file is the package's code as it ran, not a copy kept by hand.
"""

from __future__ import annotations

import ast
from pathlib import Path

NETWORK = Path(__file__).resolve().parent.parent / "network"
MODULES = ("positions.py", "config.py", "attention.py", "model.py")  # each imports only the ones before it


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
    parts = ['"""miniformer\'s network (positions, config, attention, model), joined by `miniformer export`."""\n',
             "\nfrom __future__ import annotations\n"]
    for name in MODULES:
        parts.append(f"\n# {'-' * 50} miniformer/network/{name}\n")
        parts.append(_without_package_imports((NETWORK / name).read_text(encoding="utf-8")))
    return "".join(parts)
