import pytest
from textkit import (
    MissingKeyError,
    TemplateError,
    escape_html,
    render,
    sentences,
    template_fields,
    word_frequencies,
    words,
)


def test_words_splits_on_punctuation_and_spaces():
    assert words("Hello, world! How are you?") == ["Hello", "world", "How", "are", "you"]


def test_words_keeps_inner_apostrophe_and_hyphen():
    assert words("don't stop well-known") == ["don't", "stop", "well-known"]


def test_words_drops_leading_and_trailing_joiners():
    assert words("'quoted' -dash- end-") == ["quoted", "dash", "end"]


def test_words_double_hyphen_separates_words():
    assert words("wait--what") == ["wait", "what"]


def test_words_keeps_digits():
    assert words("route 66 and 3rd") == ["route", "66", "and", "3rd"]


def test_words_single_character_and_empty():
    assert words("a") == ["a"]
    assert words("") == []
    assert words("?!") == []


def test_sentences_split_after_end_marks():
    assert sentences("Hi there. How are you? Great!") == ["Hi there.", "How are you?", "Great!"]


def test_sentences_do_not_split_inside_numbers():
    assert sentences("Pi is 3.14 today. Yes.") == ["Pi is 3.14 today.", "Yes."]


def test_sentences_keep_combined_end_marks_together():
    assert sentences("Really?! Yes.") == ["Really?!", "Yes."]


def test_sentences_trailing_text_without_end_mark():
    assert sentences("First one. and the rest") == ["First one.", "and the rest"]


def test_sentences_split_on_newline_after_mark():
    assert sentences("One.\nTwo.") == ["One.", "Two."]


def test_sentences_single_sentence_and_empty_text():
    assert sentences("Just one.") == ["Just one."]
    assert sentences("   ") == []
    assert sentences("") == []


def test_sentences_skip_empty_pieces_from_stray_marks():
    assert sentences("Hello. . World.") == ["Hello.", ".", "World."]


def test_word_frequencies_counts_case_insensitively():
    assert word_frequencies("The cat and the hat. THE end") == [
        ("the", 3),
        ("and", 1),
        ("cat", 1),
        ("end", 1),
        ("hat", 1),
    ]


def test_word_frequencies_ties_sorted_alphabetically():
    assert word_frequencies("b a b a c") == [("a", 2), ("b", 2), ("c", 1)]


def test_word_frequencies_top_limits_result():
    assert word_frequencies("x y y z z z", top=2) == [("z", 3), ("y", 2)]


def test_word_frequencies_top_zero_and_empty_text():
    assert word_frequencies("a b", top=0) == []
    assert word_frequencies("") == []


def test_word_frequencies_rejects_negative_top():
    with pytest.raises(ValueError, match="top must be non-negative"):
        word_frequencies("a", top=-1)


def test_escape_html_escapes_all_special_characters():
    assert escape_html('<a href="x">Tom & Jerry\'s</a>') == (
        "&lt;a href=&quot;x&quot;&gt;Tom &amp; Jerry&#x27;s&lt;/a&gt;"
    )


def test_escape_html_leaves_plain_text_alone():
    assert escape_html("plain text 123") == "plain text 123"
    assert escape_html("") == ""


def test_render_fills_fields():
    assert render("Hello, {name}! You are {age}.", {"name": "Ada", "age": 36}) == "Hello, Ada! You are 36."


def test_render_repeated_field_and_whitespace_in_braces():
    assert render("{ x }-{x}", {"x": "1"}) == "1-1"


def test_render_field_at_start_and_end_without_text():
    assert render("{a}{b}", {"a": "A", "b": "B"}) == "AB"


def test_render_double_braces_are_literal():
    assert render("{{name}} is {name}", {"name": "Bob"}) == "{name} is Bob"


def test_render_literal_closing_braces():
    assert render("set }} {{", {}) == "set } {"


def test_render_template_without_fields_is_unchanged():
    assert render("no fields here", {}) == "no fields here"
    assert render("", {}) == ""


def test_render_missing_key_raises_with_field_name():
    with pytest.raises(MissingKeyError, match="missing value for template field 'user'"):
        render("Hi {user}", {"name": "x"})


def test_render_missing_key_error_is_a_key_error():
    with pytest.raises(KeyError) as info:
        render("{nope}", {})
    assert info.value.name == "nope"


def test_render_default_is_used_only_for_missing_keys():
    assert render("{a}/{b}", {"a": "1"}, default="?") == "1/?"


def test_render_empty_string_default_is_allowed():
    assert render("[{a}]", {}, default="") == "[]"


def test_render_html_escapes_values_but_not_template_text():
    assert render("<b>{v}</b>", {"v": "<i>&"}, html=True) == "<b>&lt;i&gt;&amp;</b>"


def test_render_without_html_leaves_values_raw():
    assert render("{v}", {"v": "<i>"}) == "<i>"


def test_render_unclosed_brace_raises_with_position():
    with pytest.raises(TemplateError, match="unclosed '\\{' at position 3"):
        render("ab {name", {"name": "x"})


def test_render_single_closing_brace_raises_with_position():
    with pytest.raises(TemplateError, match="single '}' at position 2"):
        render("ab} x", {})


@pytest.mark.parametrize("template", ["{}", "{1abc}", "{a-b}", "{ }"])
def test_render_invalid_field_name_raises(template):
    with pytest.raises(TemplateError, match="invalid field name"):
        render(template, {})


def test_template_error_is_a_value_error():
    with pytest.raises(ValueError, match="unclosed"):
        render("{", {})


def test_template_fields_in_order_without_repeats():
    assert template_fields("{b} {a} {b} {{c}} {d}") == ["b", "a", "d"]


def test_template_fields_empty_template():
    assert template_fields("just text") == []
