"""The frozen corpus the default tokenizer and the language-model warm-up train on.

A corpus is shipped data, versioned and hashed: `corpora/VERSION.jsonl.gz`, one JSON object per
document — `path` (a `.py` file of overture as it stood when the version was made, relative to
the package, or `conversations/NNN` for an agent conversation in the chat format), `source` (the
file a conversation was drawn from; "" for a file) and `text`. The SHA-256 of its uncompressed
lines is pinned in `CORPORA`: a file that does not match is refused, never used. Editing
overture's source therefore changes no token id; a new corpus is a new version, made by
`scripts/freeze_corpus.py` (which holds how the documents are drawn) and pinned here.

`package_sources` reads the installed package's `.py` files as they are now: what a new version
is made from, and where the warm-up reads the bundled repositories' code (task data, which
changes only with the tasks).
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

from overture.text.tokenizer import Tokenizer

# version → SHA-256 of the uncompressed JSONL. A shipped version's entry never changes.
CORPORA = {"v1": "388a1a98ea3282944da4f7e9fbd00e03c01232af1e9380d8a192374180c673bb"}
DEFAULT_CORPUS = "v1"
CORPUS_FOLDER = "corpora"


class CorpusError(ValueError):
    """A corpus version that is not shipped, or whose file is not the one pinned."""


@dataclass(frozen=True)
class CorpusDocument:
    path: str
    source: str
    text: str


def corpus_path(version: str) -> Path:
    """Where the package keeps (or a new version will keep) corpus `version`."""
    return Path(str(files("overture.text") / CORPUS_FOLDER)) / f"{version}.jsonl.gz"


def corpus_sha256(version: str = DEFAULT_CORPUS) -> str:
    """The pinned SHA-256 of corpus `version`; `CorpusError` when no such version is shipped."""
    if version not in CORPORA:
        raise CorpusError(f"tokenizer.corpus = {version!r}: no such corpus (shipped: {', '.join(CORPORA)})")
    return CORPORA[version]


@functools.cache
def corpus_documents(version: str = DEFAULT_CORPUS) -> tuple[CorpusDocument, ...]:
    """The documents of corpus `version`, in order, after checking the file against its pin."""
    expected, path = corpus_sha256(version), corpus_path(version)
    try:
        data = gzip.decompress(path.read_bytes())
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise CorpusError(f"corpus {version}: {path} cannot be read: {exc}") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != expected:
        raise CorpusError(
            f"corpus {version}: {path} has SHA-256 {digest}, not the pinned {expected}: the shipped "
            "file was changed; a new corpus must be a new version (scripts/freeze_corpus.py)"
        )
    return tuple(CorpusDocument(**json.loads(line)) for line in data.split(b"\n")[:-1])


def corpus_texts(version: str = DEFAULT_CORPUS, exclude: Sequence[str] = ()) -> list[str]:
    """The texts of corpus `version`, in order. `exclude`: folders (relative to the package, e.g.
    "tasks/repos/statbox") whose files, and the conversations drawn from them, are left out."""
    folders = tuple(folder.rstrip("/") + "/" for folder in exclude)
    return [
        document.text
        for document in corpus_documents(version)
        if not document.path.startswith(folders) and not document.source.startswith(folders)
    ]


def write_corpus(path: Path, documents: Sequence[CorpusDocument]) -> str:
    """Write `documents` as a corpus file (gzip without a timestamp, so the same documents give
    the same bytes); the SHA-256 to pin."""
    lines = [json.dumps(asdict(document), ensure_ascii=False) + "\n" for document in documents]
    data = "".join(lines).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as file, gzip.GzipFile(fileobj=file, mode="wb", filename="", mtime=0) as packed:
        packed.write(data)
    return hashlib.sha256(data).hexdigest()


def train_default_tokenizer(vocab_size: int = 4096, corpus: str = DEFAULT_CORPUS) -> Tokenizer:
    """Train the project's tiny byte-level BPE on the frozen `corpus`: the same arguments give the
    same tokenizer, whatever the package's source."""
    return Tokenizer.train(corpus_texts(corpus), vocab_size=vocab_size)


def package_sources(package: str = "overture") -> list[tuple[str, str]]:
    """`(relative path, text)` of each `.py` file under the installed `package`, sorted by path."""
    return sorted(_python_files(files(package), ""))


def _python_files(folder: Traversable, prefix: str) -> Iterator[tuple[str, str]]:
    for entry in folder.iterdir():
        name = prefix + entry.name
        if entry.is_dir():
            if entry.name != "__pycache__":
                yield from _python_files(entry, name + "/")
        elif entry.name.endswith(".py"):
            yield name, entry.read_text(encoding="utf-8")
