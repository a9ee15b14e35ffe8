import pytest
from textkit import (
    slugify,
    split_words,
    to_camel_case,
    to_kebab_case,
    to_pascal_case,
    to_snake_case,
    to_title_case,
)


def test_split_words_on_camel_case_humps():
    assert split_words("camelCaseWord") == ["camel", "Case", "Word"]


def test_split_words_keeps_acronym_together_and_splits_before_next_word():
    assert split_words("parseHTTPResponse") == ["parse", "HTTP", "Response"]


def test_split_words_acronym_at_end_stays_whole():
    assert split_words("loadURL") == ["load", "URL"]


def test_split_words_acronym_boundary_one_before_the_end():
    assert split_words("ABc") == ["A", "Bc"]


def test_split_words_digit_stays_with_previous_word():
    assert split_words("version2Beta") == ["version2", "Beta"]


def test_split_words_on_separators_and_drops_empty_pieces():
    assert split_words("__hello--world  again_") == ["hello", "world", "again"]


def test_split_words_single_character_words():
    assert split_words("a_b") == ["a", "b"]


def test_split_words_leading_capital_is_not_a_boundary():
    assert split_words("Hello") == ["Hello"]


def test_split_words_empty_and_separator_only_input():
    assert split_words("") == []
    assert split_words("-_ ") == []


def test_to_snake_case_from_camel_case():
    assert to_snake_case("parseHTTPResponse") == "parse_http_response"


def test_to_snake_case_from_spaced_words():
    assert to_snake_case("Hello World") == "hello_world"


def test_to_kebab_case_from_snake_case():
    assert to_kebab_case("user_account_id") == "user-account-id"


def test_to_pascal_case_lowers_rest_of_each_word():
    assert to_pascal_case("HTTP server_error") == "HttpServerError"


def test_to_pascal_case_single_letter_words():
    assert to_pascal_case("a b c") == "ABC"


def test_to_camel_case_first_word_lower_rest_capitalized():
    assert to_camel_case("User-Account ID") == "userAccountId"


def test_to_camel_case_single_word_is_lowered():
    assert to_camel_case("HELLO") == "hello"


def test_to_camel_case_empty_string_gives_empty():
    assert to_camel_case("") == ""
    assert to_camel_case("__") == ""


def test_to_title_case_keeps_small_words_lower_in_the_middle():
    assert to_title_case("the lord of the rings") == "The Lord of the Rings"


def test_to_title_case_small_word_second_is_lower():
    assert to_title_case("war and peace") == "War and Peace"


def test_to_title_case_capitalizes_small_word_at_end():
    assert to_title_case("something to think of") == "Something to Think Of"


def test_to_title_case_capitalizes_small_word_at_start():
    assert to_title_case("a tale") == "A Tale"


def test_to_title_case_keeps_acronyms_upper():
    assert to_title_case("NASA AND the moon") == "NASA AND the Moon"


def test_to_title_case_lowers_shouting_small_word_in_middle_single_letter():
    assert to_title_case("war AND peace A b") == "War AND Peace a B"


def test_to_title_case_collapses_whitespace_and_handles_empty():
    assert to_title_case("  hello   world ") == "Hello World"
    assert to_title_case("") == ""


def test_slugify_basic_phrase():
    assert slugify("Hello, World!") == "hello-world"


def test_slugify_strips_accents():
    assert slugify("Crème Brûlée à la carte") == "creme-brulee-a-la-carte"


def test_slugify_collapses_runs_and_trims_edges():
    assert slugify("  --Already--slugged__text--  ") == "already-slugged-text"


def test_slugify_custom_separator():
    assert slugify("Hello big World", separator="_") == "hello_big_world"


def test_slugify_empty_input():
    assert slugify("") == ""
    assert slugify("!!!") == ""


@pytest.mark.parametrize(
    ("max_length", "expected"),
    [
        (11, "hello-world"),  # cut lands exactly on a word end
        (10, "hello"),  # one under: fall back to previous separator
        (12, "hello-world"),  # cut lands just after a separator
        (6, "hello"),
        (5, "hello"),
        (3, "hel"),  # first word too long: hard cut
        (0, ""),
        (15, "hello-world-foo"),  # exactly fits
        (16, "hello-world-foo"),
    ],
)
def test_slugify_max_length_cuts_at_word_boundary(max_length, expected):
    result = slugify("Hello World Foo", max_length=max_length)
    assert result == expected
    assert len(result) <= max_length


def test_slugify_max_length_with_multi_character_separator():
    assert slugify("ab cd ef", separator="--", max_length=6) == "ab--cd"
    assert slugify("ab cd ef", separator="--", max_length=7) == "ab--cd"


def test_slugify_rejects_empty_separator():
    with pytest.raises(ValueError, match="separator must not be empty"):
        slugify("x", separator="")


def test_slugify_rejects_negative_max_length():
    with pytest.raises(ValueError, match="max_length must be non-negative"):
        slugify("x", max_length=-1)
