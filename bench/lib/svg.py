"""Standalone SVG charts for the reports: line charts (a line per series over numeric x),
grouped bar charts (a bar per series in each group, optional min-max whiskers) and stacked
time-series panels sharing one time axis (timeseries_chart: linear, log or named y axes, step
lines, reference lines, vertical markers across every panel).

Written by hand because the suite must run on the Python standard library alone.

Invariants: output is a complete, well-formed XML document (text is escaped); it depends only on
the arguments (no clock, no randomness, series keep their given order and colours); each series
is one <g class="series"> holding its marks (class "point" for line charts, "bar" for bar
charts) so tests can count them; bad input (no series, no points, mismatched lengths, NaN or
infinite values, negative values on a bar chart) raises PlotError instead of drawing a wrong
picture. The y axis starts at 0 when all values are non-negative, so bar heights compare. In a
time-series chart a series name keeps one colour in every panel, and a log axis refuses values
that are not positive.
"""

import math
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

from .errors import PlotError

WIDTH_PX = 760
HEIGHT_PX = 420
MARGIN_LEFT_PX = 78
MARGIN_RIGHT_PX = 190
MARGIN_TOP_PX = 44
MARGIN_BOTTOM_PX = 64
TICK_COUNT_TARGET = 5
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#17becf", "#bcbd22"]


def nice_step(span, count=TICK_COUNT_TARGET):
    """The smallest 'nice' step (1, 2, 2.5 or 5 times a power of ten) that covers span in at
    most `count` steps."""
    if span <= 0 or not math.isfinite(span):
        return 1.0
    raw = span / count
    magnitude = 10.0 ** math.floor(math.log10(raw))
    for m in (1.0, 2.0, 2.5, 5.0, 10.0):
        if m * magnitude >= raw * (1 - 1e-9):
            return m * magnitude
    return 10.0 * magnitude


def ticks(lo, hi, count=TICK_COUNT_TARGET):
    """Tick values from a multiple of the step at or below lo to one at or above hi."""
    if hi < lo:
        lo, hi = hi, lo
    if hi == lo:
        hi = lo + 1.0
    step = nice_step(hi - lo, count)
    first = math.floor(lo / step + 1e-9)
    last = math.ceil(hi / step - 1e-9)
    return [round(i * step, 12) for i in range(first, last + 1)]


def fmt_tick(value):
    """Compact tick label: 1.5M, 20k, 0.25, 3."""
    a = abs(value)
    if a >= 1e6:
        return f"{value / 1e6:g}M"
    if a >= 1e4:
        return f"{value / 1e3:g}k"
    return f"{value:g}"


def _check_number(value, what):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise PlotError(f"{what}: {value!r} is not a finite number")
    return float(value)


class _Frame:
    """Maps data coordinates to pixels inside the plot area."""

    def __init__(self, x_range, y_ticks):
        self.x0, self.x1 = x_range
        self.y_ticks = y_ticks
        self.left = MARGIN_LEFT_PX
        self.right = WIDTH_PX - MARGIN_RIGHT_PX
        self.top = MARGIN_TOP_PX
        self.bottom = HEIGHT_PX - MARGIN_BOTTOM_PX

    def px_x(self, x):
        span = (self.x1 - self.x0) or 1.0
        return self.left + (x - self.x0) / span * (self.right - self.left)

    def px_y(self, y):
        lo, hi = self.y_ticks[0], self.y_ticks[-1]
        return self.bottom - (y - lo) / ((hi - lo) or 1.0) * (self.bottom - self.top)


def _open(title):
    return [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH_PX}" height="{HEIGHT_PX}" '
            f'viewBox="0 0 {WIDTH_PX} {HEIGHT_PX}" font-family="sans-serif" font-size="12">',
            f"<title>{escape(title)}</title>",
            f'<rect x="0" y="0" width="{WIDTH_PX}" height="{HEIGHT_PX}" fill="white"/>',
            f'<text class="chart-title" x="{WIDTH_PX / 2:.1f}" y="24" text-anchor="middle" font-size="15" '
            f'font-weight="bold">{escape(title)}</text>']


