"""Which Python a sandbox's commands run: overture's own, or an environment made for a repository.

A `PythonEnvironment` is a prefix (a virtualenv or an interpreter's install) and the interpreter
it was made from; both are bound read-only at their host paths (a virtualenv's `python` links to
its interpreter), and the prefix's `bin/` comes first on `PATH`, so `python` and `pytest` in a
command are that environment's. Whether pytest loads the plugins installed in it is part of the
value: the plugins beside overture's own Python are its dependencies' (anyio's), not the
repository's, so runs on it load none (and start 0.18 s sooner); an environment built for a
repository holds the plugins its tests need, so runs on it load them.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class PythonEnvironment:
    """A Python bound into sandboxes (see the module docstring)."""

    prefix: str
    base_prefix: str
    load_plugins: bool

    @classmethod
    def running(cls) -> PythonEnvironment:
        """The Python that runs overture, with plugin auto-loading off."""
        return cls(os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix), load_plugins=False)

    @property
    def paths(self) -> list[str]:
        """The host paths a sandbox binds read-only for it."""
        return sorted({self.prefix, self.base_prefix})

    def variables(self) -> dict[str, str]:
        """The environment variables a command needs to run it (beside a `PATH` without it)."""
        found = {"PATH": f"{self.prefix}/bin"}
        if self.prefix != self.base_prefix:
            found["VIRTUAL_ENV"] = self.prefix
        if not self.load_plugins:
            found["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        return found
