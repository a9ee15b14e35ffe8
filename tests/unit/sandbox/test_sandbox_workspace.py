"""Copy-on-write workspaces: the base is never touched, diff/reset, and the confined file helpers."""

from __future__ import annotations

import asyncio
import importlib.metadata
import shutil
import subprocess

import pytest
from sandbox_helpers import in_sandbox, make_base

from overture.config import SandboxConfig
from overture.sandbox import SandboxPool


@pytest.fixture
def base(tmp_path):
    return make_base(tmp_path)


def snapshot(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


EDITS = (
    "echo 'def sub(a, b):\n    return a - b' >> pkg/core.py; rm README.md; mkdir -p docs; "
    "printf 'no newline' > docs/new.txt; rm -r pkg/data; mkdir pkg/data; echo fresh > pkg/data/other.csv; "
    "printf '\\000\\001' > blob.bin"
)


@pytest.mark.parametrize("isolation", ["bwrap", "none"])
def test_diff_applies_to_the_base_and_reproduces_the_workspace(base, tmp_path, isolation):
    before = snapshot(base)

    async def body(sb):
        await sb.exec(EDITS)
        sb.files.write_text("pkg/core.py", sb.files.read_text("pkg/core.py") + "# host edit\n")
        return sb.diff(), {p: sb.files.read_bytes(p) for p in sb.files.walk_files()}

    diff, after = in_sandbox(base, body, isolation=isolation)
    assert snapshot(base) == before  # the base is never modified
    assert "--- a/README.md\n+++ /dev/null" in diff
    assert "\\ No newline at end of file" in diff
    assert "Binary files /dev/null and b/blob.bin differ" in diff
    assert "-1,2" in diff and "+fresh" in diff  # the deleted-and-recreated directory
    copy = tmp_path / "copy"
    shutil.copytree(base, copy)
    text_diff = "".join(part for part in diff.split("Binary files /dev/null and b/blob.bin differ\n"))
    subprocess.run(["patch", "-p1", "-s", "-E", "-d", str(copy)], input=text_diff.encode(), check=True)
    expected = {p: data for p, data in after.items() if p != "blob.bin"}
    assert snapshot(copy) == expected


def test_sandboxes_of_one_base_do_not_see_each_other(base):
    async def main():
        async with SandboxPool() as pool, pool.sandbox(base) as first, pool.sandbox(base) as second:
            await first.exec("echo one > pkg/core.py")
            seen = await second.exec("cat pkg/core.py")
            return seen.stdout, first.files.read_text("pkg/core.py")

    seen, own = asyncio.run(main())
    assert seen.startswith("def add") and own == "one\n"


def test_reset_returns_to_the_base(base):
    async def body(sb):
        await sb.exec("echo changed > README.md; touch extra")
        assert sb.diff()
        await sb.reset()
        listing = await sb.exec("ls; cat README.md")
        return sb.diff(), listing.stdout

    diff, listing = in_sandbox(base, body)
    assert diff == ""
    assert listing == "README.md\npkg\n# demo\n"


def test_file_helpers_and_commands_see_the_same_files(base):
    async def body(sb):
        sb.files.write_text("new/dir/hello.txt", "from host\n")
        seen = await sb.exec("cat new/dir/hello.txt; echo from sandbox > made.txt; ln -s pkg/core.py link")
        sb.files.delete("README.md")
        gone = await sb.exec("test -e README.md || echo gone")
        return (
            seen.stdout,
            sb.files.read_text("made.txt"),
            gone.stdout,
            [(e.name, e.kind) for e in sb.files.list_dir(".")],
            sb.files.glob("**/*.py"),
            sb.files.glob("*.csv"),
            sb.files.read_text("link").startswith("def add"),
        )

    seen, made, gone, listing, py, csv, via_link = in_sandbox(base, body)
    assert seen == "from host\n" and made == "from sandbox\n" and gone == "gone\n"
    assert listing == [("link", "symlink"), ("made.txt", "file"), ("new", "dir"), ("pkg", "dir")]
    assert py == ["pkg/__init__.py", "pkg/core.py"]
    assert csv == ["pkg/data/table.csv"]
    assert via_link


def test_file_helper_errors(base):
    async def body(sb):
        errors = {}
        for name, call in {
            "missing": lambda: sb.files.read_text("nope.txt"),
            "directory": lambda: sb.files.read_text("pkg"),
            "delete dir": lambda: sb.files.delete("pkg"),
            "outside": lambda: sb.files.read_text("/etc/passwd"),
        }.items():
            try:
                call()
            except Exception as exc:
                errors[name] = type(exc).__name__
        return errors

    errors = in_sandbox(base, body)
    assert errors == {
        "missing": "FileNotFoundError",
        "directory": "IsADirectoryError",
        "delete dir": "IsADirectoryError",
        "outside": "PathEscape",
    }


def test_workdir_and_stdin(base):
    async def body(sb):
        return await sb.exec("pwd; cat", workdir="pkg", stdin=b"piped\n")

    result = in_sandbox(base, body)
    assert result.stdout == "/workspace/pkg\npiped\n"


def test_parallel_commands_in_one_sandbox_run_concurrently(base):
    # Each command waits (bounded) for the other's file: only concurrent commands both see it.
    meet = (
        "touch {me}; n=0; while [ ! -e {other} ] && [ $n -lt 200 ]; do sleep 0.05; n=$((n+1)); done; "
        "ls {other}"
    )

    async def body(sb):
        return await asyncio.gather(
            sb.exec(meet.format(me="a", other="b"), timeout=30),
            sb.exec(meet.format(me="b", other="a"), timeout=30),
        )

    first, second = in_sandbox(base, body)
    assert (first.stdout, second.stdout) == ("b\n", "a\n")  # and neither killed the other


def test_a_test_run_loads_no_pytest_plugin_of_the_lent_python(base):
    if not importlib.metadata.entry_points(group="pytest11"):
        pytest.skip("no pytest plugin is installed beside this Python")

    async def body(sb):
        sb.files.write_text("test_one.py", "def test_one():\n    pass\n")
        lent = await sb.exec("python -m pytest -p no:cacheprovider test_one.py")
        autoloading = await sb.exec(
            "unset PYTEST_DISABLE_PLUGIN_AUTOLOAD; python -m pytest -p no:cacheprovider test_one.py"
        )
        return lent.stdout, autoloading.stdout

    lent, autoloading = in_sandbox(base, body)
    assert "1 passed" in lent and "1 passed" in autoloading
    assert "plugins:" in autoloading  # what pytest's header lists when it loaded one
    assert "plugins:" not in lent


def test_missing_workdir_is_a_clear_error(base):
    from overture.sandbox import SandboxError

    with pytest.raises(SandboxError, match="workdir nope: not a directory"):
        in_sandbox(base, lambda sb: sb.exec("true", workdir="nope"))


def test_bad_base_is_a_clear_error(tmp_path):
    from overture.sandbox import SandboxError

    with pytest.raises(SandboxError, match="not a directory"):
        in_sandbox(tmp_path / "absent", lambda sb: sb.exec("true"))
    odd = tmp_path / "a,b"
    odd.mkdir()
    with pytest.raises(SandboxError, match="may not contain ,"):
        in_sandbox(odd, lambda sb: sb.exec("true"))


def test_isolation_none_is_logged_loudly(base, caplog):
    with caplog.at_level("WARNING"):
        result = in_sandbox(base, lambda sb: sb.exec("echo plain"), isolation="none")
    assert result.stdout == "plain\n"
    assert "ISOLATION IS OFF" in caplog.text


def test_sandbox_config_defaults_are_valid():
    assert SandboxConfig().isolation == "bwrap"
