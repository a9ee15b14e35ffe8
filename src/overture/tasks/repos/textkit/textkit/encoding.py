"""Roman numerals and run-length encoding."""

ROMAN_VALUES = [
    (1000, "M"),
    (900, "CM"),
    (500, "D"),
    (400, "CD"),
    (100, "C"),
    (90, "XC"),
    (50, "L"),
    (40, "XL"),
    (10, "X"),
    (9, "IX"),
    (5, "V"),
    (4, "IV"),
    (1, "I"),
]
ROMAN_DIGITS = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}
MAX_ROMAN = 3999


def to_roman(number: int) -> str:
    """Write an integer from 1 to 3999 as an upper-case roman numeral."""
    if isinstance(number, bool) or not isinstance(number, int):
        raise TypeError("number must be an int")
    if number < 1 or number > MAX_ROMAN:
        raise ValueError(f"number out of range 1..{MAX_ROMAN}: {number}")
    remaining = number
    parts = []
    for value, symbol in ROMAN_VALUES:
        count, remaining = divmod(remaining, value)
        parts.append(symbol * count)
    return "".join(parts)


def from_roman(numeral: str) -> int:
    """Parse a roman numeral (case-insensitive) and return its value.

    Only canonical numerals are accepted: "IIII", "IC" or "VX" raise ``ValueError``.
    """
    text = numeral.strip().upper()
    if not text:
        raise ValueError("empty roman numeral")
    total = 0
    for index, char in enumerate(text):
        if char not in ROMAN_DIGITS:
            raise ValueError(f"invalid roman digit {char!r} in {numeral!r}")
        value = ROMAN_DIGITS[char]
        following = ROMAN_DIGITS.get(text[index + 1], 0) if index + 1 < len(text) else 0
        if value < following:
            total -= value
        else:
            total += value
    if total < 1 or total > MAX_ROMAN or to_roman(total) != text:
        raise ValueError(f"non-canonical roman numeral: {numeral!r}")
    return total


def rle_pairs(text: str) -> list[tuple[str, int]]:
    """Group ``text`` into runs: ``"aaab"`` -> ``[("a", 3), ("b", 1)]``."""
    runs: list[tuple[str, int]] = []
    for char in text:
        if runs and runs[-1][0] == char:
            runs[-1] = (char, runs[-1][1] + 1)
        else:
            runs.append((char, 1))
    return runs


def rle_encode(text: str) -> str:
    """Run-length encode ``text``: each run is written as count then character.

    A run of length one is written as the bare character: ``"aaabcc"`` -> ``"3ab2c"``.
    Digits cannot be encoded unambiguously and raise ``ValueError``.
    """
    parts = []
    for char, count in rle_pairs(text):
        if char.isdigit():
            raise ValueError(f"cannot encode digit {char!r}")
        if count > 1:
            parts.append(str(count))
        parts.append(char)
    return "".join(parts)


def rle_decode(encoded: str) -> str:
    """Decode the output of :func:`rle_encode`: ``"3ab2c"`` -> ``"aaabcc"``.

    A count must be followed by a character and must not be zero.
    """
    parts = []
    digits = ""
    for char in encoded:
        if char.isdigit():
            digits += char
            continue
        count = int(digits) if digits else 1
        if count == 0:
            raise ValueError(f"zero run length before {char!r}")
        parts.append(char * count)
        digits = ""
    if digits:
        raise ValueError(f"dangling count {digits!r} at end of input")
    return "".join(parts)
