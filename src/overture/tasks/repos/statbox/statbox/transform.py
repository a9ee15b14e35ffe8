"""Transformations of sequences: binning, smoothing, scaling and ranking."""

from .central import mean, stdev


def bin_edges(low, high, bins):
    """Return ``bins + 1`` equally spaced edges from ``low`` to ``high``."""
    if bins < 1:
        raise ValueError(f"bins must be at least 1, got {bins}")
    if high <= low:
        raise ValueError(f"high must exceed low, got low={low} high={high}")
    width = (high - low) / bins
    edges = [low + i * width for i in range(bins)]
    edges.append(high)
    return edges


def histogram(values, bins, low=None, high=None):
    """Count values into ``bins`` equal-width bins; return ``(counts, edges)``.

    Bins are half-open ``[edge_i, edge_i+1)`` except the last, which also
    includes ``high``. Values outside ``[low, high]`` are ignored. When the
    range is not given it is taken from the data.
    """
    data = list(values)
    if low is None:
        low = min(data) if data else 0.0
    if high is None:
        high = max(data) if data else 1.0
    if high == low:
        high = low + 1.0
    edges = bin_edges(low, high, bins)
    width = (high - low) / bins
    counts = [0] * bins
    for x in data:
        if x < low or x > high:
            continue
        index = int((x - low) / width)
        if index >= bins:
            index = bins - 1
        counts[index] += 1
    return counts, edges


def moving_average(values, window):
    """Return the means of each run of ``window`` consecutive values (len - window + 1 results)."""
    data = list(values)
    if window < 1:
        raise ValueError(f"window must be at least 1, got {window}")
    if window > len(data):
        raise ValueError(f"window {window} is longer than the data ({len(data)})")
    running = sum(data[:window])
    result = [running / window]
    for i in range(window, len(data)):
        running += data[i] - data[i - window]
        result.append(running / window)
    return result


def exponential_smoothing(values, alpha):
    """Return simple exponential smoothing: ``s0 = x0``, ``s_t = alpha*x_t + (1-alpha)*s_(t-1)``."""
    if not 0 < alpha <= 1:
        raise ValueError(f"alpha must be in (0, 1], got {alpha}")
    data = list(values)
    if not data:
        return []
    smoothed = [data[0]]
    for x in data[1:]:
        previous = smoothed[-1]
        smoothed.append(alpha * x + (1 - alpha) * previous)
    return smoothed


def zscores(values, sample=False):
    """Return ``(x - mean) / stdev`` for every value; raise if the spread is zero."""
    data = list(values)
    centre = mean(data)
    spread = stdev(data, sample=sample)
    if spread == 0:
        raise ValueError("cannot compute z-scores of constant data")
    return [(x - centre) / spread for x in data]


def min_max_normalize(values, new_min=0.0, new_max=1.0):
    """Linearly rescale values so the smallest maps to ``new_min`` and the largest to ``new_max``."""
    data = list(values)
    if not data:
        raise ValueError("need at least 1 value, got 0")
    if new_max <= new_min:
        raise ValueError(f"new_max must exceed new_min, got {new_min}..{new_max}")
    lo = min(data)
    hi = max(data)
    span = hi - lo
    if span == 0:
        raise ValueError("cannot normalize constant data")
    scale = (new_max - new_min) / span
    return [new_min + (x - lo) * scale for x in data]


def cumulative_sums(values):
    """Return the running totals of ``values``."""
    totals = []
    running = 0
    for x in values:
        running += x
        totals.append(running)
    return totals


def differences(values, lag=1):
    """Return ``x[i] - x[i - lag]`` for every ``i >= lag``."""
    if lag < 1:
        raise ValueError(f"lag must be at least 1, got {lag}")
    data = list(values)
    return [data[i] - data[i - lag] for i in range(lag, len(data))]


def ranks(values):
    """Return 1-based ranks; tied values share the average of the ranks they span."""
    data = list(values)
    first_position = {}
    tie_count = {}
    for position, x in enumerate(sorted(data)):
        if x not in first_position:
            first_position[x] = position
            tie_count[x] = 0
        tie_count[x] += 1
    result = []
    for x in data:
        shared = first_position[x] + (tie_count[x] + 1) / 2
        result.append(shared)
    return result
