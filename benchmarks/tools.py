"""Agent tool latency on a mid-sized repository, codebase index build time, and k parallel calls
of one turn against the same k calls made one per turn.

The repository is a copy of an installed pure-Python package (default: `rich`, ~100 modules), or
any directory given with --repo. Every call runs in a real sandbox through `ToolSet.execute`,
exactly as in an episode.

Usage: python benchmarks/tools.py [--repo DIR] [--repeat N] [--k K]
Prints a human summary, then one JSON object on the last line.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from overture.agent import ToolContext, ToolSet
from overture.agent.search import index as search_index
from overture.agent.search.embeddings import embedding_model
from overture.config import AgentConfig, SandboxConfig
from overture.sandbox import SandboxPool
from overture.text import ToolCall, render_tool_call


def copy_package(name: str, root: Path) -> Path:
    """A copy of an installed package's source tree (no caches), to serve as the repository."""
    source = Path(importlib.import_module(name).__file__).parent
    target = root / name
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return target


def repo_stats(repo: Path) -> dict[str, int]:
    files = [p for p in repo.rglob("*") if p.is_file()]
    lines = sum(len(p.read_bytes().splitlines()) for p in files if p.suffix == ".py")
    return {"files": len(files), "python_lines": lines}


def turn(*calls: tuple[str, dict[str, Any]]) -> str:
    return "\n".join(render_tool_call(ToolCall(name, args)) for name, args in calls)


def sample_calls(repo: Path) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """Per tool, the calls of one round (repeated): each round leaves the workspace as it found it."""
    python = sorted(str(p.relative_to(repo)) for p in repo.rglob("*.py"))
    # The largest module with code in it (a big data table would make read_file trivially fast).
    code = [p for p in python if "def " in (repo / p).read_text(errors="replace")]
    largest = max(code, key=lambda p: (repo / p).stat().st_size)
    swap = {"file_path": largest, "replace_all": True}
    new_file = {"file_path": "bench/new.py"}
    return {
        "read_file": [("read_file", {"path": largest})],
        "list_dir": [("list_dir", {"path": "."})],
        "glob_file_search": [("glob_file_search", {"pattern": "**/*.py"})],
        "grep": [("grep", {"pattern": r"def \w+\(self", "glob": "*.py", "head_limit": 50})],
        "grep_files": [("grep", {"pattern": "import", "output_mode": "files_with_matches"})],
        "codebase_search": [("codebase_search", {"query": "parse the markup of a styled text string"})],
        "search_replace": [
            ("search_replace", {**swap, "old_string": "def ", "new_string": "def  "}),
            ("search_replace", {**swap, "old_string": "def  ", "new_string": "def "}),
        ],
        "write_file+delete_file": [
            ("write_file", {**new_file, "contents": "x = 1\n" * 200}),
            ("delete_file", new_file),
        ],
        "run_terminal_cmd": [("run_terminal_cmd", {"command": "true"})],
    }


async def time_turn(tools: ToolSet, context: ToolContext, text: str) -> tuple[float, list[Any]]:
    started = time.perf_counter()
    records = await tools.execute(tools.parse(text), context)
    return time.perf_counter() - started, records


async def tool_latencies(tools: ToolSet, context: ToolContext, calls: dict, repeat: int) -> dict[str, Any]:
    """Median latency of each call (ms), over `repeat` rounds."""
    times: dict[str, list[float]] = {}
    for label, round_calls in calls.items():
        for _ in range(repeat):
            for call in round_calls:
                seconds, records = await time_turn(tools, context, turn(call))
                if records[0].error:
                    raise SystemExit(f"{label} failed: {records[0].response[:300]}")
                times.setdefault(call[0] if len(round_calls) > 1 else label, []).append(seconds)
    return {
        label: {"median_ms": round(statistics.median(t) * 1e3, 3), "runs": len(t)}
        for label, t in times.items()
    }


