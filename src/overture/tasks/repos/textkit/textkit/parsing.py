"""Tokenizing text into words and sentences, and a tiny ``{name}`` template renderer."""

from collections.abc import Mapping

WORD_JOINERS = "'-"
SENTENCE_ENDINGS = ".!?"
HTML_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#x27;"}


class TemplateError(ValueError):
    """Raised for a malformed template (unbalanced braces or a bad field name)."""


class MissingKeyError(KeyError):
    """Raised when a template field has no value and no default was given."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        return f"missing value for template field {self.name!r}"


def words(text: str) -> list[str]:
    """Split ``text`` into words: runs of letters and digits.

    An apostrophe or hyphen between two alphanumeric characters stays inside the word,
    so "don't" and "well-known" are single words; all other characters separate words.
    """
    result: list[str] = []
    current = ""
    for i, char in enumerate(text):
        inner_joiner = char in WORD_JOINERS and current and i + 1 < len(text) and text[i + 1].isalnum()
        if char.isalnum() or inner_joiner:
            current += char
        else:
            if current:
                result.append(current)
            current = ""
    if current:
        result.append(current)
    return result


def sentences(text: str) -> list[str]:
    """Split ``text`` into sentences.

    A sentence ends at ".", "!" or "?" followed by whitespace or the end of the text, so
    "3.14" and "?!" do not split. Sentences are stripped and empty ones dropped; trailing
    text without an end mark is the last sentence.
    """
    result: list[str] = []
    start = 0
    for i, char in enumerate(text):
        if char not in SENTENCE_ENDINGS:
            continue
        at_end = i + 1 == len(text)
        if at_end or text[i + 1].isspace():
            sentence = text[start : i + 1].strip()
            if sentence:
                result.append(sentence)
            start = i + 1
    tail = text[start:].strip()
    if tail:
        result.append(tail)
    return result


def word_frequencies(text: str, top: int | None = None) -> list[tuple[str, int]]:
    """Count case-insensitive word occurrences.

    Returns ``(word, count)`` pairs, most frequent first, ties in alphabetical order;
    ``top`` keeps only the first ``top`` pairs.
    """
    if top is not None and top < 0:
        raise ValueError("top must be non-negative")
    counts: dict[str, int] = {}
    for word in words(text):
        key = word.lower()
        counts[key] = counts.get(key, 0) + 1
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    if top is not None:
        ranked = ranked[:top]
    return ranked


def escape_html(text: str) -> str:
    """Escape the characters ``& < > " '`` for safe inclusion in HTML."""
    parts = []
    for char in text:
        parts.append(HTML_ESCAPES.get(char, char))
    return "".join(parts)


def _parse_template(template: str) -> list[tuple[str, str]]:
    """Split a template into ``("text", literal)`` and ``("field", name)`` tokens.

    ``{{`` and ``}}`` are literal braces.
    """
    tokens: list[tuple[str, str]] = []
    literal = ""
    i = 0
    while i < len(template):
        char = template[i]
        nxt = template[i + 1] if i + 1 < len(template) else ""
        if char == "{" and nxt == "{":
            literal += "{"
            i += 2
        elif char == "}" and nxt == "}":
            literal += "}"
            i += 2
        elif char == "{":
            end = template.find("}", i + 1)
            if end == -1:
                raise TemplateError(f"unclosed '{{' at position {i}")
            name = template[i + 1 : end].strip()
            if not name.isidentifier():
                raise TemplateError(f"invalid field name {name!r} at position {i}")
            if literal:
                tokens.append(("text", literal))
                literal = ""
            tokens.append(("field", name))
            i = end + 1
        elif char == "}":
            raise TemplateError(f"single '}}' at position {i}")
        else:
            literal += char
            i += 1
    if literal:
        tokens.append(("text", literal))
    return tokens


def template_fields(template: str) -> list[str]:
    """Return the field names used in ``template``, in order of first use, without repeats."""
    names: list[str] = []
    for kind, value in _parse_template(template):
        if kind == "field" and value not in names:
            names.append(value)
    return names


def render(
    template: str, values: Mapping[str, object], *, default: str | None = None, html: bool = False
) -> str:
    """Fill ``{name}`` fields of ``template`` from ``values``.

    Values are converted with ``str``. A field missing from ``values`` raises
    :class:`MissingKeyError` unless ``default`` is given. With ``html=True`` inserted
    values (not the template text) are HTML-escaped. ``{{`` and ``}}`` give literal braces.
    """
    output = []
    for kind, value in _parse_template(template):
        if kind == "text":
            output.append(value)
            continue
        if value in values:
            filled = str(values[value])
        elif default is not None:
            filled = default
        else:
            raise MissingKeyError(value)
        output.append(escape_html(filled) if html else filled)
    return "".join(output)
