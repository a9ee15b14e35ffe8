"""Parsing Python from threads: one parse at a time, whatever calls it."""

from __future__ import annotations

import ast
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from overture.runtime import python_source
from overture.runtime.python_source import parse_python


def test_parses_never_overlap_across_threads(monkeypatch):
    inside, most = 0, 0
    counting = threading.Lock()
    real_parse = ast.parse

    def slow_parse(source: str, filename: str = "<unknown>") -> ast.Module:
        nonlocal inside, most
        with counting:
            inside += 1
            most = max(most, inside)
        time.sleep(0.005)  # a thread switch in the middle of building the tree
        with counting:
            inside -= 1
        return real_parse(source, filename)

    monkeypatch.setattr(python_source.ast, "parse", slow_parse)
    sources = [f"def f{i}(x):\n    return x + {i}\n" for i in range(40)]
    with ThreadPoolExecutor(8) as pool:
        trees = list(pool.map(parse_python, sources))
    assert most == 1
    assert [tree.body[0].name for tree in trees] == [f"f{i}" for i in range(40)]


def test_errors_are_the_parsers_and_release_the_lock():
    with pytest.raises(SyntaxError):
        parse_python("def broken(:\n")
    assert isinstance(parse_python("x = 1\n"), ast.Module)
