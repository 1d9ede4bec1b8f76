"""A small dependency-free SVG line chart for the CLI (the pipeline's page views per window and category):
one series per name over shared x labels, axes, gridlines and a legend; PNG too when matplotlib is there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path

COLORS = ("#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563")


def svg_line_chart(
    title: str,
    x_labels: Sequence[str],
    series: Mapping[str, Sequence[float]],
    *,
    y_label: str = "",
    width: int = 900,
    height: int = 420,
) -> str:
    """An SVG document: each series a polyline with dots, y from 0 to a round maximum."""
    left, right, top, bottom = 64, 160, 48, 64
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = max((v for values in series.values() for v in values), default=0.0)
    y_max = _round_up(peak) if peak > 0 else 1.0
    n = max(len(x_labels), 1)

    def x_at(i: int) -> float:
        return left + (plot_w * i / (n - 1) if n > 1 else plot_w / 2)

    def y_at(v: float) -> float:
        return top + plot_h - plot_h * v / y_max

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="28" text-anchor="middle" font-size="16" '
        f'font-weight="bold">{escape(title)}</text>',
    ]
    for k in range(6):  # gridlines and y ticks
        v = y_max * k / 5
        y = y_at(v)
        out.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#e5e7eb"/>'
        )
        out.append(f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end">{v:g}</text>')
    step = max(1, n // 12)  # at most ~12 x labels
    for i, label in enumerate(x_labels):
        if i % step == 0 or i == n - 1:
            x = x_at(i)
            out.append(
                f'<text x="{x:.1f}" y="{top + plot_h + 18}" text-anchor="end" '
                f'transform="rotate(-35 {x:.1f} {top + plot_h + 18})">{escape(label)}</text>'
            )
    out.append(
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        'stroke="#111827"/>'
    )
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#111827"/>')
    if y_label:
        out.append(
            f'<text x="16" y="{top + plot_h / 2}" text-anchor="middle" '
            f'transform="rotate(-90 16 {top + plot_h / 2})">{escape(y_label)}</text>'
        )
    for idx, (name, values) in enumerate(series.items()):
        color = COLORS[idx % len(COLORS)]
        points = " ".join(f"{x_at(i):.1f},{y_at(v):.1f}" for i, v in enumerate(values))
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{points}"/>')
        for i, v in enumerate(values):
            out.append(f'<circle cx="{x_at(i):.1f}" cy="{y_at(v):.1f}" r="2.5" fill="{color}"/>')
        ly = top + 16 + idx * 20
        lx = left + plot_w + 16
        out.append(
            f'<line x1="{lx}" y1="{ly - 4}" x2="{lx + 18}" y2="{ly - 4}" stroke="{color}" '
            'stroke-width="3"/>'
        )
        out.append(f'<text x="{lx + 24}" y="{ly}">{escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _round_up(v: float) -> float:
    """The next 'round' number at or above v (1, 2, 5 times a power of ten)."""
    magnitude = 1.0
    while magnitude * 10 <= v:
        magnitude *= 10
    for m in (1, 2, 5, 10):
        if m * magnitude >= v:
            return m * magnitude
    return 10 * magnitude


def write_chart(
    path_stem: Path,
    title: str,
    x_labels: Sequence[str],
    series: Mapping[str, Sequence[float]],
    y_label: str = "",
) -> list[Path]:
    """`<stem>.svg` always, and `<stem>.png` when matplotlib is installed; the files written."""
    written = []
    svg = path_stem.with_suffix(".svg")
    svg.write_text(svg_line_chart(title, x_labels, series, y_label=y_label))
    written.append(svg)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return written
    fig, ax = plt.subplots(figsize=(9, 4.2))
    for name, values in series.items():
        ax.plot(range(len(values)), values, marker="o", markersize=3, label=name)
    step = max(1, len(x_labels) // 12)
    ax.set_xticks(range(0, len(x_labels), step))
    ax.set_xticklabels(list(x_labels)[::step], rotation=35, ha="right")
    ax.set_title(title)
    ax.set_ylabel(y_label)
    ax.legend()
    fig.tight_layout()
    png = path_stem.with_suffix(".png")
    fig.savefig(png)
    plt.close(fig)
    written.append(png)
    return written
