import pytest
import statbox

# ---- gcd / lcm --------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (12, 18, 6),
        (18, 12, 6),
        (-12, 18, 6),
        (12, -18, 6),
        (0, 5, 5),
        (5, 0, 5),
        (-12, 0, 12),
        (0, 0, 0),
        (17, 5, 1),
    ],
)
def test_gcd_of_pairs(a, b, expected):
    assert statbox.gcd(a, b) == expected


def test_gcd_of_consecutive_fibonacci_numbers_needs_many_steps():
    assert statbox.gcd(832040, 514229) == 1
    assert statbox.gcd(832040 * 6, 514229 * 6) == 6


def test_gcd_list_of_three():
    assert statbox.gcd_list([12, 18, 24]) == 6


def test_gcd_list_keeps_reducing_after_first_pair():
    assert statbox.gcd_list([12, 18, 4]) == 2


def test_gcd_list_pairwise_common_but_overall_coprime():
    assert statbox.gcd_list([6, 10, 15]) == 1


def test_gcd_list_of_single_negative_is_absolute():
    assert statbox.gcd_list([-4]) == 4


def test_gcd_list_empty_raises():
    with pytest.raises(ValueError, match="gcd_list needs at least one number"):
        statbox.gcd_list([])


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [(4, 6, 12), (-4, 6, 12), (3, 5, 15), (6, 3, 6), (1, 7, 7), (7, 1, 7), (0, 5, 0), (5, 0, 0)],
)
def test_lcm_of_pairs(a, b, expected):
    assert statbox.lcm(a, b) == expected


def test_lcm_of_two_zeros_is_zero():
    assert statbox.lcm(0, 0) == 0


def test_lcm_list_of_three():
    assert statbox.lcm_list([4, 6, 10]) == 60


def test_lcm_list_single_value():
    assert statbox.lcm_list([-5]) == 5


def test_lcm_list_empty_raises():
    with pytest.raises(ValueError, match="lcm_list needs at least one number"):
        statbox.lcm_list([])


# ---- primes -----------------------------------------------------------------


def test_primes_up_to_thirty():
    assert statbox.primes_up_to(30) == [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]


def test_primes_up_to_includes_limit_when_prime():
    assert statbox.primes_up_to(13)[-1] == 13


def test_primes_up_to_excludes_prime_squares():
    assert statbox.primes_up_to(49)[-3:] == [41, 43, 47]
    assert 25 not in statbox.primes_up_to(25)


def test_primes_up_to_two():
    assert statbox.primes_up_to(2) == [2]


@pytest.mark.parametrize("limit", [1, 0, -5])
def test_primes_up_to_below_two_is_empty(limit):
    assert statbox.primes_up_to(limit) == []


def test_primes_up_to_thousand_count():
    assert len(statbox.primes_up_to(1000)) == 168


def test_primes_up_to_sieve_limit_is_allowed():
    assert len(statbox.primes_up_to(statbox.SIEVE_LIMIT)) == 9592


def test_primes_up_to_above_sieve_limit_raises():
    with pytest.raises(ValueError, match="exceeds SIEVE_LIMIT"):
        statbox.primes_up_to(statbox.SIEVE_LIMIT + 1)


@pytest.mark.parametrize("n", [2, 3, 5, 29, 97, 7919])
def test_is_prime_true_for_primes(n):
    assert statbox.is_prime(n) is True


@pytest.mark.parametrize("n", [-7, 0, 1, 4, 9, 25, 49, 91, 7917])
def test_is_prime_false_for_non_primes(n):
    assert statbox.is_prime(n) is False


def test_is_prime_agrees_with_sieve():
    sieve = set(statbox.primes_up_to(200))
    assert [n for n in range(201) if statbox.is_prime(n)] == sorted(sieve)


# ---- prime_factors / digit_sum ---------------------------------------------


def test_prime_factors_with_repeats():
    assert statbox.prime_factors(360) == [2, 2, 2, 3, 3, 5]


def test_prime_factors_of_prime_square():
    assert statbox.prime_factors(49) == [7, 7]


def test_prime_factors_of_power_of_two():
    assert statbox.prime_factors(1024) == [2] * 10


def test_prime_factors_with_large_prime_remainder():
    assert statbox.prime_factors(2 * 97) == [2, 97]


def test_prime_factors_of_prime():
    assert statbox.prime_factors(97) == [97]


def test_prime_factors_of_two():
    assert statbox.prime_factors(2) == [2]


def test_prime_factors_below_two_raises():
    with pytest.raises(ValueError, match="needs n >= 2, got 1"):
        statbox.prime_factors(1)


@pytest.mark.parametrize(
    ("n", "base", "expected"),
    [(1234, 10, 10), (-1234, 10, 10), (0, 10, 0), (255, 16, 30), (5, 2, 2), (1024, 2, 1), (35, 36, 35)],
)
def test_digit_sum(n, base, expected):
    assert statbox.digit_sum(n, base) == expected


def test_digit_sum_defaults_to_base_ten():
    assert statbox.digit_sum(987) == 24


@pytest.mark.parametrize("base", [1, 37])
def test_digit_sum_bad_base_raises(base):
    with pytest.raises(ValueError, match="base must be within"):
        statbox.digit_sum(10, base)
