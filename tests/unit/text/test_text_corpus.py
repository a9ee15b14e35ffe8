"""The frozen corpus: shipped, pinned by its hash, read the same whatever the package's source
says, its held-out folders left out, and made by the script kept beside it."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import overture
from overture.tasks import REPOS_FOLDER
from overture.text import DEFAULT_CORPUS, CorpusError, corpus_sha256, corpus_texts, train_default_tokenizer
from overture.text.corpus import CORPORA, corpus_documents, corpus_path

REPO = Path(__file__).parents[3]
FINGERPRINT_IN_A_FRESH_PROCESS = """
import overture
from overture.text import train_default_tokenizer
assert overture.__file__.startswith({root!r}), overture.__file__
print(train_default_tokenizer(1024).fingerprint)
"""


def _package_copy(tmp_path: Path) -> Path:
    """A copy of the installed `overture` package, first on a fresh process's path."""
    root = tmp_path / "site"
    package = Path(overture.__file__).parent
    shutil.copytree(package, root / "overture", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _fingerprint_from(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", FINGERPRINT_IN_A_FRESH_PROCESS.format(root=str(root))],
        env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, text=True,
    )  # fmt: skip


def test_editing_the_packages_source_leaves_the_default_tokenizer_unchanged(tmp_path):
    root = _package_copy(tmp_path)
    edit = "\n# an edit: a comment, a new function\ndef _added():\n    return 1\n"
    edited_files = ("text/chat.py", "rl/trainer.py", f"{REPOS_FOLDER}/ledger/ledger/money.py")
    for edited in edited_files:
        file = root / "overture" / edited
        file.write_text(file.read_text() + edit)
    (root / "overture" / "text" / "new_module.py").write_text("VALUE = 'a file the corpus never saw'\n")
    edited = _fingerprint_from(root)
    assert edited.returncode == 0, edited.stderr
    assert edited.stdout.strip() == train_default_tokenizer(1024).fingerprint


def test_a_shipped_file_that_is_not_the_pinned_one_is_refused(tmp_path):
    root = _package_copy(tmp_path)
    shipped = root / "overture" / "text" / "corpora" / f"{DEFAULT_CORPUS}.jsonl.gz"
    data = gzip.decompress(shipped.read_bytes()).replace(b"def ", b"def  ", 1)
    shipped.write_bytes(gzip.compress(data))
    changed = _fingerprint_from(root)
    assert changed.returncode != 0
    assert "CorpusError" in changed.stderr and "not the pinned" in changed.stderr
    assert str(shipped) in changed.stderr and "a new corpus must be a new version" in changed.stderr


def test_an_unknown_version_is_named():
    with pytest.raises(CorpusError, match=r"tokenizer.corpus = 'v999': no such corpus \(shipped: v1"):
        corpus_texts("v999")


def test_the_corpus_holds_the_package_source_and_agent_conversations():
    documents = corpus_documents()
    assert corpus_sha256() == CORPORA[DEFAULT_CORPUS]
    paths = [document.path for document in documents]
    assert "text/tokenizer.py" in paths and f"{REPOS_FOLDER}/ledger/ledger/__init__.py" in paths
    chats = [document for document in documents if document.path.startswith("conversations/")]
    assert chats and all(chat.source in paths for chat in chats)
    assert all("<tool_call>" in chat.text and "<tool_response>" in chat.text for chat in chats)
    assert corpus_texts() == [document.text for document in documents]


def test_excluded_folders_leave_out_their_files_and_the_conversations_drawn_from_them():
    documents = corpus_documents()
    without = corpus_texts(exclude=[REPOS_FOLDER])
    repos = REPOS_FOLDER + "/"
    left_out = [d for d in documents if d.path.startswith(repos) or d.source.startswith(repos)]
    assert any(d.source for d in left_out)  # conversations drawn from the repositories go too
    assert len(without) == len(documents) - len(left_out)
    assert not any(document.text in without for document in left_out)
    assert corpus_texts(exclude=[REPOS_FOLDER + "/"]) == without


def test_the_freezing_script_writes_a_corpus_of_the_source_as_it_is_now(tmp_path):
    made = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "freeze_corpus.py"), "v2", str(tmp_path)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    written = tmp_path / "v2.jsonl.gz"
    assert "pin it as CORPORA['v2']" in made.stdout and written.is_file()
    documents = [json.loads(line) for line in gzip.decompress(written.read_bytes()).decode().splitlines()]
    now = (Path(overture.__file__).parent / "text" / "corpus.py").read_text()
    assert {"path": "text/corpus.py", "source": "", "text": now} in documents  # today's file, not v1's
    again = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "freeze_corpus.py"), "v1"], capture_output=True, text=True
    )
    assert again.returncode != 0 and "never made again" in again.stderr
    assert corpus_path("v1").is_file()
