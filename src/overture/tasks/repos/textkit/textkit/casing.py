"""Case conversion between identifier styles, title casing and URL slugs."""

import unicodedata

SMALL_WORDS = frozenset(
    {"a", "an", "and", "as", "at", "but", "by", "for", "in", "nor", "of", "on", "or", "the", "to"}
)


def _starts_new_word(text: str, i: int) -> bool:
    """Return True when the character at ``i`` begins a new word inside an identifier."""
    current = text[i]
    previous = text[i - 1]
    if not current.isupper():
        return False
    if previous.islower() or previous.isdigit():
        return True
    # End of an acronym: "HTTPServer" splits before the "S" because "e" follows it.
    return previous.isupper() and i + 1 < len(text) and text[i + 1].islower()


def split_words(text: str) -> list[str]:
    """Split an identifier or phrase into words.

    Non-alphanumeric characters separate words, and so do camelCase humps and the end
    of an upper-case acronym: ``"parseHTTPResponse2"`` -> ``["parse", "HTTP", "Response2"]``.
    Digits stay attached to the word they follow.
    """
    result: list[str] = []
    current = ""
    for i, ch in enumerate(text):
        if not ch.isalnum():
            if current:
                result.append(current)
            current = ""
            continue
        if current and _starts_new_word(text, i):
            result.append(current)
            current = ""
        current += ch
    if current:
        result.append(current)
    return result


def to_snake_case(text: str) -> str:
    """Convert to ``snake_case`` (all lower case, words joined by underscores)."""
    return "_".join(word.lower() for word in split_words(text))


def to_kebab_case(text: str) -> str:
    """Convert to ``kebab-case`` (all lower case, words joined by hyphens)."""
    return "-".join(word.lower() for word in split_words(text))


def to_pascal_case(text: str) -> str:
    """Convert to ``PascalCase``: every word capitalized, no separators."""
    parts = []
    for word in split_words(text):
        parts.append(word[0].upper() + word[1:].lower())
    return "".join(parts)


def to_camel_case(text: str) -> str:
    """Convert to ``camelCase``: like PascalCase but the first word is lower case."""
    words = split_words(text)
    if not words:
        return ""
    head = words[0].lower()
    tail = [word[0].upper() + word[1:].lower() for word in words[1:]]
    return head + "".join(tail)


def to_title_case(text: str) -> str:
    """Title-case a phrase, keeping short joining words lower case.

    Words are separated by whitespace. Small words such as "of" or "the" stay lower
    case unless they are the first or the last word. Words that are entirely upper case
    (acronyms like "NASA") are kept as they are.
    """
    words = text.split()
    last = len(words) - 1
    result = []
    for index, word in enumerate(words):
        if len(word) > 1 and word.isupper():
            result.append(word)
        elif 0 < index < last and word.lower() in SMALL_WORDS:
            result.append(word.lower())
        else:
            result.append(word[0].upper() + word[1:].lower())
    return " ".join(result)


def slugify(text: str, separator: str = "-", max_length: int | None = None) -> str:
    """Make a URL slug: ASCII, lower case, runs of other characters become one separator.

    Accented letters are reduced to their base letter. With ``max_length`` the slug is
    cut at the last separator that fits, or hard-cut if the first word is too long;
    a slug never ends with the separator.
    """
    if not separator:
        raise ValueError("separator must not be empty")
    if max_length is not None and max_length < 0:
        raise ValueError("max_length must be non-negative")
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    pieces: list[str] = []
    current = ""
    for ch in ascii_text.lower():
        if ch.isalnum():
            current += ch
        elif current:
            pieces.append(current)
            current = ""
    if current:
        pieces.append(current)
    slug = separator.join(pieces)
    if max_length is None or len(slug) <= max_length:
        return slug
    kept = ""
    for piece in pieces:
        candidate = piece if not kept else kept + separator + piece
        if len(candidate) > max_length:
            break
        kept = candidate
    if not kept:
        # The first word alone is too long: hard-cut it.
        kept = pieces[0][:max_length]
    return kept
