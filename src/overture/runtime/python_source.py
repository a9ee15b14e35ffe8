"""Parsing Python source into an `ast` tree from any thread.

CPython 3.11 keeps the counter that guards AST construction against runaway recursion in state
shared by every thread of the interpreter. A thread switch while one tree is being built (the
garbage collector running a finalizer is enough) lets another thread's parse move the counter,
and `ast.parse` then fails with `SystemError: AST constructor recursion depth mismatch`
(python/cpython gh-106905). Overture parses in worker threads — the oracle plans its edits and
the search index chunks files off the event loop — so every parse goes through one lock here.
"""

from __future__ import annotations

import ast
import threading

_PARSING = threading.Lock()


def parse_python(source: str, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse(source)`, one thread at a time; raises what it raises (`SyntaxError`, ...)."""
    with _PARSING:
        return ast.parse(source, filename)
