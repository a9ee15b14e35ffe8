import pytest
from textkit import from_roman, rle_decode, rle_encode, rle_pairs, to_roman


@pytest.mark.parametrize(
    ("number", "numeral"),
    [
        (1, "I"),
        (3, "III"),
        (4, "IV"),
        (5, "V"),
        (9, "IX"),
        (14, "XIV"),
        (40, "XL"),
        (49, "XLIX"),
        (90, "XC"),
        (400, "CD"),
        (944, "CMXLIV"),
        (1994, "MCMXCIV"),
        (2024, "MMXXIV"),
        (3999, "MMMCMXCIX"),
    ],
)
def test_to_roman_known_values(number, numeral):
    assert to_roman(number) == numeral


@pytest.mark.parametrize("number", [0, -1, 4000])
def test_to_roman_rejects_out_of_range(number):
    with pytest.raises(ValueError, match=r"number out of range 1\.\.3999"):
        to_roman(number)


@pytest.mark.parametrize("value", [2.0, "3", True])
def test_to_roman_rejects_non_int(value):
    with pytest.raises(TypeError, match="number must be an int"):
        to_roman(value)


@pytest.mark.parametrize(
    ("numeral", "number"),
    [
        ("I", 1),
        ("IV", 4),
        ("IX", 9),
        ("XLII", 42),
        ("XCIX", 99),
        ("CDXLIV", 444),
        ("MCMXCIV", 1994),
        ("MMMCMXCIX", 3999),
    ],
)
def test_from_roman_known_values(numeral, number):
    assert from_roman(numeral) == number


def test_from_roman_is_case_insensitive_and_strips_whitespace():
    assert from_roman("  mcmxciv ") == 1994


def test_from_roman_round_trips_every_value():
    assert all(from_roman(to_roman(n)) == n for n in range(1, 4000))


@pytest.mark.parametrize("numeral", ["IIII", "IC", "VX", "IIV", "MMMM", "VV", "XM"])
def test_from_roman_rejects_non_canonical(numeral):
    with pytest.raises(ValueError, match="non-canonical roman numeral"):
        from_roman(numeral)


def test_from_roman_rejects_invalid_digit():
    with pytest.raises(ValueError, match="invalid roman digit 'Z'"):
        from_roman("XZ")


def test_from_roman_rejects_empty():
    with pytest.raises(ValueError, match="empty roman numeral"):
        from_roman("   ")


def test_rle_pairs_groups_runs():
    assert rle_pairs("aaabccdddd") == [("a", 3), ("b", 1), ("c", 2), ("d", 4)]


def test_rle_pairs_same_char_separated_makes_separate_runs():
    assert rle_pairs("aabaa") == [("a", 2), ("b", 1), ("a", 2)]


def test_rle_pairs_single_and_empty():
    assert rle_pairs("x") == [("x", 1)]
    assert rle_pairs("") == []


def test_rle_encode_omits_count_for_single_characters():
    assert rle_encode("aaabcc") == "3ab2c"


def test_rle_encode_long_run_uses_multi_digit_count():
    assert rle_encode("z" * 12 + "y") == "12zy"


def test_rle_encode_empty_string():
    assert rle_encode("") == ""


def test_rle_encode_rejects_digits():
    with pytest.raises(ValueError, match="cannot encode digit '7'"):
        rle_encode("ab7")


def test_rle_decode_expands_counts():
    assert rle_decode("3ab2c") == "aaabcc"


def test_rle_decode_multi_digit_count():
    assert rle_decode("12zy") == "z" * 12 + "y"


def test_rle_decode_count_applies_only_to_next_character():
    assert rle_decode("2abc") == "aabc"


def test_rle_decode_round_trips_encode():
    text = "  wwwwhyyy  not!!"
    assert rle_decode(rle_encode(text)) == text


def test_rle_decode_rejects_zero_count():
    with pytest.raises(ValueError, match="zero run length before 'a'"):
        rle_decode("0a")


def test_rle_decode_rejects_dangling_count():
    with pytest.raises(ValueError, match="dangling count '12' at end of input"):
        rle_decode("ab12")
