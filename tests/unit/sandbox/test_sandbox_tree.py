"""The host side's file primitives on real trees: walks and removals of any depth, escaped names,
and opens that refuse a FIFO or device instead of waiting on it."""

from __future__ import annotations

import os

import pytest
from hostile_helpers import deadline, run_unprivileged, shared_directory

from overture.sandbox.errors import NotRegularFile, TooManyPaths
from overture.sandbox.files import open_regular
from overture.sandbox.printable import decode_text, escape_name, escape_text, writable_in_diff
from overture.sandbox.tree import MAX_OPEN_LEVELS, remove_tree, walk


def make_chain(root: str, depth: int, name: str = "d") -> None:
    """`depth` nested directories `name/name/...` under `root`, made from descriptors (a path that
    long could not be passed to mkdir), with a file `f.py` every 500 levels."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for level in range(depth):
            os.mkdir(name, dir_fd=fd)
            if level % 500 == 0:
                os.close(os.open("f.py", os.O_CREAT | os.O_WRONLY, dir_fd=fd))
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------- walk


def test_walk_reaches_every_level_of_a_tree_deeper_than_path_max_and_the_recursion_limit(tmp_path):
    depth = 2500  # 5,000 characters of path, 2.5x Python's default recursion limit
    make_chain(str(tmp_path), depth)
    try:
        seen = [(d.parts, [entry.name for entry in d.entries]) for d in walk(tmp_path)]
        assert len(seen) == depth + 1
        assert seen[-1] == (("d",) * depth, [])
        files = [d.path_of(e) for d in walk(tmp_path) for e in d.entries if e.name == "f.py"]
        assert files == ["/".join(["d"] * level + ["f.py"]) for level in range(0, depth, 500)]
    finally:
        remove_tree(tmp_path / "d")  # pytest's own clean-up of old temporary directories recurses


def test_walk_goes_parents_first_in_name_order_and_never_through_a_symlink(tmp_path):
    outside = tmp_path / "outside"
    (outside / "secret").mkdir(parents=True)
    root = tmp_path / "root"
    for rel in ("b/z", "a/y", "a/x"):
        (root / rel).mkdir(parents=True)
    (root / "a" / "link").symlink_to(outside)
    order = [directory.rel for directory in walk(root)]
    assert order == ["", "a", "a/x", "a/y", "b", "b/z"]


def test_walk_bounds_the_entries_it_lists(tmp_path):
    for n in range(20):
        (tmp_path / f"f{n}").touch()
    assert sum(len(d.entries) for d in walk(tmp_path, limit=20)) == 20
    with pytest.raises(TooManyPaths, match="more entries than the walk may list"):
        list(walk(tmp_path, limit=19))


def test_a_directory_moved_during_a_walk_is_not_confused_with_what_took_its_place(tmp_path):
    # Deeper than the descriptors a walk holds, `x` must be reopened by name to visit `x/b`; a
    # command that moved `x` and made another in its place must not get that one walked instead.
    (tmp_path / "x" / "b").mkdir(parents=True)
    (tmp_path / "x" / "b" / "real.py").touch()
    make_chain(str(tmp_path / "x"), MAX_OPEN_LEVELS + 10, name="a")
    visited = []
    for directory in walk(tmp_path):
        visited.append(directory.rel)
        if len(directory.parts) == MAX_OPEN_LEVELS + 11:  # the bottom of the chain under x/a
            (tmp_path / "x").rename(tmp_path / "moved")
            (tmp_path / "x" / "b").mkdir(parents=True)
            (tmp_path / "x" / "b" / "impostor.py").touch()
    assert "x/b" not in visited
    assert visited[-1].startswith("x/a")


# ----------------------------------------------------------------------------- remove_tree


def test_remove_tree_removes_any_depth_and_leaves_what_links_point_to(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("kept")
    root = tmp_path / "root"
    root.mkdir()
    make_chain(str(root), 2500)
    (root / "link").symlink_to(outside)
    (root / os.fsdecode(b"bad\xff")).mkdir()
    os.chmod(root / "d" / "d", 0)  # as a command may leave it
    remove_tree(root)
    assert not root.exists() and not root.is_symlink()
    assert (outside / "keep.txt").read_text() == "kept"
    remove_tree(root)  # already gone: nothing to do
    (tmp_path / "file").write_text("x")
    remove_tree(tmp_path / "file")
    assert not (tmp_path / "file").exists()


@pytest.fixture
def shared_dir():
    with shared_directory() as path:
        yield path


def test_remove_tree_opens_up_directories_their_owner_made_unreadable_and_unwritable(shared_dir):
    # Root is not held back by modes; the owner of the files is, until it gives itself access back.
    done = run_unprivileged(
        """
        import os, sys
        from overture.sandbox.tree import remove_tree
        root = os.path.join(sys.argv[1], "tree")
        os.makedirs(os.path.join(root, "a", "b", "c"))
        open(os.path.join(root, "a", "b", "c", "f"), "w").close()
        open(os.path.join(root, "a", "b", "g"), "w").close()
        os.chmod(os.path.join(root, "a", "b", "c"), 0)
        os.chmod(os.path.join(root, "a", "b"), 0o500)
        os.chmod(os.path.join(root, "a"), 0)
        remove_tree(root)
        print("gone" if not os.path.lexists(root) else "left")
        """,
        str(shared_dir),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "gone"


def test_remove_tree_names_what_it_could_not_remove(shared_dir):
    if os.geteuid() != 0:
        pytest.skip("needs a second user to own files the remover may not delete (run as root)")
    workdir = shared_dir
    (workdir / "tree" / "sub").mkdir(parents=True)
    (workdir / "tree" / "sub" / "root-owned").touch()
    (workdir / "tree" / "loose").touch()
    (workdir / "tree").chmod(0o777)
    done = run_unprivileged(
        """
        import sys
        from overture.sandbox.tree import remove_tree
        try:
            remove_tree(sys.argv[1])
        except OSError as exc:
            print(exc)
        """,
        str(workdir / "tree"),
    )
    assert done.returncode == 0, done.stderr
    assert "sub/root-owned: Permission denied" in done.stdout
    assert not (workdir / "tree" / "loose").exists()  # everything else went
    assert (workdir / "tree" / "sub" / "root-owned").exists()


# ----------------------------------------------------------------------------- open_regular


def test_open_regular_refuses_a_fifo_or_device_on_the_descriptor_without_waiting(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    dir_fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    dev_fd = os.open("/dev", os.O_RDONLY | os.O_DIRECTORY)
    reader = writer = -1
    try:
        with deadline(60):
            # No reader: opening for writing fails at once (ENXIO), the same refusal.
            with pytest.raises(NotRegularFile, match="pipe: a FIFO, socket or device, not a regular file"):
                open_regular("pipe", dir_fd, "pipe", write=True)
            # A reader waiting: the open succeeds, and fstat on the descriptor refuses it.
            reader = os.open(tmp_path / "pipe", os.O_RDONLY | os.O_NONBLOCK)
            with pytest.raises(NotRegularFile, match="pipe: a FIFO, not a regular file"):
                open_regular("pipe", dir_fd, "pipe", write=True)
            writer = os.open(tmp_path / "pipe", os.O_WRONLY | os.O_NONBLOCK)
            with pytest.raises(NotRegularFile, match="pipe: a FIFO, not a regular file"):
                open_regular("pipe", dir_fd, "pipe")
            with pytest.raises(NotRegularFile, match="null: a character device"):
                open_regular("null", dev_fd, "null", write=True)
            with pytest.raises(IsADirectoryError):
                open_regular(".", dir_fd, "the root")
        with pytest.raises(BlockingIOError):
            os.read(reader, 16)  # nothing was written into the FIFO
    finally:
        for fd in (reader, writer, dir_fd, dev_fd):
            if fd >= 0:
                os.close(fd)


def test_open_regular_empties_a_file_for_writing_only_once_it_is_known_regular(tmp_path):
    (tmp_path / "a.py").write_text("old contents\n")
    dir_fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fd = open_regular("a.py", dir_fd, "a.py", write=True)
        with os.fdopen(fd, "wb") as handle:
            assert os.get_blocking(fd)
            handle.write(b"new\n")
        assert (tmp_path / "a.py").read_text() == "new\n"
        (tmp_path / "link.py").symlink_to(tmp_path / "a.py")
        with pytest.raises(OSError, match="Too many levels of symbolic links"):
            open_regular("link.py", dir_fd, "link.py", write=True)
        assert (tmp_path / "a.py").read_text() == "new\n"
    finally:
        os.close(dir_fd)


# ----------------------------------------------------------------------------- printable


def test_bytes_that_are_not_utf8_are_shown_as_backslash_x_everywhere_the_same_way():
    name = os.fsdecode(b"bad\xff\xfe.py")
    assert escape_text(name) == "bad\\xff\\xfe.py" == decode_text(b"bad\xff\xfe.py")
    assert escape_text("caf\u00e9 \u2713") == "caf\u00e9 \u2713"  # valid text is left alone
    assert escape_text("lone \ud800") == "lone \\ud800"
    assert decode_text(b"\xe2\x9c\x93 ok\n\x89PNG") == "\u2713 ok\n\\x89PNG"
    assert escape_name("two\nlines\t.py") == "two\\x0alines\\x09.py"
    for text in (escape_text(name), escape_name(name), decode_text(bytes(range(256)))):
        text.encode("utf-8")  # always encodable
    assert writable_in_diff("pkg/caf\u00e9.py") and writable_in_diff("a b.py")
    assert not writable_in_diff(name) and not writable_in_diff("a\nb.py")
