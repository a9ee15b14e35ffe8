"""Building and loading the engine's C kernels (`*.c` next to this file) on the machine that runs them.

A kernel's source is compiled with the system C compiler (`cc`, or `$CC`) the first time a
process asks for it, into `$OVERTURE_KERNEL_CACHE` (default `~/.cache/overture/kernels`), under a
name derived from the source, the flags, the compiler and the CPU, so another machine or an edited
source builds its own copy. The build writes to a temporary name and renames it into place, so
processes that start together never load a half-written library. Flags: `-O3 -march=native`
and `-ffast-math` at compile time only (vectorised `expf` from glibc's libmvec, contracted and
reassociated arithmetic); the link step leaves it out, so loading a library does not switch the
process's floating-point unit to flush subnormals to zero.

Without a compiler, or where the build or the load fails, `load()` returns None and says why in
the log; callers then use their torch path.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

import torch

from overture.config import user_cache_dir

log = logging.getLogger(__name__)

COMPILE_FLAGS = ("-O3", "-march=native", "-ffast-math", "-fPIC", "-std=c11")
LINK_FLAGS = ("-shared", "-lm")


def cache_dir() -> Path:
    configured = os.environ.get("OVERTURE_KERNEL_CACHE")
    return Path(configured) if configured else user_cache_dir("kernels")


def _cpu_identity() -> str:
    """The CPU's model and feature flags (what `-march=native` compiles for)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or platform.machine()
    wanted = [line for line in lines if line.startswith(("model name", "flags"))]
    return "\n".join(dict.fromkeys(wanted))


def _compiler() -> str | None:
    return shutil.which(os.environ.get("CC", "cc"))


def build(compiler: str, source: Path, target: Path) -> None:
    """Compile `source` into the shared library `target`; RuntimeError with the compiler's output."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        obj = Path(scratch) / f"{source.stem}.o"
        lib = Path(scratch) / target.name
        for command in (
            [compiler, "-c", *COMPILE_FLAGS, str(source), "-o", str(obj)],
            [compiler, str(obj), "-o", str(lib), *LINK_FLAGS],
        ):
            done = subprocess.run(command, capture_output=True, text=True, timeout=120)
            if done.returncode != 0:
                raise RuntimeError(f"{' '.join(command)} failed: {done.stderr.strip()[-2000:]}")
        os.replace(lib, target)


def load(source: Path, functions: dict[str, list], fallback: str) -> ctypes.CDLL | None:
    """The library built from `source` (building it if this machine has no copy yet), with the
    signatures of its `functions` set (name → argtypes; each returns an int); None, logged, if it
    cannot be had. `fallback` says in the log what runs instead ("decode attention gathers the KV
    cache in torch")."""
    compiler = _compiler()
    if compiler is None:
        log.warning("no C compiler (cc or $CC): %s", fallback)
        return None
    try:
        version = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=60).stdout
        key = hashlib.sha256(
            "\0".join([source.read_text(), *COMPILE_FLAGS, *LINK_FLAGS, version, _cpu_identity()]).encode()
        ).hexdigest()[:20]
        target = cache_dir() / f"{source.stem}-{key}.so"
        if not target.exists():
            build(compiler, source, target)
        lib = ctypes.CDLL(str(target))
        entries = {name: getattr(lib, name) for name in functions}
    except (OSError, RuntimeError, AttributeError, subprocess.SubprocessError) as error:
        log.warning("%s kernel unavailable, using torch: %s", source.stem.replace("_", " "), error)
        return None
    for name, entry in entries.items():
        entry.restype = ctypes.c_int
        entry.argtypes = functions[name]
    return lib


def built(lib: ctypes.CDLL | None, kernel: str) -> ctypes.CDLL:
    """`lib`, or RuntimeError when the `kernel` could not be built (its `load()` logged why)."""
    if lib is None:
        raise RuntimeError(f"the {kernel} kernel is not built (see the log for why)")
    return lib


def require(name: str, tensor: torch.Tensor, dtype: torch.dtype) -> None:
    """ValueError unless `tensor` (a kernel's argument `name`) has `dtype` and lies on the CPU."""
    if tensor.dtype != dtype or tensor.device.type != "cpu":
        raise ValueError(f"{name} must be {dtype} on CPU, got {tensor.dtype} on {tensor.device}")
