"""The small charts of `/numbers` (docs/protocol.md §19), drawn on the server as SVG, pure:
for each role, over the last 24 hours hour by hour, how many copies it completed and the
median of its waits and of its work.  The page needs no script to show them.

Every text in a chart is escaped (a role's name is checked where it is read, and escaped
again here); the bars carry `data-hour` and `data-value`, so a test reads what a person
sees.
"""

from __future__ import annotations

from html import escape

from handoffd.numbers import tally
from handoffd.numbers.facts import Facts
from handoffd.numbers.stats import duration

HOURS = 24
WIDTH, HEIGHT = 340, 132
LEFT, RIGHT, TOP, BOTTOM = 44, 8, 22, 22  # the plot's margins inside the chart
COLOURS = {"completed": "#2f9e44", "wait": "#e8590c", "work": "#1c7ed6"}
TITLES = {"completed": "completed per hour", "wait": "wait p50", "work": "work p50"}
KINDS = tuple(TITLES)


def series(facts: Facts) -> dict[str, dict[str, list[float | None]]]:
    """Per role, per kind, one value per hour, oldest first (the last hour ends now): a
    count for `completed`, the median in seconds (None: nothing that hour) otherwise."""
    start = facts.now - HOURS * 3600
    done = tally.completion_times(facts, start)
    spans = {kind: tally.dated(facts, kind, start) for kind in ("wait", "work")}
    found: dict[str, dict[str, list[float | None]]] = {}
    for role in facts.roles:
        counts: list[float | None] = [0.0] * HOURS
        for at in done.get(role, []):
            if (hour := _hour(at, start)) is not None:
                counts[hour] = (counts[hour] or 0) + 1
        found[role] = {"completed": counts}
        for kind, by_role in spans.items():
            hours: list[list[float]] = [[] for _ in range(HOURS)]
            for at, seconds in by_role.get(role, []):
                if (hour := _hour(at, start)) is not None:
                    hours[hour].append(seconds)
            found[role][kind] = [tally.percentile(values, 0.5) for values in hours]
    return found


def _hour(at: float, start: float) -> int | None:
    hour = int((at - start) // 3600)
    return hour if 0 <= hour < HOURS else None


def svg(kind: str, values: list[float | None], role: str) -> str:
    """One chart: 24 bars, the axis' top value, the hours at -24h, -12h and now."""
    known = [v for v in values if v is not None]
    top = max(known, default=0.0)
    scale = _ceiling(top, kind)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    step = plot_w / HOURS
    label = f"{TITLES[kind]} — {role}, last 24 h"
    base, top_text = TOP + plot_h, _axis(scale, kind) if scale else ""
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-kind="{kind}" '
        f'width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{escape(label)}">',
        f'<title>{escape(label)}</title>',
        f'<text x="{LEFT}" y="14" class="chart-title">{escape(TITLES[kind])}</text>',
        f'<line x1="{LEFT}" y1="{base}" x2="{LEFT + plot_w}" y2="{base}" class="axis"/>',
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT + plot_w}" y2="{TOP}" class="grid"/>',
        f'<text x="{LEFT - 4}" y="{TOP + 4}" class="tick" text-anchor="end">{top_text}</text>',
        f'<text x="{LEFT - 4}" y="{TOP + plot_h}" class="tick" text-anchor="end">0</text>',
    ]  # fmt: skip
    for hour, value in enumerate(values):
        x = LEFT + hour * step + 1
        if value is None:
            continue
        height = 0.0 if scale == 0 else plot_h * value / scale
        parts.append(
            f'<rect x="{x:.1f}" y="{TOP + plot_h - height:.1f}" width="{step - 2:.1f}" '
            f'height="{max(height, 1.0 if value else 0.0):.1f}" fill="{COLOURS[kind]}" '
            f'data-hour="{hour}" data-value="{value:g}"><title>{_shown(value, kind)}</title></rect>'
        )
    for hour, text in ((0, "-24h"), (12, "-12h"), (HOURS, "now")):
        anchor = "start" if hour == 0 else "end" if hour == HOURS else "middle"
        parts.append(f'<text x="{LEFT + hour * step:.1f}" y="{HEIGHT - 6}" class="tick" '
                     f'text-anchor="{anchor}">{text}</text>')  # fmt: skip
    if not known or top == 0:
        parts.append(f'<text x="{LEFT + plot_w / 2:.1f}" y="{TOP + plot_h / 2 + 4:.1f}" '
                     'class="none" text-anchor="middle">none</text>')  # fmt: skip
    parts.append("</svg>")
    return "".join(parts)


def _ceiling(top: float, kind: str) -> float:
    """A round top for the axis: a whole count, or a duration a person reads at a glance."""
    if top <= 0:
        return 0.0
    if kind == "completed":
        return float(max(1, int(-(-top // 1))))
    for nice in (1, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1200, 1800, 3600, 7200, 14400, 86400):
        if top <= nice:
            return float(nice)
    return top


def _axis(value: float, kind: str) -> str:
    """The axis' top, short: `3`, `30s`, `10m`, `2h`."""
    if kind == "completed":
        return f"{value:g}"
    for unit, size in (("h", 3600), ("m", 60)):
        if value >= size:
            return f"{value / size:g}{unit}"
    return f"{value:g}s"


def _shown(value: float, kind: str) -> str:
    return f"{value:g}" if kind == "completed" else duration(value)
