"""`overture view RUN_DIR`: the run's trajectory viewer, as one HTML file or served on localhost.

`--out FILE.html` writes the self-contained page (default `RUN_DIR/view.html`) and prints
`{"out": PATH}` on stdout; `--serve` serves it at http://127.0.0.1:PORT/, rendered afresh on every
request, so a run in progress shows its latest state (Ctrl-C stops).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from overture.cli.common import echo, reports_errors

DEFAULT_PAGE = "view.html"


@reports_errors
def view(
    run_dir: Annotated[
        Path, typer.Argument(help="run directory, e.g. runs/NAME (as `overture train` writes)")
    ],
    out: Annotated[
        Path | None, typer.Option(help=f"HTML file to write (default: RUN_DIR/{DEFAULT_PAGE})")
    ] = None,
    serve: Annotated[
        bool, typer.Option(help="serve the page on localhost, re-rendered on each request, until Ctrl-C")
    ] = False,
    port: Annotated[int, typer.Option(help="port to serve on (with --serve)")] = 8765,
    host: Annotated[str, typer.Option(help="address to serve on (with --serve)")] = "127.0.0.1",
) -> None:
    """Trajectories, turns and tool calls, tokens by policy version, and run charts as one HTML page."""
    from overture.viewer import serve as serve_page
    from overture.viewer import write_page

    if not 0 <= port <= 65535:
        raise typer.BadParameter("must be between 0 and 65535", param_hint="--port")
    if out is not None or not serve:
        written = write_page(run_dir, out or run_dir / DEFAULT_PAGE)
        typer.echo(json.dumps({"out": str(written)}))
    if serve:
        try:
            serve_page(
                run_dir, host, port, on_ready=lambda url: echo(f"serving {run_dir} at {url} (Ctrl-C stops)")
            )
        except OSError as exc:
            raise typer.BadParameter(f"cannot serve on {host}:{port}: {exc.strerror or exc}") from None
