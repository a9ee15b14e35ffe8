"""Small inline SVG charts drawn in Python: line charts over training steps and bar charts.

Each function returns one `<figure>` of markup with no script and no external reference. Every
text that reaches the markup goes through `html.escape`; numbers are formatted here. Hovering a
point or bar shows its value (an SVG `<title>`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

WIDTH, HEIGHT = 460, 230
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 48, 14, 30, 30


@dataclass
class Series:
    """One line (or, with `line=False`, a set of points) of a line chart."""

    label: str
    points: list[tuple[float, float]]
    color: str
    line: bool = True
    dashed: bool = False


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About `count` round values spanning [low, high] (1, 2 or 5 times a power of ten apart)."""
    if high <= low:
        high = low + 1.0
    raw = (high - low) / max(count - 1, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(low / step) * step
    ticks, value = [], first
    while value < high + step * 0.5:
        ticks.append(round(value, 10))
        value += step
    return ticks


def format_number(value: float) -> str:
    if value == int(value) and abs(value) < 1e6:
        return str(int(value))
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.3g}"


def format_percent(value: float) -> str:
    return f"{value * 100:.0f}%"


def _figure(title: str, note: str, body: str) -> str:
    caption = f"<figcaption><span class='chart-title'>{escape(title)}</span>"
    if note:
        caption += f"<span class='chart-note'>{escape(note)}</span>"
    return f"<figure class='chart'>{caption}</figcaption>{body}</figure>"


def _svg(content: str) -> str:
    return (
        f"<svg viewBox='0 0 {WIDTH} {HEIGHT}' role='img' xmlns='http://www.w3.org/2000/svg'>{content}</svg>"
    )


def empty_chart(title: str, note: str, message: str = "no data yet") -> str:
    text = f"<text class='chart-empty' x='{WIDTH / 2}' y='{HEIGHT / 2}' text-anchor='middle'>"
    return _figure(title, note, _svg(f"{text}{escape(message)}</text>"))


def _y_axis(ticks: list[float], to_y: Callable[[float], float], fmt: Callable[[float], str]) -> str:
    parts = []
    for tick in ticks:
        y = to_y(tick)
        parts.append(
            f"<line class='grid' x1='{MARGIN_LEFT}' x2='{WIDTH - MARGIN_RIGHT}' y1='{y:.1f}' y2='{y:.1f}'/>"
            f"<text class='tick' x='{MARGIN_LEFT - 6}' y='{y + 3.5:.1f}' text-anchor='end'>"
            f"{escape(fmt(tick))}</text>"
        )
    return "".join(parts)


def _legend(series: Sequence[Series]) -> str:
    parts, x = [], MARGIN_LEFT
    for item in series:
        parts.append(
            f"<rect x='{x}' y='8' width='10' height='10' rx='2' fill='{item.color}'/>"
            f"<text class='chart-legend' x='{x + 14}' y='17'>{escape(item.label)}</text>"
        )
        x += 24 + 6.5 * len(item.label)
    return "".join(parts)


def line_chart(
    title: str,
    series: Sequence[Series],
    note: str = "",
    fmt: Callable[[float], str] = format_number,
    y_floor: float | None = 0.0,
    y_ceiling: float | None = None,
) -> str:
    """Values over training steps; `y_floor`/`y_ceiling` pin the axis ends when given."""
    shown = [s for s in series if s.points]
    if not shown:
        return empty_chart(title, note)
    xs = [x for s in shown for x, _ in s.points]
    ys = [y for s in shown for _, y in s.points]
    low = min(ys) if y_floor is None else min(y_floor, *ys)
    high = max(ys) if y_ceiling is None else max(y_ceiling, *ys)
    ticks = nice_ticks(low, high if high > low else low + 1.0)
    y_low, y_high = ticks[0], ticks[-1]
    x_low, x_high = min(xs), max(xs)
    x_span = (x_high - x_low) or 1.0
    plot_w = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    plot_h = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM

    def to_x(x: float) -> float:
        if x_high == x_low:
            return MARGIN_LEFT + plot_w / 2
        return MARGIN_LEFT + (x - x_low) / x_span * plot_w

    def to_y(y: float) -> float:
        return MARGIN_TOP + plot_h - (y - y_low) / (y_high - y_low) * plot_h

    parts = [_y_axis(ticks, to_y, fmt), _legend(shown)]
    for step in sorted(set(xs)) if len(set(xs)) <= 12 else nice_ticks(x_low, x_high, 6):
        if x_low <= step <= x_high:
            parts.append(
                f"<text class='tick' x='{to_x(step):.1f}' y='{HEIGHT - MARGIN_BOTTOM + 16}' "
                f"text-anchor='middle'>{escape(format_number(step))}</text>"
            )
    parts.append(
        f"<text class='axis-label' x='{WIDTH - MARGIN_RIGHT}' y='{HEIGHT - 4}' text-anchor='end'>step</text>"
    )
    for item in shown:
        points = sorted(item.points)
        if item.line and len(points) > 1:
            path = " ".join(f"{to_x(x):.1f},{to_y(y):.1f}" for x, y in points)
            dash = " stroke-dasharray='6 4'" if item.dashed else ""
            parts.append(f"<polyline class='series' points='{path}' stroke='{item.color}'{dash}/>")
        radius = 3.5 if item.line else 5
        for x, y in points:
            tip = f"{item.label} · step {format_number(x)}: {fmt(y)}"
            parts.append(
                f"<circle cx='{to_x(x):.1f}' cy='{to_y(y):.1f}' r='{radius}' fill='{item.color}'>"
                f"<title>{escape(tip)}</title></circle>"
            )
    return _figure(title, note, _svg("".join(parts)))


def bar_chart(
    title: str,
    bars: Sequence[tuple[str, float]],
    color: str,
    note: str = "",
    x_label: str = "",
    fmt: Callable[[float], str] = format_number,
) -> str:
    """One bar per labelled value, from zero."""
    if not bars:
        return empty_chart(title, note)
    ticks = nice_ticks(0.0, max(max(v for _, v in bars), 1.0))
    plot_w = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    plot_h = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM

    def to_y(y: float) -> float:
        return MARGIN_TOP + plot_h - y / ticks[-1] * plot_h

    slot = plot_w / len(bars)
    width = min(slot * 0.7, 60)
    parts = [_y_axis(ticks, to_y, fmt)]
    for position, (label, value) in enumerate(bars):
        x = MARGIN_LEFT + slot * position + (slot - width) / 2
        top = to_y(value)
        parts.append(
            f"<rect x='{x:.1f}' y='{top:.1f}' width='{width:.1f}' height='{to_y(0) - top:.1f}' "
            f"rx='2' fill='{color}'><title>{escape(f'{label}: {fmt(value)}')}</title></rect>"
            f"<text class='tick' x='{x + width / 2:.1f}' y='{HEIGHT - MARGIN_BOTTOM + 16}' "
            f"text-anchor='middle'>{escape(label)}</text>"
        )
    if x_label:
        parts.append(
            f"<text class='axis-label' x='{WIDTH - MARGIN_RIGHT}' y='{HEIGHT - 4}' "
            f"text-anchor='end'>{escape(x_label)}</text>"
        )
    return _figure(title, note, _svg("".join(parts)))
