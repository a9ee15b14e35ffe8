"""Parsing, formatting, rounding and splitting of amounts held as integer cents."""

CURRENCY_SYMBOLS = ("$", "€", "£", "¥")
DIGITS = "0123456789"


def round_div(numerator: int, denominator: int) -> int:
    """Divide two integers and round the result to the nearest integer, halves away from zero."""
    if denominator == 0:
        raise ZeroDivisionError("denominator must not be zero")
    if denominator < 0:
        numerator, denominator = -numerator, -denominator
    quotient, remainder = divmod(abs(numerator), denominator)
    if remainder * 2 >= denominator:
        quotient += 1
    return quotient if numerator >= 0 else -quotient


def percent_of(cents: int, basis_points: int) -> int:
    """Return `basis_points` / 10000 of `cents`, rounded half away from zero (825 bp = 8.25%)."""
    return round_div(cents * basis_points, 10000)


def _all_digits(text: str) -> bool:
    return bool(text) and all(char in DIGITS for char in text)


def parse_amount(text: str) -> int:
    """Parse a written amount such as "1,234.50", "-$3.05" or "(12.00)" into integer cents.

    A leading minus sign or surrounding parentheses make the amount negative. An optional
    currency symbol may follow the sign. Thousands separators must split the whole part into
    groups of three digits, and at most two decimal places are allowed.
    """
    s = text.strip()
    if not s:
        raise ValueError("empty amount")
    negative = False
    if s.startswith("(") and s.endswith(")"):
        negative = True
        s = s[1:-1].strip()
    if s.startswith("-"):
        if negative:
            raise ValueError(f"invalid amount: {text!r}")
        negative = True
        s = s[1:]
    elif s.startswith("+"):
        s = s[1:]
    if s and s[0] in CURRENCY_SYMBOLS:
        s = s[1:]
    whole, _, frac = s.partition(".")
    if len(frac) > 2:
        raise ValueError(f"too many decimal places: {text!r}")
    if "," in whole:
        groups = whole.split(",")
        if not 1 <= len(groups[0]) <= 3 or any(len(group) != 3 for group in groups[1:]):
            raise ValueError(f"misplaced thousands separator: {text!r}")
        whole = "".join(groups)
    if not whole and not frac:
        raise ValueError(f"invalid amount: {text!r}")
    if (whole and not _all_digits(whole)) or (frac and not _all_digits(frac)):
        raise ValueError(f"invalid amount: {text!r}")
    cents = int(whole or "0") * 100 + int(frac.ljust(2, "0"))
    return -cents if negative else cents


def group_thousands(digits: str) -> str:
    """Insert commas between groups of three digits, counting from the right ("1234567" -> "1,234,567")."""
    groups = []
    end = len(digits)
    while end > 3:
        groups.append(digits[end - 3 : end])
        end -= 3
    groups.append(digits[:end])
    return ",".join(reversed(groups))


def format_amount(cents: int, symbol: str = "", grouping: bool = True) -> str:
    """Format integer cents as text, e.g. -123450 -> "-$1,234.50" with symbol "$"."""
    sign = "-" if cents < 0 else ""
    whole, frac = divmod(abs(cents), 100)
    digits = str(whole)
    if grouping:
        digits = group_thousands(digits)
    return f"{sign}{symbol}{digits}.{frac:02d}"


def split_evenly(total: int, parts: int) -> list[int]:
    """Split `total` cents into `parts` shares that sum exactly to `total`.

    Shares differ by at most one cent; the extra cents go to the first shares. A negative
    total is split the same way with every share negated.
    """
    if parts < 1:
        raise ValueError("parts must be at least 1")
    sign = -1 if total < 0 else 1
    base, extra = divmod(abs(total), parts)
    shares = []
    for index in range(parts):
        share = base + 1 if index < extra else base
        shares.append(sign * share)
    return shares


def split_by_weights(total: int, weights: list[int]) -> list[int]:
    """Split `total` cents in proportion to non-negative integer `weights`, summing exactly.

    Each share is rounded down first; the leftover cents go to the shares with the largest
    dropped fractions, earlier shares winning ties.
    """
    if not weights:
        raise ValueError("weights must not be empty")
    if any(weight < 0 for weight in weights):
        raise ValueError("weights must not be negative")
    weight_sum = sum(weights)
    if weight_sum == 0:
        raise ValueError("weights must not all be zero")
    sign = -1 if total < 0 else 1
    amount = abs(total)
    shares = []
    order = []
    for index, weight in enumerate(weights):
        share, dropped = divmod(amount * weight, weight_sum)
        shares.append(share)
        order.append((-dropped, index))
    leftover = amount - sum(shares)
    for _, index in sorted(order)[:leftover]:
        shares[index] += 1
    return [sign * share for share in shares]
