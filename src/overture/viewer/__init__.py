"""Layer 6: the run viewer — one self-contained HTML page per run directory.

`render_page(run_dir)` returns the page (trajectory list with filters, each trajectory as turns
with tool calls and version-coloured tokens, the grade and the changes, and the run's charts);
`write_page(run_dir, out)` writes it; `serve(run_dir, host, port)` serves it, rendered afresh on
each request, for a run in progress. Untrusted text is escaped (see `page`).
"""

from overture.viewer.page import render_page, write_page
from overture.viewer.run_data import RunData, load_run
from overture.viewer.server import make_server, serve

__all__ = ["RunData", "load_run", "make_server", "render_page", "serve", "write_page"]
