"""What the e2e run checks and reports, as pure functions of its records
(no servers): the busiest rolling window, the earliest schedule a budget
allows, the rolling count over time (the pictures), the SVG itself, and the
bucketed window's default bucket count."""

from __future__ import annotations

import bisect
import html
from collections.abc import Callable, Sequence

# Core's DEFAULT_BUCKETS (docs/protocol.md): the run's default when it divides the window.
DEFAULT_BUCKETS = 60


def default_buckets(window_ms: int) -> int:
    """The largest bucket count up to DEFAULT_BUCKETS that divides the window
    (the limiter's window, 6,500 ms in `make e2e`, is no multiple of 60)."""
    if window_ms < 1:
        raise ValueError(f"window_ms must be positive, got {window_ms}")
    return next(n for n in range(min(DEFAULT_BUCKETS, window_ms), 0, -1) if window_ms % n == 0)


def max_in_window(times_ms: Sequence[float], window_ms: float) -> tuple[int, float]:
    """The most events in any rolling window (t - window, t], and the t of
    the first window holding that many (0, 0.0 for no events)."""
    ts = sorted(times_ms)
    best, at, lo = 0, 0.0, 0
    for hi, t in enumerate(ts):
        # Events at exactly t - window are outside (t - window, t].
        while ts[lo] <= t - window_ms:
            lo += 1
        if hi - lo + 1 > best:
            best, at = hi - lo + 1, t
    return best, at


def earliest_schedule(
    arrivals_ms: Sequence[float],
    limit: int,
    window_ms: float,
    also: Sequence[tuple[int, float]] = (),
) -> list[float]:
    """The earliest time each job could run, in arrival order, if nothing but
    the budget held it back: job i runs at its arrival, or once the job
    `limit` places before it has left the window, whichever is later; with
    `also` (more (limit, window_ms) pairs, a budget of several limits) the
    latest of those times over every limit. No schedule that keeps every
    rolling window of every limit at or under its limit runs the n-th job
    earlier (by induction on n)."""
    limits = [(limit, window_ms), *also]
    if any(n < 1 for n, _ in limits):
        raise ValueError(f"limit must be at least 1, got {min(n for n, _ in limits)}")
    runs: list[float] = []
    for i, arrival in enumerate(sorted(arrivals_ms)):
        t = arrival
        for n, window in limits:
            if i >= n:
                t = max(t, runs[i - n] + window)
        runs.append(t)
    return runs


def rolling_counts(
    times_ms: Sequence[float], window_ms: float, start_ms: float, end_ms: float, step_ms: float
) -> list[tuple[float, int]]:
    """(t, events in (t - window, t]) for t from start to end by step."""
    if step_ms <= 0:
        raise ValueError(f"step_ms must be positive, got {step_ms}")
    ts = sorted(times_ms)
    out = []
    t = start_ms
    while t <= end_ms:
        out.append((t, bisect.bisect_right(ts, t) - bisect.bisect_right(ts, t - window_ms)))
        t += step_ms
    return out


# Colours per system (colour-blind safe palette), the limit and the counter.
COLOURS = {"river": "#0072B2", "bullmq": "#E69F00", "sidekiq": "#CC79A7", "celery": "#009E73"}
LIMIT_COLOUR = "#000000"
COUNTER_COLOUR = "#D55E00"