def _y_axis(frame, y_label):
    out = ['<g class="y-axis">']
    for t in frame.y_ticks:
        y = frame.px_y(t)
        out.append(f'<line x1="{frame.left}" y1="{y:.1f}" x2="{frame.right}" y2="{y:.1f}" stroke="#e0e0e0"/>')
        out.append(f'<text class="tick" x="{frame.left - 6}" y="{y + 4:.1f}" text-anchor="end">{escape(fmt_tick(t))}</text>')
    mid = (frame.top + frame.bottom) / 2
    out.append(f'<text class="axis-label" x="18" y="{mid:.1f}" text-anchor="middle" '
               f'transform="rotate(-90 18 {mid:.1f})">{escape(y_label)}</text>')
    out.append(f'<line x1="{frame.left}" y1="{frame.top}" x2="{frame.left}" y2="{frame.bottom}" stroke="black"/>')
    out.append(f'<line x1="{frame.left}" y1="{frame.bottom}" x2="{frame.right}" y2="{frame.bottom}" stroke="black"/>')
    out.append("</g>")
    return out


def _x_label(frame, x_label):
    x = (frame.left + frame.right) / 2
    return [f'<text class="axis-label" x="{x:.1f}" y="{HEIGHT_PX - 18}" text-anchor="middle">{escape(x_label)}</text>']


def _legend(names):
    out = ['<g class="legend">']
    x = WIDTH_PX - MARGIN_RIGHT_PX + 16
    for i, name in enumerate(names):
        y = MARGIN_TOP_PX + 8 + 20 * i
        out.append(f'<rect x="{x}" y="{y - 9}" width="12" height="12" fill="{PALETTE[i % len(PALETTE)]}"/>')
        out.append(f'<text class="legend-entry" x="{x + 18}" y="{y + 2}">{escape(str(name))}</text>')
    out.append("</g>")
    return out


def _value_ticks(values):
    """y ticks covering the values and 0."""
    return ticks(min(min(values), 0.0), max(max(values), 0.0))


