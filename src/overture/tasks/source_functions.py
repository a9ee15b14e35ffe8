"""Where the functions of a Python source file lie: the line span of the function holding a line.

The oracle reads and rewrites the innermost function around a change, and synthesis keeps bugs
in functions short enough for that (`tasks.max_function_lines`); both ask the same question of
a source file, answered here.
"""

from __future__ import annotations

import ast
import functools

from overture.runtime.python_source import parse_python


@functools.lru_cache(maxsize=64)
def function_spans(source: str) -> tuple[tuple[int, int], ...]:
    """(first line, the `def`; last line) of every function and method of `source`, nested ones
    included, in `ast.walk` order; empty when the source does not parse."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return ()
    return tuple(
        (node.lineno, node.end_lineno or node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    )


def enclosing_function(source: str, line: int) -> tuple[int, int] | None:
    """First (the `def`) and last line of the innermost function or method of `source` holding
    `line`; None outside any function or when the source does not parse."""
    return max((span for span in function_spans(source) if span[0] <= line <= span[1]), default=None)
