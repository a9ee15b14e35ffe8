import pytest
from textkit import justify, justify_line, pad, truncate, truncate_words, wrap


def test_wrap_fills_lines_greedily():
    assert wrap("the quick brown fox jumps", 10) == ["the quick", "brown fox", "jumps"]


def test_wrap_line_exactly_at_width_is_kept_together():
    assert wrap("abc def", 7) == ["abc def"]


def test_wrap_line_one_over_width_moves_word_down():
    assert wrap("abc def", 6) == ["abc", "def"]


def test_wrap_breaks_long_word_at_width():
    assert wrap("abcdefghij", 4) == ["abcd", "efgh", "ij"]


def test_wrap_long_word_piece_shares_line_with_next_word():
    assert wrap("abcdefg hi", 5) == ["abcde", "fg hi"]


def test_wrap_word_exactly_width_is_not_broken():
    assert wrap("abcd ef", 4) == ["abcd", "ef"]


def test_wrap_collapses_whitespace_including_newlines():
    assert wrap("  one\n\ntwo\tthree  ", 20) == ["one two three"]


def test_wrap_width_one_puts_each_character_on_its_own_line():
    assert wrap("ab c", 1) == ["a", "b", "c"]


def test_wrap_empty_and_blank_text_give_no_lines():
    assert wrap("", 5) == []
    assert wrap("   ", 5) == []


@pytest.mark.parametrize("width", [0, -3])
def test_wrap_rejects_width_below_one(width):
    with pytest.raises(ValueError, match="width must be at least 1"):
        wrap("text", width)


def test_justify_line_gives_extra_spaces_to_leftmost_gaps():
    assert justify_line("a b c d", 12) == "a   b   c  d"


def test_justify_line_distributes_evenly_when_divisible():
    assert justify_line("aa bb cc", 10) == "aa  bb  cc"


def test_justify_line_uneven_distribution():
    assert justify_line("a b c", 8) == "a   b  c"


def test_justify_line_already_at_width_is_unchanged():
    assert justify_line("ab cd", 5) == "ab cd"


def test_justify_line_single_word_is_left_aligned():
    assert justify_line("word", 7) == "word   "


def test_justify_line_empty_line_is_all_spaces():
    assert justify_line("", 3) == "   "


def test_justify_line_rejects_line_longer_than_width():
    with pytest.raises(ValueError, match="line is longer than width 4"):
        justify_line("ab cd", 4)


def test_justify_justifies_all_but_last_line():
    assert justify("the quick brown fox jumps", 10) == ["the  quick", "brown  fox", "jumps     "]


def test_justify_single_line_is_left_aligned_and_padded():
    assert justify("hi there", 10) == ["hi there  "]


def test_justify_empty_text_gives_no_lines():
    assert justify("", 8) == []


def test_justify_every_line_has_exact_width():
    lines = justify("lorem ipsum dolor sit amet consectetur adipiscing elit", 13)
    assert [len(line) for line in lines] == [13] * len(lines)
    assert lines[0] == "lorem   ipsum"


def test_pad_left_alignment_fills_on_the_right():
    assert pad("ab", 5) == "ab   "


def test_pad_right_alignment_fills_on_the_left():
    assert pad("ab", 5, align="right", fill="0") == "000ab"


def test_pad_center_puts_odd_extra_fill_on_the_right():
    assert pad("ab", 5, align="center", fill="*") == "*ab**"


def test_pad_center_even_split():
    assert pad("ab", 6, align="center", fill="*") == "**ab**"


def test_pad_text_at_or_over_width_is_unchanged():
    assert pad("abc", 3, align="right") == "abc"
    assert pad("abcd", 3, align="center") == "abcd"


def test_pad_rejects_unknown_alignment():
    with pytest.raises(ValueError, match="unknown alignment: 'middle'"):
        pad("ab", 5, align="middle")


def test_pad_rejects_multi_character_fill():
    with pytest.raises(ValueError, match="fill must be a single character"):
        pad("ab", 5, fill="--")


def test_truncate_short_text_is_unchanged():
    assert truncate("hello", 10) == "hello"


def test_truncate_text_exactly_at_limit_is_unchanged():
    assert truncate("hello", 5) == "hello"


def test_truncate_one_over_limit_is_cut_with_ellipsis():
    assert truncate("hello!", 5) == "he..."


def test_truncate_removes_dangling_space_before_ellipsis():
    assert truncate("hello world", 9) == "hello..."


def test_truncate_custom_ellipsis():
    assert truncate("abcdefgh", 4, ellipsis="~") == "abc~"


def test_truncate_limit_equal_to_ellipsis_length():
    assert truncate("abcdef", 3) == "..."


def test_truncate_rejects_limit_shorter_than_ellipsis():
    with pytest.raises(ValueError, match="limit 2 is shorter than the ellipsis"):
        truncate("abcdef", 2)


def test_truncate_words_keeps_first_words_and_adds_ellipsis():
    assert truncate_words("one two three four", 2) == "one two..."


def test_truncate_words_exact_word_count_has_no_ellipsis():
    assert truncate_words("one  two three", 3) == "one two three"


def test_truncate_words_zero_words_gives_only_ellipsis():
    assert truncate_words("one two", 0, ellipsis=" [more]") == " [more]"


def test_truncate_words_rejects_negative_count():
    with pytest.raises(ValueError, match="max_words must be non-negative"):
        truncate_words("one", -1)
