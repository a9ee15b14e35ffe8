"""Helpers of the hostile-workspace tests: a guard against a call that blocks, a directory every user
may write in, and a Python run as an unprivileged user."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

from overture.sandbox.tree import remove_tree

NOBODY = 65534


@contextlib.contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail instead of hanging the suite if a call of this thread blocks (a guard, not a speed
    assertion: SIGALRM interrupts even a blocking open)."""

    def expired(signum, frame):
        raise TimeoutError(f"still blocked after {seconds}s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def shared_directory() -> Iterator[Path]:
    """A directory every user may write in (pytest's temporary directories are their user's alone)."""
    path = Path(tempfile.mkdtemp(prefix="overture-hostile-test-"))
    path.chmod(0o777)
    try:
        yield path
    finally:
        remove_tree(path)


def run_unprivileged(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`script` in a Python of its own, as an unprivileged user (nobody when the tests run as root)."""
    argv = [sys.executable, "-c", textwrap.dedent(script), *args]
    if os.geteuid() == 0:
        argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *argv]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)
