import pytest
from textkit import closest_match, common_prefix, hamming_distance, levenshtein, similarity, suggest


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("kitten", "sitting", 3),
        ("flaw", "lawn", 2),
        ("abc", "abc", 0),
        ("", "abc", 3),
        ("abc", "", 3),
        ("", "", 0),
        ("a", "b", 1),
        ("ab", "ba", 2),
        ("abcdef", "azced", 3),
    ],
)
def test_levenshtein_known_distances(a, b, expected):
    assert levenshtein(a, b) == expected


def test_levenshtein_is_symmetric():
    assert levenshtein("sunday", "saturday") == 3
    assert levenshtein("saturday", "sunday") == 3


def test_levenshtein_single_insertion_at_end():
    assert levenshtein("cat", "cats") == 1


def test_levenshtein_single_deletion_in_middle():
    assert levenshtein("cart", "cat") == 1


def test_levenshtein_is_case_sensitive():
    assert levenshtein("Cat", "cat") == 1


def test_hamming_distance_counts_differing_positions():
    assert hamming_distance("karolin", "kathrin") == 3


def test_hamming_distance_identical_and_empty_strings():
    assert hamming_distance("abc", "abc") == 0
    assert hamming_distance("", "") == 0


def test_hamming_distance_all_positions_differ():
    assert hamming_distance("abc", "xyz") == 3


def test_hamming_distance_rejects_unequal_lengths():
    with pytest.raises(ValueError, match="strings differ in length: 3 != 4"):
        hamming_distance("abc", "abcd")


def test_similarity_identical_strings_is_one():
    assert similarity("same", "same") == 1.0


def test_similarity_two_empty_strings_is_one():
    assert similarity("", "") == 1.0


def test_similarity_uses_longer_length():
    assert similarity("abcd", "abce") == pytest.approx(0.75)
    assert similarity("ab", "abcd") == pytest.approx(0.5)


def test_similarity_completely_different_is_zero():
    assert similarity("abc", "xyz") == 0.0


def test_closest_match_picks_smallest_distance():
    assert closest_match("appel", ["banana", "apple", "apply"]) == "apple"


def test_closest_match_tie_goes_to_first_candidate():
    assert closest_match("bat", ["cat", "hat", "rat"]) == "cat"
    assert closest_match("bat", ["hat", "cat"]) == "hat"


def test_closest_match_exact_match_wins_even_if_last():
    assert closest_match("rat", ["cat", "hat", "rat"]) == "rat"


def test_closest_match_respects_max_distance_boundary():
    assert closest_match("kitten", ["sitting"], max_distance=3) == "sitting"
    assert closest_match("kitten", ["sitting"], max_distance=2) is None


def test_closest_match_max_distance_skips_far_candidates_but_keeps_near_ones():
    assert closest_match("helo", ["completely", "hello"], max_distance=1) == "hello"


def test_closest_match_no_candidates_gives_none():
    assert closest_match("anything", []) is None


def test_closest_match_ignore_case_returns_original_spelling():
    assert closest_match("HELLO", ["help", "Hello"], ignore_case=True) == "Hello"


def test_closest_match_is_case_sensitive_by_default():
    assert closest_match("HELP", ["hello", "HELLO"]) == "HELLO"
    assert closest_match("hello", ["HELLO", "help"]) == "help"


def test_suggest_orders_by_distance_then_alphabetically():
    commands = ["status", "stash", "start", "stats", "push"]
    assert suggest("stat", commands) == ["start", "stats", "stash"]


def test_suggest_default_max_distance_is_two():
    assert suggest("abcd", ["abxy", "axyz", "abcd"]) == ["abcd", "abxy"]


def test_suggest_limit_cuts_the_list():
    assert suggest("stat", ["stats", "start", "state"], limit=2) == ["start", "state"]


def test_suggest_limit_zero_gives_nothing():
    assert suggest("stat", ["stats"], limit=0) == []


def test_suggest_includes_candidates_exactly_at_max_distance():
    assert suggest("abc", ["abxy", "axyz"], max_distance=2) == ["abxy"]


def test_suggest_removes_duplicates():
    assert suggest("cat", ["bat", "bat", "cat"]) == ["cat", "bat"]


def test_suggest_rejects_negative_limit():
    with pytest.raises(ValueError, match="limit must be non-negative"):
        suggest("x", ["y"], limit=-1)


def test_common_prefix_of_several_strings():
    assert common_prefix(["interview", "internet", "interval"]) == "inter"


def test_common_prefix_when_one_string_is_prefix_of_others():
    assert common_prefix(["prefix", "pre", "prelude"]) == "pre"


def test_common_prefix_no_shared_prefix():
    assert common_prefix(["dog", "cat"]) == ""


def test_common_prefix_single_and_no_strings():
    assert common_prefix(["alone"]) == "alone"
    assert common_prefix([]) == ""


def test_common_prefix_identical_strings():
    assert common_prefix(["same", "same"]) == "same"
