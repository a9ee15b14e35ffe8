"""The host side survives whatever a command leaves in its workspace: trees of any depth, names that
are not UTF-8, FIFOs swapped in for files, huge files and orphaned state it cannot remove. Real
sandboxes, real tools, real `patch`."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import textwrap

import pytest
from agent_helpers import tokenizer
from hostile_helpers import deadline, run_unprivileged, shared_directory
from sandbox_helpers import make_base

from overture.agent import ToolContext, ToolSet
from overture.config import AgentConfig, SandboxConfig
from overture.sandbox import SandboxPool
from overture.sandbox import workspace as workspace_module
from overture.sandbox.diff import DIFF_FILE_BYTES, read_entry, render_diff
from overture.sandbox.errors import NotRegularFile, TooManyPaths
from overture.sandbox.pool import STATE_PREFIX
from overture.text import ToolCall, render_tool_call

DEPTH = 1100  # past Python's default recursion limit, as os.walk and shutil.rmtree recurse


@pytest.fixture
def base(tmp_path):
    return make_base(tmp_path)


def run_in_sandbox(base, body, state_dir=None):
    """`await body(sandbox, context)` in a fresh pool and sandbox over `base`; its result."""

    async def main():
        config = SandboxConfig(**({"state_dir": str(state_dir)} if state_dir else {}))
        async with SandboxPool(config) as pool, pool.sandbox(base) as box:
            return await body(box, ToolContext(box, AgentConfig(search_backend="bm25")))

    return asyncio.run(main())


async def call(context, name, **arguments):
    """One tool call through the real tool set, its response capped with the policy's tokenizer
    (where a name that cannot be encoded used to crash the turn)."""
    tools = ToolSet()
    turn = tools.parse(render_tool_call(ToolCall(name, arguments)))
    (record,) = await tools.execute(turn, context, tokenizer(), 100_000)
    record.response.encode("utf-8")
    return record


def python_command(source: str) -> list[str]:
    return ["python3", "-c", textwrap.dedent(source)]


def test_a_tree_deeper_than_the_recursion_limit_is_walked_diffed_and_removed(base):
    deep = "/".join(["d"] * DEPTH) + "/deep.py"

    async def body(box, context):
        made = await box.exec(
            python_command(f"""
                import os
                for _ in range({DEPTH}):
                    os.mkdir("d")
                    os.chdir("d")
                open("deep.py", "w").write("x = 1\\n")
            """)
        )
        assert made.exit_code == 0, made.stderr
        found = await call(context, "glob_file_search", pattern="deep.py")
        return box.changed_paths(), box.diff(), list(box.files.walk_files()), found

    with shared_directory() as state:  # where the sandbox's own user may reach its layer
        changed, diff, walked, found = run_in_sandbox(base, body, state)
        assert list(state.iterdir()) == []  # closing the pool left nothing behind
    assert changed == [deep]
    assert f"+++ b/{deep}\n" in diff and "+x = 1\n" in diff
    assert deep in walked
    assert found.ok and found.response == deep


def test_names_that_are_not_utf8_are_shown_escaped_by_every_tool(base):
    async def body(box, context):
        made = await box.exec(
            python_command("""
                open(b"bad\\xff.py", "w").write("x = 1\\n")
                open("two\\nlines.py", "w").write("x = 2\\n")
            """)
        )
        assert made.exit_code == 0, made.stderr
        return [
            await call(context, "list_dir"),
            await call(context, "glob_file_search", pattern="*.py"),
            await call(context, "grep", pattern="x = 1"),
            await call(context, "run_terminal_cmd", command="ls"),
            await call(context, "codebase_search", query="x"),
        ]

    listing, globbed, grepped, ls, searched = run_in_sandbox(base, body)
    assert all(record.ok for record in (listing, globbed, grepped, ls, searched))
    assert "bad\\xff.py  (6 bytes)" in listing.response.splitlines()
    assert "two\\x0alines.py  (6 bytes)" in listing.response.splitlines()
    assert {"bad\\xff.py", "two\\x0alines.py"} <= set(globbed.response.splitlines())
    assert grepped.response == "bad\\xff.py: 1: x = 1"
    assert "bad\\xff.py" in ls.response.splitlines()


def test_a_diff_leaves_out_a_name_it_cannot_carry_and_still_applies(base, tmp_path):
    async def body(box, context):
        made = await box.exec(
            python_command("""
                import os
                open(b"bad\\xff.py", "w").write("x = 1\\n")
                os.mkdir("a\\n+++ b")
                open("a\\n+++ b/README.md", "w").write("forged\\n")
                open("README.md", "a").write("more\\n")
                open("pkg/new.py", "w").write("y = 2\\n")
            """)
        )
        assert made.exit_code == 0, made.stderr
        return box.diff()

    diff = run_in_sandbox(base, body)
    assert "[left out: bad\\xff.py: a diff header cannot name it" in diff
    assert "[left out: a\\x0a+++ b/README.md: a diff header cannot name it" in diff
    copy = tmp_path / "copy"
    shutil.copytree(base, copy)
    applied = subprocess.run(["patch", "-p1", "--batch"], cwd=copy, input=diff.encode(), capture_output=True)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert (copy / "README.md").read_text() == "# demo\nmore\n"
    assert (copy / "pkg" / "new.py").read_text() == "y = 2\n"
    assert sorted(p.name for p in copy.iterdir()) == ["README.md", "pkg"]


def test_a_fifo_where_a_file_tool_reads_or_writes_is_refused(base):
    async def body(box, context):
        await box.exec("mkfifo pipe.py")
        return [
            await call(context, "read_file", path="pipe.py"),
            await call(context, "write_file", file_path="pipe.py", contents="x = 1\n"),
        ]

    for record in run_in_sandbox(base, body):
        assert record.error == "tool"
        assert "pipe.py: a FIFO, not a regular file; refused" in record.response


def test_a_fifo_swapped_in_while_files_are_read_and_written_is_refused_never_waited_on(base):
    # A command swaps a FIFO and a file at one path as fast as it can while the host writes and
    # reads it; between the host's check of what is there and its open, a FIFO must not block it.
    swap = """
        import os
        while not os.path.exists("stop"):
            os.mkfifo("next.fifo"); os.replace("next.fifo", "target.py")
            open("next.py", "w").write("x = 1\\n"); os.replace("next.py", "target.py")
    """

    async def body(box, context):
        swapper = asyncio.create_task(box.exec(python_command(swap), timeout=120))
        while not box.files.exists("target.py"):
            await asyncio.sleep(0.01)
        outcomes = {"done": 0, "refused": 0}
        with deadline(120):  # only against a hang; the calls are synchronous, in this thread
            for n in range(400):
                try:
                    if n % 2:
                        box.files.read_bytes("target.py")
                    else:
                        box.files.write_text("target.py", "y = 2\n")
                    outcomes["done"] += 1
                except NotRegularFile:
                    outcomes["refused"] += 1
        box.files.write_text("stop", "")
        await swapper
        return outcomes

    outcomes = run_in_sandbox(base, body)
    assert outcomes["done"] + outcomes["refused"] == 400


def test_a_diff_reads_a_bounded_part_of_huge_files_and_says_what_it_left_out(base):
    async def body(box, context):
        made = await box.exec(
            python_command("""
                open("big.py", "w").write("x = 1\\n" * 600_000)
                for n in range(5):
                    open(f"f{n}.py", "w").write("y = 2\\n" * 20_000)
                open("small.py", "w").write("z = 3\\n")
            """)
        )
        assert made.exit_code == 0, made.stderr
        root, paths = box.workspace.root, box.changed_paths()
        return (
            box.diff(),
            read_entry(root, "big.py", max_bytes=10),
            render_diff(box.base, root, [p for p in paths if p != "big.py"], total_bytes=250_000),
            render_diff(box.base, root, paths, max_paths=3),
        )

    diff, capped_read, cut_by_bytes, cut_by_paths = run_in_sandbox(base, body)
    assert f"[left out: big.py: bigger than the {DIFF_FILE_BYTES} bytes a diff reads of a file]\n" in diff
    assert "+++ b/small.py\n" in diff and "+++ b/f4.py\n" in diff
    assert "+x = 1\n" not in diff
    assert capped_read == ("file", b"x = 1\nx = 1")  # max_bytes + 1: enough to tell it is bigger
    # f0..f4.py are 120,000 bytes each: two fit in 250,000 bytes; small.py comes after them.
    assert "+++ b/f1.py\n" in cut_by_bytes and "+++ b/f2.py\n" not in cut_by_bytes
    assert cut_by_bytes.endswith(
        "[diff cut at its bound of 250000 bytes read: 4 more changed paths not shown]\n"
    )
    # Sorted: big.py (left out), f0.py, f1.py, then the bound.
    assert "[left out: big.py" in cut_by_paths and "+++ b/f1.py\n" in cut_by_paths
    assert cut_by_paths.endswith("[diff cut at its bound of 3 paths: 4 more changed paths not shown]\n")


def test_changed_paths_stops_at_its_bound_instead_of_listing_part_of_a_workspace(base, monkeypatch):
    monkeypatch.setattr(workspace_module, "MAX_CHANGED_PATHS", 50)

    async def body(box, context):
        await box.exec(python_command("for n in range(49): open(f'f{n}', 'w').close()"))
        within = box.changed_paths()
        await box.exec(python_command("for n in range(49, 80): open(f'f{n}', 'w').close()"))
        with pytest.raises(TooManyPaths, match="more than 50 changed paths"):
            box.changed_paths()
        return within

    assert len(run_in_sandbox(base, body)) == 49


def test_state_a_dead_pool_left_that_cannot_be_removed_does_not_stop_a_new_pool():
    if os.geteuid() != 0:
        pytest.skip("needs a second user to own state the pool's user may not remove (run as root)")
    with shared_directory() as state:
        dead = subprocess.Popen(["true"])
        dead.wait()
        stale = state / f"{STATE_PREFIX}{dead.pid}-left"
        (stale / "upper").mkdir(parents=True)
        (stale / "upper" / "file").touch()
        started = run_unprivileged(
            """
            import asyncio, logging, sys
            from overture.config import SandboxConfig
            from overture.sandbox import SandboxPool
            logging.basicConfig(level=logging.WARNING)
            asyncio.run(SandboxPool(SandboxConfig(state_dir=sys.argv[1])).close())
            print("started")
            """,
            str(state),
        )
    assert started.returncode == 0, started.stderr
    assert started.stdout.strip() == "started"
    assert f"could not remove {stale}" in started.stderr
    assert "upper/file: Permission denied" in started.stderr
