"""Errors of the sandbox layer; each message names the sandbox, path or limit at fault."""

from __future__ import annotations


class SandboxError(RuntimeError):
    """A sandbox could not do what was asked."""


class SandboxUnavailable(SandboxError):
    """Isolation cannot run on this machine (e.g. bubblewrap is not installed)."""


class SandboxDead(SandboxError):
    """The sandbox's namespace holder exited; the sandbox must be replaced."""


class PathEscape(SandboxError, ValueError):
    """A path that would leave the workspace (absolute elsewhere, `..`, or a symlink out)."""


class PoolClosed(SandboxError):
    """The pool was closed while a caller waited for, or asked for, a sandbox."""


class PoolFull(SandboxError):
    """The pool's admission queue is at its bound; the caller should back off."""


class TooManyPaths(SandboxError):
    """A tree holds more entries than a walk over it may list (a bound against millions of files)."""


class NotRegularFile(SandboxError):
    """A FIFO, device or socket where a regular file was to be read or written; refused, never waited on."""