async def parallel_vs_sequential(
    tools: ToolSet, context: ToolContext, calls: list, k: int
) -> dict[str, float]:
    together, _ = await time_turn(tools, context, turn(*calls[:k]))
    one_by_one = 0.0
    for call in calls[:k]:
        seconds, _ = await time_turn(tools, context, turn(call))
        one_by_one += seconds
    return {"parallel_s": round(together, 4), "sequential_s": round(one_by_one, 4),
            "speedup": round(one_by_one / together, 2)}  # fmt: skip


def index_build(repo: Path, backend: str, store: Path, scratch: Path) -> dict[str, Any]:
    """Cold build, lookup in the process cache, a build of a copy with one file changed (a task's
    base after its repository's), and (embeddings) a rebuild from the on-disk vectors."""
    search_index._CACHE.clear()
    search_index._CHUNKS.clear()
    started = time.perf_counter()
    built = search_index.base_index(repo, backend, str(store))
    figures = {"build_s": round(time.perf_counter() - started, 3), "chunks": len(built.chunks)}
    started = time.perf_counter()
    search_index.base_index(repo, backend, str(store))
    figures["cached_lookup_s"] = round(time.perf_counter() - started, 4)
    task_base = scratch / f"{backend}-one-file-changed"
    shutil.copytree(repo, task_base)
    changed = next(iter(sorted(task_base.rglob("*.py"))))
    changed.write_text(changed.read_text() + "\n# changed\n")
    started = time.perf_counter()
    search_index.base_index(task_base, backend, str(store))
    figures["one_file_changed_build_s"] = round(time.perf_counter() - started, 3)
    if backend == "embedding":
        search_index._CACHE.clear()
        started = time.perf_counter()
        search_index.base_index(repo, backend, str(store))
        figures["rebuild_from_disk_s"] = round(time.perf_counter() - started, 3)
    return figures


async def main(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as scratch:
        repo = Path(args.repo).resolve() if args.repo else copy_package(args.package, Path(scratch))
        report: dict[str, Any] = {"repo": args.repo or f"copy of the installed '{args.package}' package",
                                  **repo_stats(repo)}  # fmt: skip
        store = Path(scratch) / "embeddings"
        report["index"] = {"bm25": index_build(repo, "bm25", store, Path(scratch))}
        backend = "bm25"
        if not args.no_embedding and embedding_model() is not None:
            report["index"]["embedding"] = index_build(repo, "embedding", store, Path(scratch))
            backend = "embedding"
        report["search_backend"] = backend
        tools = ToolSet()
        async with SandboxPool(SandboxConfig()) as pool, pool.sandbox(repo) as box:
            context = ToolContext(box, AgentConfig(search_backend=backend))
            report["tools"] = await tool_latencies(tools, context, sample_calls(repo), args.repeat)
            sleeps = [("run_terminal_cmd", {"command": "sleep 0.5"})] * args.k
            report["k_sleep_0.5s"] = {
                "k": args.k,
                **await parallel_vs_sequential(tools, context, sleeps, args.k),
            }
            reads = [round_calls[0] for round_calls in list(sample_calls(repo).values())[:5]] * 2
            report["k_mixed_reads"] = {
                "k": len(reads),
                **await parallel_vs_sequential(tools, context, reads, len(reads)),
            }
    report["machine"] = {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", help="repository directory (default: a copy of --package)")
    parser.add_argument("--package", default="rich", help="installed package copied as the repository")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--no-embedding", action="store_true", help="skip the embedding index (slow on CPU)")
    result = asyncio.run(main(parser.parse_args()))
    for label, figures in result["tools"].items():
        print(f"{label:>18}: {figures['median_ms']:9.2f} ms")
    for label in ("k_sleep_0.5s", "k_mixed_reads"):
        f = result[label]
        times = f"parallel {f['parallel_s']}s, sequential {f['sequential_s']}s"
        print(f"{label}: k={f['k']} {times} ({f['speedup']}x)")
    print(json.dumps(result))
