"""Runs vLLM's server module (`python -m overture_vllm_launch MODULE ARGS...` runs `python -m
MODULE ARGS...`) and ends its whole process group once the process that started it is gone.

`VllmServer` starts the server in a process group of its own, so that stopping it reaches vLLM's
engine and worker processes too; but then nothing ends the server when the process that started
it dies without stopping it (`kill -9` of a training job, a Ray engine actor's death), and an
orphaned server keeps its memory and threads. A thread here watches the parent process and, when
it is gone (the server has been handed to another parent), kills the group. Like the worker
extension, this module runs in vLLM's environment and imports only the standard library.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
import threading
import time

PARENT_POLL_S = 1.0


def _end_with(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os.killpg(os.getpgrp(), signal.SIGKILL)


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit("usage: python -m overture_vllm_launch MODULE [ARGS...]")
    module = sys.argv[1]
    sys.argv = [module, *sys.argv[2:]]
    threading.Thread(target=_end_with, args=(os.getppid(),), name="parent-watch", daemon=True).start()
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
