"""The layering of DESIGN.md, in the code: each package imports only the layers below it (and
`config`), and no library package imports a recipe."""

from __future__ import annotations

import ast
from pathlib import Path

import overture

PACKAGE = Path(overture.__file__).parent
LAYERS = {
    "config": 0,
    "text": 1, "mx": 1, "sandbox": 1, "runtime": 1,
    "model": 2,
    "engine": 3, "agent": 3,
    "tasks": 4, "distributed": 4,
    "rl": 5, "supervised": 5, "evaluation": 5,
    "orchestration": 6,
    "recipes": 7,
    "viewer": 8, "cli": 8,
}  # fmt: skip
# Imports within a layer that DESIGN.md allows: the supervised trainers and evaluation build on
# `overture.rl`'s trainer, checkpoints and run plumbing; the command line serves the viewer.
SAME_LAYER = {("supervised", "rl"), ("evaluation", "rl"), ("cli", "viewer")}


def _imported_packages(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module]
        found |= {name.split(".")[1] for name in names if name.startswith("overture.")}
    return found


def test_every_package_is_placed_in_a_layer():
    packages = {path.name for path in PACKAGE.iterdir() if (path / "__init__.py").is_file()}
    assert packages == set(LAYERS)


def test_each_package_imports_only_the_layers_below_it():
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).parts
        if len(parts) < 2 or parts[:2] == ("tasks", "repos"):
            continue
        own = parts[0]
        for other in _imported_packages(path) - {own, "config"}:
            below = LAYERS[other] < LAYERS[own] or (own, other) in SAME_LAYER
            if not below:
                wrong.append(f"{path.relative_to(PACKAGE)} ({own}, layer {LAYERS[own]}) imports {other}")
    assert wrong == []
