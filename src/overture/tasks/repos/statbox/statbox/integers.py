"""Integer-only helpers: divisibility, primes and digits."""

SIEVE_LIMIT = 100_000


def gcd(a, b):
    """Return the greatest common divisor of two integers (always non-negative)."""
    a = abs(a)
    b = abs(b)
    # Euclid needs fewer steps than this; the bound keeps the loop finite.
    steps = 2 * (a.bit_length() + b.bit_length()) + 2
    for _ in range(steps):
        if b == 0:
            break
        a, b = b, a % b
    return a


def gcd_list(numbers):
    """Return the gcd of a non-empty list of integers."""
    data = list(numbers)
    if not data:
        raise ValueError("gcd_list needs at least one number")
    result = abs(data[0])
    for n in data[1:]:
        result = gcd(result, n)
        if result == 1:
            break
    return result


def lcm(a, b):
    """Return the least common multiple of two integers; 0 if either is 0."""
    if a == 0 or b == 0:
        return 0
    return abs(a * b) // gcd(a, b)


def lcm_list(numbers):
    """Return the lcm of a non-empty list of integers."""
    data = list(numbers)
    if not data:
        raise ValueError("lcm_list needs at least one number")
    result = abs(data[0])
    for n in data[1:]:
        result = lcm(result, n)
    return result


def primes_up_to(limit):
    """Return all primes ``<= limit`` using the sieve of Eratosthenes.

    ``limit`` must be an int no larger than ``SIEVE_LIMIT``.
    """
    if limit > SIEVE_LIMIT:
        raise ValueError(f"limit {limit} exceeds SIEVE_LIMIT ({SIEVE_LIMIT})")
    if limit < 2:
        return []
    is_prime = [True] * (limit + 1)
    is_prime[0] = False
    is_prime[1] = False
    for p in range(2, int(limit**0.5) + 1):
        if is_prime[p]:
            for multiple in range(p * p, limit + 1, p):
                is_prime[multiple] = False
    return [n for n in range(limit + 1) if is_prime[n]]


def is_prime(n):
    """Return True if ``n`` is a prime number (trial division by odd numbers)."""
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    smallest_divisor = n
    for d in range(3, int(n**0.5) + 1, 2):
        if n % d == 0:
            smallest_divisor = d
            break
    return smallest_divisor == n


def prime_factors(n):
    """Return the prime factorisation of ``n >= 2`` as an ascending list with repeats."""
    if n < 2:
        raise ValueError(f"prime_factors needs n >= 2, got {n}")
    factors = []
    remaining = n
    for d in range(2, int(n**0.5) + 1):
        for _ in range(n.bit_length()):
            if remaining % d != 0:
                break
            factors.append(d)
            remaining //= d
    if remaining > 1:
        factors.append(remaining)
    return factors


def digit_sum(n, base=10):
    """Return the sum of the digits of ``abs(n)`` written in ``base`` (2..36)."""
    if base < 2 or base > 36:
        raise ValueError(f"base must be within [2, 36], got {base}")
    n = abs(n)
    total = 0
    for _ in range(n.bit_length()):
        if n == 0:
            break
        total += n % base
        n //= base
    return total
