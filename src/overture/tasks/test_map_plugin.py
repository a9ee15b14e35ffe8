"""A pytest plugin that records which test files run which functions: synthesis's test map.

This file is not imported by overture. Synthesis copies it into the sandbox of a repository's
baseline run and loads it with `-p` (`overture.tasks.test_map`), so it imports only the standard
library and pytest, and runs under whatever pytest the repository's test command starts.

While the suite runs, a profile hook (`sys.setprofile`, and `threading.setprofile` for threads
the tests start) notes every Python function called, under a key: the test file whose test is
running (setup, call and teardown, so its fixtures count), or `*` for calls whose effect any test
may see — everything outside a test (collection, conftest imports, session start and end), the
setup of session- or package-scoped fixtures, and the top-level code of any module, whenever it
is first imported (a library module imported by one test serves every later one). At the end it
writes JSON `{key: [[path, qualified name], ...]}` to the file `OVERTURE_TEST_MAP` names, paths
relative to the working directory (the workspace) and only for files under it, qualified names
without `<locals>` (`outer.inner`, `Class.method`), as the mutation sites name functions.
"""

from __future__ import annotations

import json
import os
import sys
import threading

import pytest

OUTPUT_VARIABLE = "OVERTURE_TEST_MAP"
EVERY_FILE = "*"


class FunctionCalls:
    def __init__(self, output: str) -> None:
        self.output = output
        self.root = os.getcwd() + os.sep
        self.calls: dict[str, set] = {EVERY_FILE: set()}
        self.current = self.calls[EVERY_FILE]
        self.modules: list[tuple[object, set]] = []  # module bodies running: (frame, key before)

    def _profile(self, frame, event, arg) -> None:
        if event == "call":
            code = frame.f_code
            self.current.add(code)
            if code.co_name == "<module>":
                self.modules.append((frame, self.current))
                self.current = self.calls[EVERY_FILE]
        elif event == "return" and self.modules and self.modules[-1][0] is frame:
            self.current = self.modules.pop()[1]

    def _enter(self, key: str) -> set:
        previous = self.current
        self.current = self.calls.setdefault(key, set())
        return previous

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        previous = self._enter(os.path.relpath(str(item.path), self.root))
        try:
            yield
        finally:
            self.current = previous

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef, request):
        if fixturedef.scope not in ("session", "package"):
            yield
            return
        previous = self._enter(EVERY_FILE)
        try:
            yield
        finally:
            self.current = previous

    def start(self) -> None:
        threading.setprofile(self._profile)
        sys.setprofile(self._profile)

    def stop(self) -> None:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]

    def functions(self, codes: set) -> list[list[str]]:
        found = set()
        for code in codes:
            path = code.co_filename
            if not path.startswith(self.root) or not path.endswith(".py"):
                continue
            name = code.co_qualname.replace(".<locals>", "")
            found.add((path[len(self.root) :], name))
        return [list(pair) for pair in sorted(found)]

    def write(self) -> None:
        data = {key: self.functions(codes) for key, codes in self.calls.items()}
        with open(self.output, "w", encoding="utf-8") as out:
            json.dump(data, out)


def pytest_configure(config) -> None:
    output = os.environ.get(OUTPUT_VARIABLE)
    if not output or not hasattr(pytest_configure.__code__, "co_qualname"):
        return  # no map (Python < 3.11 has no qualified names on code objects): every test runs
    recorder = FunctionCalls(output)
    config.pluginmanager.register(recorder, "overture-test-map-recorder")
    config.stash[_KEY] = recorder
    recorder.start()


def pytest_unconfigure(config) -> None:
    recorder = config.stash.get(_KEY, None)
    if recorder is not None:
        recorder.stop()
        recorder.write()


_KEY = pytest.StashKey[FunctionCalls]()
