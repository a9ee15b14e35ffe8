"""Measures of central tendency, spread and position."""


def _require_values(values, minimum=1, what="values"):
    """Return ``values`` as a list, raising ValueError if it is too short."""
    data = list(values)
    if len(data) < minimum:
        raise ValueError(f"need at least {minimum} {what}, got {len(data)}")
    return data


def mean(values):
    """Return the arithmetic mean of a non-empty sequence of numbers."""
    data = _require_values(values)
    total = 0.0
    for x in data:
        total += x
    return total / len(data)


def median(values):
    """Return the median; for an even count, the average of the two middle values."""
    data = sorted(_require_values(values))
    n = len(data)
    mid = n // 2
    if n % 2 == 1:
        return data[mid]
    return (data[mid - 1] + data[mid]) / 2


def modes(values):
    """Return every most-frequent value, in order of first appearance."""
    data = _require_values(values)
    counts = {}
    order = []
    for x in data:
        if x not in counts:
            counts[x] = 0
            order.append(x)
        counts[x] += 1
    best = 0
    for x in order:
        if counts[x] > best:
            best = counts[x]
    result = []
    for x in order:
        if counts[x] == best:
            result.append(x)
    return result


def mode(values):
    """Return the single most-frequent value; raise ValueError when several values tie."""
    found = modes(values)
    if len(found) > 1:
        raise ValueError(f"no unique mode: {len(found)} values tie")
    return found[0]


def _sum_sq_dev(data):
    """Sum of squared deviations from the mean."""
    centre = mean(data)
    total = 0.0
    for x in data:
        diff = x - centre
        total += diff * diff
    return total


def variance(values, sample=False):
    """Return the population variance, or the sample variance (n - 1 divisor) if ``sample``."""
    minimum = 2 if sample else 1
    data = _require_values(values, minimum)
    divisor = len(data) - 1 if sample else len(data)
    return _sum_sq_dev(data) / divisor


def stdev(values, sample=False):
    """Return the population (or sample, if ``sample``) standard deviation."""
    return variance(values, sample=sample) ** 0.5


def percentile(values, p):
    """Return the ``p``-th percentile (0..100) using linear interpolation between ranks.

    The rank of the percentile is ``p / 100 * (n - 1)`` in the sorted data.
    """
    if p < 0 or p > 100:
        raise ValueError(f"percentile must be within [0, 100], got {p}")
    data = sorted(_require_values(values))
    rank = p / 100 * (len(data) - 1)
    lower = int(rank)
    frac = rank - lower
    if lower + 1 >= len(data):
        return data[-1]
    return data[lower] + (data[lower + 1] - data[lower]) * frac


def quartiles(values):
    """Return the 25th, 50th and 75th percentiles as a tuple."""
    data = _require_values(values)
    return (percentile(data, 25), percentile(data, 50), percentile(data, 75))


def interquartile_range(values):
    """Return the distance between the 75th and the 25th percentile."""
    q1, _, q3 = quartiles(values)
    return q3 - q1


def value_range(values):
    """Return ``max - min`` computed in a single pass."""
    data = _require_values(values)
    low = data[0]
    high = data[0]
    for x in data[1:]:
        if x < low:
            low = x
        elif x > high:
            high = x
    return high - low


def weighted_mean(values, weights):
    """Return the mean of ``values`` weighted by the non-negative ``weights``."""
    data = _require_values(values)
    ws = list(weights)
    if len(ws) != len(data):
        raise ValueError(f"values and weights differ in length: {len(data)} != {len(ws)}")
    total = 0.0
    weight_sum = 0.0
    for x, w in zip(data, ws, strict=True):
        if w < 0:
            raise ValueError(f"weights must be non-negative, got {w}")
        total += x * w
        weight_sum += w
    if weight_sum == 0:
        raise ValueError("weights sum to zero")
    return total / weight_sum