def line_chart(title, x_label, y_label, series):
    """series: [(name, [(x, y), ...]), ...]. Points are drawn in x order; x is numeric."""
    if not series:
        raise PlotError(f"{title}: no series")
    clean = []
    for name, points in series:
        if not points:
            raise PlotError(f"{title}: series {name!r} has no points")
        pts = sorted((_check_number(x, f"{title} x"), _check_number(y, f"{title} y")) for x, y in points)
        clean.append((name, pts))
    xs = [x for _, pts in clean for x, _ in pts]
    ys = [y for _, pts in clean for _, y in pts]
    frame = _Frame((min(xs), max(xs)), _value_ticks(ys))
    out = _open(title) + _y_axis(frame, y_label) + _x_label(frame, x_label)
    out.append('<g class="x-axis">')
    for x in sorted(set(xs)):
        px = frame.px_x(x)
        out.append(f'<line x1="{px:.1f}" y1="{frame.bottom}" x2="{px:.1f}" y2="{frame.bottom + 5}" stroke="black"/>')
        out.append(f'<text class="tick" x="{px:.1f}" y="{frame.bottom + 18}" text-anchor="middle">{escape(fmt_tick(x))}</text>')
    out.append("</g>")
    for i, (name, pts) in enumerate(clean):
        colour = PALETTE[i % len(PALETTE)]
        coords = " ".join(f"{frame.px_x(x):.1f},{frame.px_y(y):.1f}" for x, y in pts)
        out.append(f'<g class="series" data-name={quoteattr(str(name))}>')
        out.append(f'<polyline class="line" points="{coords}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for x, y in pts:
            out.append(f'<circle class="point" cx="{frame.px_x(x):.1f}" cy="{frame.px_y(y):.1f}" r="3.5" fill="{colour}">'
                       f"<title>{escape(f'{name}: x={x:g}, y={y:g}')}</title></circle>")
        out.append("</g>")
    return "\n".join(out + _legend([n for n, _ in clean]) + ["</svg>"]) + "\n"


def _bar_series(title, groups, series):
    clean = []
    for entry in series:
        name, values = entry[0], entry[1]
        errors = entry[2] if len(entry) > 2 else None
        if len(values) != len(groups) or (errors is not None and len(errors) != len(groups)):
            raise PlotError(f"{title}: series {name!r} has {len(values)} values for {len(groups)} groups")
        vals = [None if v is None else _check_number(v, f"{title} {name}") for v in values]
        if any(v is not None and v < 0 for v in vals):
            raise PlotError(f"{title}: series {name!r} has a negative bar")
        errs = [None if e is None or None in e else tuple(_check_number(b, f"{title} whisker") for b in e)
                for e in (errors or [None] * len(groups))]
        clean.append((name, vals, errs))
    if not any(v is not None for _, vals, _ in clean for v in vals):
        raise PlotError(f"{title}: no values")
    return clean


def bar_chart(title, y_label, groups, series, reference=None):
    """groups: labels along x. series: [(name, [value per group], optional [(lo, hi) per group])];
    a value of None leaves its slot empty; (lo, hi) draws a min-max whisker. reference: optional
    (y value, label) drawn as a dashed horizontal line (e.g. 100% of a baseline)."""
    if not groups or not series:
        raise PlotError(f"{title}: no groups or no series")
    clean = _bar_series(title, groups, series)
    tops = [v for _, vals, _ in clean for v in vals if v is not None]
    tops += [e[1] for _, _, errs in clean for e in errs if e is not None]
    if reference is not None:
        tops.append(_check_number(reference[0], f"{title} reference"))
    frame = _Frame((0.0, float(len(groups))), ticks(0.0, max(tops)))
    out = _open(title) + _y_axis(frame, y_label)
    slot = (frame.right - frame.left) / len(groups)
    bar_w = slot * 0.8 / len(clean)
    out.append('<g class="x-axis">')
    for g, label in enumerate(groups):
        cx = frame.left + slot * (g + 0.5)
        out.append(f'<text class="tick" x="{cx:.1f}" y="{frame.bottom + 18}" text-anchor="middle">{escape(str(label))}</text>')
    out.append("</g>")
    for i, (name, vals, errs) in enumerate(clean):
        out.append(f'<g class="series" data-name={quoteattr(str(name))}>')
        for g, (v, e) in enumerate(zip(vals, errs)):
            if v is None:
                continue
            x = frame.left + slot * g + slot * 0.1 + bar_w * i
            y = frame.px_y(v)
            out.append(f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{frame.bottom - y:.1f}" '
                       f'fill="{PALETTE[i % len(PALETTE)]}"><title>{escape(f"{name}, {groups[g]}: {v:g}")}</title></rect>')
            if e is not None:
                cx = x + bar_w / 2
                out.append(f'<line class="whisker" x1="{cx:.1f}" y1="{frame.px_y(e[0]):.1f}" x2="{cx:.1f}" '
                           f'y2="{frame.px_y(e[1]):.1f}" stroke="black"/>')
        out.append("</g>")
    if reference is not None:
        y = frame.px_y(reference[0])
        out.append(f'<g class="reference"><line x1="{frame.left}" y1="{y:.1f}" x2="{frame.right}" y2="{y:.1f}" '
                   f'stroke="black" stroke-dasharray="6 4"/><text x="{frame.right - 4}" y="{y - 5:.1f}" '
                   f'text-anchor="end">{escape(str(reference[1]))}</text></g>')
    return "\n".join(out + _legend([n for n, _, _ in clean]) + ["</svg>"]) + "\n"


TS_WIDTH_PX = 900
TS_PANEL_HEIGHT_PX = 150
TS_PANEL_GAP_PX = 30


@dataclass(frozen=True)
class Panel:
    """One panel of timeseries_chart. series: [(name, [(x, y), ...])], a y of None breaks the
    line there (a gap, nothing measured); log: a log10 y axis
    (values must be positive); step: each value holds until the next point (a state, such as
    the protocol in force); y_names: ((value, label), ...) replaces the numeric ticks (a named
    axis); reference: optional (y value, label) drawn as a dashed horizontal line (a bound)."""

    y_label: str
    series: tuple
    log: bool = False
    step: bool = False
    y_names: tuple = ()
    reference: tuple = None


def log_ticks(lo, hi):
    """Powers of ten from the one at or below lo to the one at or above hi (both > 0)."""
    first, last = math.floor(math.log10(lo) + 1e-9), math.ceil(math.log10(hi) - 1e-9)
    return [10.0 ** k for k in range(first, max(last, first + 1) + 1)]


class _PanelFrame:
    """Maps one panel's data coordinates to pixels; top is the panel's upper edge."""

    def __init__(self, x_range, y_ticks, top, log):
        self.x0, self.x1 = x_range
        self.y_ticks, self.log = y_ticks, log
        self.left, self.right = MARGIN_LEFT_PX, TS_WIDTH_PX - MARGIN_RIGHT_PX
        self.top, self.bottom = top, top + TS_PANEL_HEIGHT_PX

    def px_x(self, x):
        return self.left + (x - self.x0) / ((self.x1 - self.x0) or 1.0) * (self.right - self.left)

    def px_y(self, y):
        scale = math.log10 if self.log else float
        lo, hi = scale(self.y_ticks[0]), scale(self.y_ticks[-1])
        return self.bottom - (scale(y) - lo) / ((hi - lo) or 1.0) * (self.bottom - self.top)


def _clean_panel(title, panel):
    """The panel's series as [(name, sorted points)], checked; PlotError for bad input."""
    clean = []
    for name, points in panel.series:
        pts = sorted(((_check_number(x, f"{title} x"), None if y is None else _check_number(y, f"{title} y"))
                      for x, y in points), key=lambda p: p[0])
        if panel.log and any(y is not None and y <= 0 for _, y in pts):
            raise PlotError(f"{title}: series {name!r} has a value <= 0 on a log axis")
        if any(y is not None for _, y in pts):
            clean.append((name, pts))
    if not clean:
        raise PlotError(f"{title}: panel {panel.y_label!r} has no points")
    return clean


def _panel_ticks(panel, ys):
    if panel.reference is not None:
        ys = ys + [_check_number(panel.reference[0], "reference")]
    if panel.y_names:
        values = [_check_number(v, "y_names") for v, _ in panel.y_names]
        return ticks(min(values + ys), max(values + ys))
    if panel.log:
        return log_ticks(min(ys), max(ys))
    return _value_ticks(ys)


def _panel_axis(frame, panel):
    names = dict(panel.y_names)
    shown = sorted(names) if names else frame.y_ticks
    out = ['<g class="y-axis">']
    for t in shown:
        y = frame.px_y(t)
        label = names.get(t, fmt_tick(t))
        out.append(f'<line x1="{frame.left}" y1="{y:.1f}" x2="{frame.right}" y2="{y:.1f}" stroke="#e0e0e0"/>')
        out.append(f'<text class="tick" x="{frame.left - 6}" y="{y + 4:.1f}" text-anchor="end">{escape(label)}</text>')
    mid = (frame.top + frame.bottom) / 2
    out.append(f'<text class="axis-label" x="18" y="{mid:.1f}" text-anchor="middle" font-size="11" '
               f'transform="rotate(-90 18 {mid:.1f})">{escape(panel.y_label)}</text>')
    out.append(f'<rect x="{frame.left}" y="{frame.top}" width="{frame.right - frame.left}" '
               f'height="{TS_PANEL_HEIGHT_PX}" fill="none" stroke="black"/>')
    out.append("</g>")
    return out


def _panel_lines(frame, panel, clean, colours):
    out = []
    for name, pts in clean:
        runs = [[]]
        for point in pts:
            if point[1] is None:
                runs.append([])
            else:
                runs[-1].append(point)
        runs = [r for r in runs if r]
        if panel.step:
            runs = [[p for a, b in zip(r, r[1:] + [None]) for p in ([a, (b[0], a[1])] if b else [a])] for r in runs]
        out.append(f'<g class="series" data-name={quoteattr(str(name))} data-points="{sum(map(len, runs))}">')
        for run in runs:
            coords = " ".join(f"{frame.px_x(x):.1f},{frame.px_y(y):.1f}" for x, y in run)
            out.append(f'<polyline class="line" points="{coords}" fill="none" stroke="{colours[name]}" '
                       f'stroke-width="1.5"/>')
        out.append("</g>")
    if panel.reference is not None:
        y = frame.px_y(_check_number(panel.reference[0], "reference"))
        out.append(f'<g class="reference"><line x1="{frame.left}" y1="{y:.1f}" x2="{frame.right}" y2="{y:.1f}" '
                   f'stroke="black" stroke-dasharray="6 4"/><text x="{frame.right - 4}" y="{y - 4:.1f}" '
                   f'text-anchor="end" font-size="11">{escape(str(panel.reference[1]))}</text></g>')
    return out


def _markers(frames, markers):
    out = ['<g class="markers">']
    top, bottom = frames[0].top, frames[-1].bottom
    for x, label in markers:
        px = frames[0].px_x(_check_number(x, "marker"))
        out.append(f'<line class="marker" x1="{px:.1f}" y1="{top}" x2="{px:.1f}" y2="{bottom}" stroke="#555" '
                   f'stroke-dasharray="3 3"/>')
        out.append(f'<text x="{px + 3:.1f}" y="{top - 4}" font-size="11">{escape(str(label))}</text>')
    out.append("</g>")
    return out


def timeseries_chart(title, x_label, panels, markers=()):
    """Panels (Panel) stacked top to bottom over one shared x axis (time); markers: [(x,
    label)] drawn as dashed vertical lines through every panel (e.g. the steps of a schedule).
    One legend lists every series name once, in first-appearance order, with its colour."""
    if not panels:
        raise PlotError(f"{title}: no panels")
    cleaned = [_clean_panel(title, p) for p in panels]
    xs = [x for clean in cleaned for _, pts in clean for x, _ in pts]
    xs += [_check_number(x, "marker") for x, _ in markers]
    names = list(dict.fromkeys(n for clean in cleaned for n, _ in clean))
    colours = {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(names)}
    height = MARGIN_TOP_PX + 12 + len(panels) * (TS_PANEL_HEIGHT_PX + TS_PANEL_GAP_PX) + MARGIN_BOTTOM_PX - 20
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{TS_WIDTH_PX}" height="{height}" '
           f'viewBox="0 0 {TS_WIDTH_PX} {height}" font-family="sans-serif" font-size="12">',
           f"<title>{escape(title)}</title>",
           f'<rect x="0" y="0" width="{TS_WIDTH_PX}" height="{height}" fill="white"/>',
           f'<text class="chart-title" x="{TS_WIDTH_PX / 2:.1f}" y="22" text-anchor="middle" font-size="15" '
           f'font-weight="bold">{escape(title)}</text>']
    frames = []
    for i, (panel, clean) in enumerate(zip(panels, cleaned)):
        top = MARGIN_TOP_PX + 12 + i * (TS_PANEL_HEIGHT_PX + TS_PANEL_GAP_PX)
        frame = _PanelFrame((min(xs), max(xs)), _panel_ticks(panel, [y for _, pts in clean for _, y in pts
                                                                     if y is not None]),
                            top, panel.log)
        frames.append(frame)
        out += [f'<g class="panel" data-y-label={quoteattr(panel.y_label)}>'] + _panel_axis(frame, panel)
        out += _panel_lines(frame, panel, clean, colours) + ["</g>"]
    out += _markers(frames, markers) + _time_axis(frames[-1], x_label, height)
    out.append('<g class="legend">')
    for i, name in enumerate(names):
        x, y = TS_WIDTH_PX - MARGIN_RIGHT_PX + 16, MARGIN_TOP_PX + 20 + 20 * i
        out.append(f'<rect x="{x}" y="{y - 9}" width="12" height="12" fill="{colours[name]}"/>')
        out.append(f'<text class="legend-entry" x="{x + 18}" y="{y + 2}">{escape(str(name))}</text>')
    return "\n".join(out + ["</g>", "</svg>"]) + "\n"


def _time_axis(frame, x_label, height):
    out = ['<g class="x-axis">']
    for t in ticks(frame.x0, frame.x1, 10):
        if frame.x0 - 1e-9 <= t <= frame.x1 + 1e-9:
            px = frame.px_x(t)
            out.append(f'<line x1="{px:.1f}" y1="{frame.bottom}" x2="{px:.1f}" y2="{frame.bottom + 5}" stroke="black"/>')
            out.append(f'<text class="tick" x="{px:.1f}" y="{frame.bottom + 18}" text-anchor="middle">'
                       f"{escape(fmt_tick(t))}</text>")
    x = (frame.left + frame.right) / 2
    out.append(f'<text class="axis-label" x="{x:.1f}" y="{height - 12}" text-anchor="middle">{escape(x_label)}</text>')
    out.append("</g>")
    return out