def svg_tenant(
    title: str,
    panels: dict[str, dict[str, list[tuple[float, int]]]],
    counter: list[tuple[float, int]] | None,
    limit: int,
    origin_ms: float,
    width: int = 720,
    panel_height: int = 200,
) -> str:
    """One panel per exact algorithm (`panels`: its name -> series), one above
    the other on the same axes: a stacked area per system (the algorithm's
    requests in the rolling window, by the system that made them), the
    counter's total as a dashed line in every panel (the contrast), and the
    limit. Every series shares the same sample times."""
    left, right, top, bottom, gap = 56, 150, 30, 40, 22
    pw, ph = width - left - right, panel_height
    height = top + len(panels) * (ph + gap) - gap + bottom
    first = next((s for series in panels.values() for s in series.values()), None)
    times = [t for t, _ in first] if first else [t for t, _ in counter or []]
    if not times or not panels:
        raise ValueError("nothing to draw")
    t0, t1 = times[0], times[-1]
    peak = max(
        [limit]
        + [n for _, n in counter or []]
        + [
            sum(s[i][1] for s in series.values())
            for series in panels.values()
            for i in range(len(times))
        ]
    )
    ymax = _nice(peak * 1.1)

    def x(t: float) -> float:
        return left + (t - t0) / max(t1 - t0, 1) * pw

    out = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">'
        ),
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="{left}" y="18" font-size="13" font-weight="bold">{html.escape(title)}</text>',
    ]
    systems: list[str] = []
    for k, (algorithm, series) in enumerate(panels.items()):
        ptop = top + k * (ph + gap)

        def y(n: float, ptop: float = ptop) -> float:
            return ptop + ph - n / ymax * ph

        # Grid and the count axis.
        for i in range(5):
            n = ymax * i / 4
            out.append(
                f'<line x1="{left}" x2="{left + pw}" y1="{y(n):.1f}" y2="{y(n):.1f}" stroke="#e0e0e0"/>'
            )
            out.append(f'<text x="{left - 6}" y="{y(n) + 4:.1f}" text-anchor="end">{n:g}</text>')
        out.append(
            f'<text x="14" y="{ptop + ph / 2}" text-anchor="middle" transform="rotate(-90 14 {ptop + ph / 2})">'
            f"in the rolling window</text>"
        )
        # Stacked areas, bottom to top in the order given.
        base = [0] * len(times)
        for name, samples in series.items():
            upper = [b + n for b, (_, n) in zip(base, samples)]
            pts = _points(x, y, list(zip(times, upper)))
            pts += _points(x, y, list(reversed(list(zip(times, base)))))
            out.append(
                f'<polygon points="{" ".join(pts)}" fill="{COLOURS.get(name, "#888888")}" '
                f'fill-opacity="0.75" stroke="none"/>'
            )
            base = upper
            if name not in systems:
                systems.append(name)
        if counter:
            line = " ".join(_points(x, y, counter))
            out.append(
                f'<polyline points="{line}" fill="none" stroke="{COUNTER_COLOUR}" stroke-width="1.6" '
                f'stroke-dasharray="5,3"/>'
            )
        out.append(
            f'<line x1="{left}" x2="{left + pw}" y1="{y(limit):.1f}" y2="{y(limit):.1f}" '
            f'stroke="{LIMIT_COLOUR}" stroke-width="1.5"/>'
        )
        out.append(
            f'<rect x="{left}" y="{ptop}" width="{pw}" height="{ph}" fill="none" stroke="#000"/>'
        )
        out.append(
            f'<text x="{left + 6}" y="{ptop + 14}" font-weight="bold">{html.escape(algorithm)}</text>'
        )
    # Time axis, under the last panel.
    axis = top + len(panels) * (ph + gap) - gap
    span_s = (t1 - t0) / 1000
    step_s = _nice(span_s / 8)
    s = (t0 - origin_ms) / 1000
    s = step_s * -(-s // step_s)
    while s * 1000 + origin_ms <= t1:
        px = x(origin_ms + s * 1000)
        out.append(f'<line x1="{px:.1f}" x2="{px:.1f}" y1="{axis}" y2="{axis + 4}" stroke="#000"/>')
        out.append(f'<text x="{px:.1f}" y="{axis + 16}" text-anchor="middle">{s + 0.0:g}</text>')
        s += step_s
    out.append(
        f'<text x="{left + pw / 2}" y="{height - 6}" text-anchor="middle">seconds from the window boundary the burst came just before</text>'
    )
    # Legend.
    lx, ly = left + pw + 12, top + 6
    entries = [(n, COLOURS.get(n, "#888888"), "area") for n in systems]
    if counter:
        entries.append(("sliding counter (all)", COUNTER_COLOUR, "dash"))
    entries.append((f"limit ({limit})", LIMIT_COLOUR, "line"))
    for i, (label, colour, kind) in enumerate(entries):
        yy = ly + i * 18
        if kind == "area":
            out.append(
                f'<rect x="{lx}" y="{yy - 8}" width="14" height="10" fill="{colour}" fill-opacity="0.75"/>'
            )
        else:
            dash = ' stroke-dasharray="5,3"' if kind == "dash" else ""
            out.append(
                f'<line x1="{lx}" x2="{lx + 14}" y1="{yy - 3}" y2="{yy - 3}" stroke="{colour}" stroke-width="2"{dash}/>'
            )
        out.append(f'<text x="{lx + 20}" y="{yy}">{html.escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _points(
    x: Callable[[float], float], y: Callable[[float], float], samples: list[tuple[float, int]]
) -> list[str]:
    """SVG coordinates of samples, without the middle of flat runs (a
    picture a few kB in size draws the same)."""
    keep = [
        p
        for i, p in enumerate(samples)
        if i in (0, len(samples) - 1) or not samples[i - 1][1] == p[1] == samples[i + 1][1]
    ]
    return [f"{x(t):.1f},{y(n):.1f}" for t, n in keep]


def _nice(v: float) -> float:
    """The smallest round number (1, 1.2, 1.6, 2, 2.5, 4, 5, 8 times a power
    of ten) at or above v: axis maxima whose quarters are round too."""
    if v <= 0:
        return 1.0
    p = 1.0
    while p * 10 <= v:
        p *= 10
    while p > v:
        p /= 10
    for m in (1, 1.2, 1.6, 2, 2.5, 4, 5, 8, 10):
        if m * p >= v:
            return m * p
    return 10 * p
