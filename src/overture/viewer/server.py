"""Serving the viewer page on localhost for a run in progress: each request renders it afresh.

Only `/` (and `/index.html`) is served, from the standard library's threading HTTP server; the
page is rendered from the run directory on every request, so reloading shows the run's latest
metrics and trajectories. It binds to 127.0.0.1 unless told otherwise: the page shows model
output and task data, nothing to publish on a network by accident.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

from overture.rl.run_dir import RunDirError
from overture.viewer.page import render_page
from overture.viewer.run_data import load_run

DEFAULT_PORT = 8765
PAGE_PATHS = frozenset({"/", "/index.html"})


class PageHandler(BaseHTTPRequestHandler):
    """Answers GET / with the run's page, rendered now; anything else is 404."""

    server_version = "overture-viewer"

    def __init__(self, *args, run_dir: Path, log: Callable[[str], None] | None, **kwargs) -> None:
        self.run_dir, self.log = run_dir, log
        super().__init__(*args, **kwargs)

    def do_GET(self) -> None:
        if urlsplit(self.path).path not in PAGE_PATHS:
            self._reply(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain; charset=utf-8")
            return
        try:
            body = render_page(self.run_dir, live=True).encode("utf-8")
        except RunDirError as exc:
            self._reply(HTTPStatus.SERVICE_UNAVAILABLE, f"{exc}\n".encode(), "text/plain; charset=utf-8")
            return
        self._reply(HTTPStatus.OK, body, "text/html; charset=utf-8")

    def _reply(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:
        if self.log is not None:
            self.log(f"{self.address_string()} {format % args}")


def make_server(
    run_dir: str | Path,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    log: Callable[[str], None] | None = None,
) -> ThreadingHTTPServer:
    """A server (not yet serving) for the page of `run_dir`; port 0 picks a free port."""
    load_run(run_dir)  # a clear error now rather than on the first request
    handler = partial(PageHandler, run_dir=Path(run_dir), log=log)
    return ThreadingHTTPServer((host, port), handler)


def serve(
    run_dir: str | Path,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    log: Callable[[str], None] | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve the run's page at http://host:port/ until interrupted (Ctrl-C)."""
    server = make_server(run_dir, host, port, log)
    bound_host, bound_port = server.server_address[:2]
    if on_ready is not None:
        on_ready(f"http://{bound_host}:{bound_port}/")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
