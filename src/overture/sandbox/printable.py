"""One way to show text that is not valid UTF-8: each byte that is not, as `\\xNN`.

A command can make file names and output of any bytes. Python hands such names back as strings
holding lone surrogates (`os.listdir` decodes with `surrogateescape`: byte 0xff becomes U+DCFF),
and those strings cannot be encoded, tokenized or written as UTF-8: one of them in a tool response
would crash the turn. Everything shown to a model or written into a diff goes through this module,
so a name reads the same in `list_dir`, `glob_file_search`, `grep` output, error messages and
diffs: `bad\\xff.py`, as Python's `backslashreplace` error handler writes it.
"""

from __future__ import annotations

import re

SURROGATES = re.compile("[\ud800-\udfff]")
CONTROL = re.compile("[\x00-\x1f\x7f]")
ESCAPED_BYTES = range(0xDC80, 0xDD00)  # what `surrogateescape` makes of the bytes 0x80..0xff


def _escape_surrogate(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code - 0xDC00:02x}" if code in ESCAPED_BYTES else f"\\u{code:04x}"


def escape_text(text: str) -> str:
    """`text` with every byte that was not UTF-8 (a surrogate escape) as `\\xNN` and any other lone
    surrogate as `\\uDXXX`: a string that encodes as UTF-8. Valid text comes back unchanged."""
    if text.isascii():
        return text
    return SURROGATES.sub(_escape_surrogate, text)


def decode_text(data: bytes) -> str:
    """`data` as text, each byte that is not part of valid UTF-8 as `\\xNN`."""
    return escape_text(data.decode("utf-8", errors="surrogateescape"))


def escape_name(name: str) -> str:
    """A file name or path on one line: as `escape_text`, and control characters (a newline, a tab)
    as `\\xNN` too, so that a name can neither break a listing's lines nor forge a diff's headers."""
    return CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", escape_text(name))


def writable_in_diff(name: str) -> bool:
    """Whether a unified diff's header can carry `name` as it is (valid UTF-8, no control characters)."""
    return not (SURROGATES.search(name) or CONTROL.search(name))
