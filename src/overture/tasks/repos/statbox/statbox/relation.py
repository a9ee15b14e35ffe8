"""Relationships between two variables and a streaming accumulator."""

from .central import mean
from .transform import ranks


def _paired(xs, ys, minimum=2):
    """Return both sequences as lists after checking equal length and minimum size."""
    a = list(xs)
    b = list(ys)
    if len(a) != len(b):
        raise ValueError(f"sequences differ in length: {len(a)} != {len(b)}")
    if len(a) < minimum:
        raise ValueError(f"need at least {minimum} pairs, got {len(a)}")
    return a, b


def covariance(xs, ys, sample=False):
    """Return the population covariance, or the sample covariance (n - 1 divisor) if ``sample``."""
    a, b = _paired(xs, ys, minimum=2 if sample else 1)
    mx = mean(a)
    my = mean(b)
    total = 0.0
    for x, y in zip(a, b, strict=True):
        total += (x - mx) * (y - my)
    divisor = len(a) - 1 if sample else len(a)
    return total / divisor


def pearson(xs, ys):
    """Return the Pearson correlation coefficient; raise if either variable is constant."""
    a, b = _paired(xs, ys)
    mx = mean(a)
    my = mean(b)
    sxy = 0.0
    sxx = 0.0
    syy = 0.0
    for x, y in zip(a, b, strict=True):
        dx = x - mx
        dy = y - my
        sxy += dx * dy
        sxx += dx * dx
        syy += dy * dy
    if sxx == 0 or syy == 0:
        raise ValueError("correlation is undefined for a constant variable")
    return sxy / (sxx * syy) ** 0.5


def spearman(xs, ys):
    """Return Spearman's rank correlation (Pearson correlation of the average ranks)."""
    a, b = _paired(xs, ys)
    return pearson(ranks(a), ranks(b))


def linear_regression(xs, ys):
    """Fit ``y = slope * x + intercept`` by least squares; return ``(slope, intercept, r_squared)``.

    ``r_squared`` is ``1 - SS_res / SS_tot``; it is 1.0 when all ``ys`` are equal
    (the fit is then exact).
    """
    a, b = _paired(xs, ys)
    mx = mean(a)
    my = mean(b)
    sxy = 0.0
    sxx = 0.0
    for x, y in zip(a, b, strict=True):
        sxy += (x - mx) * (y - my)
        sxx += (x - mx) ** 2
    if sxx == 0:
        raise ValueError("cannot fit a line: all x values are equal")
    slope = sxy / sxx
    intercept = my - slope * mx
    ss_res = 0.0
    ss_tot = 0.0
    for x, y in zip(a, b, strict=True):
        predicted = slope * x + intercept
        ss_res += (y - predicted) ** 2
        ss_tot += (y - my) ** 2
    r_squared = 1.0 if ss_tot == 0 else 1 - ss_res / ss_tot
    return slope, intercept, r_squared


def predict(xs, ys, new_x):
    """Fit a least-squares line to ``xs``/``ys`` and evaluate it at ``new_x``."""
    slope, intercept, _ = linear_regression(xs, ys)
    return slope * new_x + intercept


def residuals(xs, ys):
    """Return ``y - fitted(x)`` for every pair, using the least-squares line."""
    a, b = _paired(xs, ys)
    slope, intercept, _ = linear_regression(a, b)
    return [y - (slope * x + intercept) for x, y in zip(a, b, strict=True)]


class RunningStats:
    """Accumulate count, mean, variance, min and max in one pass (Welford's method)."""

    def __init__(self, values=()):
        """Create an accumulator, optionally pushing an initial iterable of values."""
        self.count = 0
        self._mean = 0.0
        self._m2 = 0.0
        self.minimum = None
        self.maximum = None
        for x in values:
            self.push(x)

    def push(self, x):
        """Add one observation."""
        self.count += 1
        delta = x - self._mean
        self._mean += delta / self.count
        self._m2 += delta * (x - self._mean)
        if self.minimum is None or x < self.minimum:
            self.minimum = x
        if self.maximum is None or x > self.maximum:
            self.maximum = x

    @property
    def mean(self):
        """Mean of the observations so far; raises ValueError when empty."""
        if self.count == 0:
            raise ValueError("no observations yet")
        return self._mean

    def variance(self, sample=False):
        """Population variance, or sample variance (n - 1 divisor) when ``sample``."""
        needed = 2 if sample else 1
        if self.count < needed:
            raise ValueError(f"need at least {needed} observations, got {self.count}")
        divisor = self.count - 1 if sample else self.count
        return self._m2 / divisor

    def stdev(self, sample=False):
        """Standard deviation matching :meth:`variance`."""
        return self.variance(sample=sample) ** 0.5

    def merge(self, other):
        """Return a new accumulator equivalent to having pushed both streams."""
        combined = RunningStats()
        total = self.count + other.count
        if total == 0:
            return combined
        delta = other._mean - self._mean
        combined.count = total
        combined._mean = self._mean + delta * other.count / total
        combined._m2 = self._m2 + other._m2 + delta * delta * self.count * other.count / total
        bounds_min = [v for v in (self.minimum, other.minimum) if v is not None]
        bounds_max = [v for v in (self.maximum, other.maximum) if v is not None]
        combined.minimum = min(bounds_min)
        combined.maximum = max(bounds_max)
        return combined
