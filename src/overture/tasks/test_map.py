"""Which test files run which functions of a repository, so that a mutant runs only those files.

Synthesis runs a repository's whole suite once on the clean code (its baseline). Run with
`test_map_plugin` loaded, that run also records, for each test file, every function its tests
called (`overture.tasks.test_map_plugin` says how fixtures, imports and threads count). A
mutation changes the body of one function, so a test file whose tests never called it runs
exactly as on the clean code and cannot notice it: a candidate runs only the files that called
its function (`TestMap.files_for`), none at all when no test calls it, and the whole suite when
code whose effect any test may see called it (a module's top level, a session-scoped fixture,
collection). The tests of the files left out count as passing, as they did on the clean code.
One case differs from a whole-suite run: a mutant that kills pytest (a memory limit) leaves no
outcome for any test, which made every test of the suite FAIL_TO_PASS; now only its files' tests.

A run whose map cannot be read (another pytest, Python < 3.11, a plugin that failed) gives no
map, and every candidate runs the whole suite as before. Code that tests run in other processes
is not seen: a function reached only that way counts as called by no test, and its candidates are
dropped unvalidated.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from importlib.resources import files

from overture.sandbox import Sandbox

PLUGIN_FOLDER = ".overture-test-map"  # a hidden folder: pytest does not collect from it
PLUGIN_MODULE = "overture_test_map"
MAP_FILE = f"{PLUGIN_FOLDER}/map.json"
OUTPUT_VARIABLE = "OVERTURE_TEST_MAP"  # the plugin's own name for it
EVERY_FILE = "*"


@dataclass
class TestMap:
    """(path, qualified function name) → the test files whose tests called it."""

    by_function: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    everywhere: set[tuple[str, str]] = field(default_factory=set)  # called outside any one file

    def files_for(self, path: str, function: str) -> list[str] | None:
        """The test files to run for a change in `function` of `path`: None for the whole suite,
        an empty list when no test calls it."""
        key = (path, function)
        if key in self.everywhere:
            return None
        return sorted(self.by_function.get(key, ()))

    @classmethod
    def from_json(cls, data: dict[str, list[list[str]]]) -> TestMap:
        test_map = cls()
        for test_file, functions in data.items():
            for path, name in functions:
                if test_file == EVERY_FILE:
                    test_map.everywhere.add((path, name))
                else:
                    test_map.by_function.setdefault((path, name), set()).add(test_file)
        return test_map


def install_plugin(sandbox: Sandbox) -> str:
    """Write the recording plugin into the sandbox's workspace; the shell statements that make
    the next pytest run load it and record the map."""
    source = files("overture.tasks").joinpath("test_map_plugin.py").read_text()
    sandbox.files.write_text(f"{PLUGIN_FOLDER}/{PLUGIN_MODULE}.py", source)
    folder = shlex.quote(PLUGIN_FOLDER)
    return (
        f'export PYTHONPATH="$PWD/{folder}${{PYTHONPATH:+:$PYTHONPATH}}" '
        f"{OUTPUT_VARIABLE}={shlex.quote(MAP_FILE)} PYTEST_ADDOPTS=\"$PYTEST_ADDOPTS -p {PLUGIN_MODULE}\"; "
    )


def read_test_map(sandbox: Sandbox) -> TestMap | None:
    """The map the plugin wrote, or None when there is none to trust."""
    try:
        data = json.loads(sandbox.files.read_text(MAP_FILE))
    except (OSError, ValueError):
        return None
    valid = isinstance(data, dict) and all(
        isinstance(pairs, list) and all(isinstance(pair, list) and len(pair) == 2 for pair in pairs)
        for pairs in data.values()
    )
    return TestMap.from_json(data) if valid else None
