"""What every launcher runs in a rank: the training function, leaving the group together, and the
rank's exception kept for the launcher to raise as itself (with its traceback as a note)."""

from __future__ import annotations

import contextlib
import pickle
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch.distributed as dist

from overture.distributed.log_relay import RemoteEcho


def call_with_echo(fn: Callable[..., Any], args: tuple[Any, ...], echo: Callable[[str], None] | None) -> Any:
    """`fn(*args)`, with `echo=` when the caller asked for progress lines."""
    return fn(*args) if echo is None else fn(*args, echo=echo)


def run_rank(
    fn: Callable[..., Any], args: tuple[Any, ...], echo: RemoteEcho | None, error_file: Path | None
) -> Any:
    """This rank's `fn`, leaving the group (and the relay) however it ends; with `error_file`, an
    exception is also kept there for the launcher to raise as itself."""
    try:
        result = call_with_echo(fn, args, echo)
        if dist.is_initialized():
            # No rank leaves while a peer may still be talking to it: gloo aborts a process whose
            # connection is closed mid-use ("terminate called without an active exception").
            dist.barrier()
            _leave_together()
        return result
    except BaseException as exc:
        if error_file is not None:
            keep_exception(exc, error_file)
        raise
    finally:
        if echo is not None:
            echo.close()
        if dist.is_initialized():
            dist.destroy_process_group()


def _leave_together() -> None:
    """Wait, through the rendezvous store rather than gloo, until every rank has finished its last
    collective; the store's host (rank 0) leaves last, so no rank still talks to a closed peer.

    A gloo barrier is itself a collective: a rank can return from it while its last message to a
    peer is still in flight, and closing the group then aborts that peer.
    """
    store = dist.distributed_c10d._get_default_store()
    world = dist.get_world_size()
    store.add("overture/finished", 1)
    while int(store.add("overture/finished", 0)) < world:
        time.sleep(0.005)
    if dist.get_rank() != 0:
        store.add("overture/left", 1)
        return
    while int(store.add("overture/left", 0)) < world - 1:
        time.sleep(0.005)


def keep_exception(exc: BaseException, file: Path) -> None:
    # An exception that does not pickle is reported by torch's own error instead.
    with contextlib.suppress(pickle.PicklingError, TypeError, AttributeError, OSError):
        file.write_bytes(pickle.dumps((exc, traceback.format_exc())))


def rank_error(results: Path, nproc: int) -> BaseException | None:
    """The exception of the lowest rank that kept one, with its traceback as a note."""
    for rank in range(nproc):
        file = results / f"error-{rank}.pt"
        if file.is_file():
            try:
                exc, text = pickle.loads(file.read_bytes())
            except Exception:  # an unreadable error: torch's own report stands
                continue
            exc.add_note(f"raised on rank {rank} of {nproc}:\n{text}")
            return exc
    return None
