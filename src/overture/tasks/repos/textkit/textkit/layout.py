"""Laying text out to a fixed width: wrapping, justification, padding and truncation."""


def _chunks(word: str, width: int) -> list[str]:
    """Cut a word into pieces of at most ``width`` characters."""
    pieces = []
    for start in range(0, len(word), width):
        pieces.append(word[start : start + width])
    return pieces


def wrap(text: str, width: int) -> list[str]:
    """Greedily wrap ``text`` into lines of at most ``width`` characters.

    Words are separated by any whitespace and joined by single spaces. A word longer
    than ``width`` is broken into pieces of exactly ``width`` characters (the last piece
    may be shorter). Empty or blank text gives an empty list.
    """
    if width < 1:
        raise ValueError("width must be at least 1")
    lines: list[str] = []
    line = ""
    for word in text.split():
        for piece in _chunks(word, width):
            if not line:
                line = piece
            elif len(line) + 1 + len(piece) <= width:
                line = line + " " + piece
            else:
                lines.append(line)
                line = piece
    if line:
        lines.append(line)
    return lines


def justify_line(line: str, width: int) -> str:
    """Stretch one line to exactly ``width`` by widening the gaps between its words.

    Extra spaces go to the leftmost gaps first. A line with a single word is padded
    on the right. A line longer than ``width`` raises ``ValueError``.
    """
    words = line.split()
    text_length = sum(len(word) for word in words)
    gaps = len(words) - 1
    if text_length + gaps > width:
        raise ValueError(f"line is longer than width {width}")
    if gaps <= 0:
        # Zero or one word: nothing to stretch, just pad on the right.
        return "".join(words).ljust(width)
    spaces = width - text_length
    base, extra = divmod(spaces, gaps)
    parts = []
    for index, word in enumerate(words[:-1]):
        parts.append(word)
        parts.append(" " * (base + 1 if index < extra else base))
    parts.append(words[-1])
    return "".join(parts)


def justify(text: str, width: int) -> list[str]:
    """Wrap ``text`` to ``width`` and fully justify every line except the last.

    The last line is left-aligned and padded with spaces to ``width``.
    """
    lines = wrap(text, width)
    result = [justify_line(line, width) for line in lines[:-1]]
    if lines:
        result.append(lines[-1].ljust(width))
    return result


def pad(text: str, width: int, align: str = "left", fill: str = " ") -> str:
    """Pad ``text`` with ``fill`` to ``width`` characters.

    ``align`` is "left", "right" or "center"; when centering leaves an odd number of
    fill characters, the extra one goes on the right. Text already at least ``width``
    long is returned unchanged.
    """
    if len(fill) != 1:
        raise ValueError("fill must be a single character")
    missing = width - len(text)
    if missing <= 0:
        return text
    if align == "left":
        return text + fill * missing
    if align == "right":
        return fill * missing + text
    if align == "center":
        left = missing // 2
        right = missing - left
        return fill * left + text + fill * right
    raise ValueError(f"unknown alignment: {align!r}")


def truncate(text: str, limit: int, ellipsis: str = "...") -> str:
    """Shorten ``text`` to at most ``limit`` characters, ending with ``ellipsis`` if cut.

    Text that already fits is returned unchanged. Whitespace left dangling before the
    ellipsis is removed. ``limit`` must leave room for the ellipsis itself.
    """
    if limit < len(ellipsis):
        raise ValueError(f"limit {limit} is shorter than the ellipsis")
    if len(text) <= limit:
        return text
    kept = text[: limit - len(ellipsis)].rstrip()
    return kept + ellipsis


def truncate_words(text: str, max_words: int, ellipsis: str = "...") -> str:
    """Keep at most ``max_words`` whitespace-separated words, appending ``ellipsis`` if cut.

    Words are re-joined with single spaces.
    """
    if max_words < 0:
        raise ValueError("max_words must be non-negative")
    words = text.split()
    if len(words) <= max_words:
        return " ".join(words)
    return " ".join(words[:max_words]) + ellipsis
