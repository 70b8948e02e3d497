"""`thumb report`'s figures, written as SVG directly: THUMB Figure 2 (P and R histograms,
human vs machine captions) and a metric-vs-Total scatter plot per metric. They are a few
bars and dots; importing a plotting library took longer than the whole report's
statistics (issue #19). Every label is stored text and is escaped for XML."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from reports.tables import Report
from rubrics import Rubric, for_html

MACHINE, HUMAN = "#1f77b4", "#ff7f0e"
PANEL_WIDTH, HEIGHT = 450, 350
LEFT, RIGHT, TOP, BOTTOM = 60, 15, 30, 45  # margins around a plot area, in pixels


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About `count` round tick values (steps of 1, 2, 2.5 or 5 times a power of ten)
    within [low, high]."""
    step_wanted = (high - low) / count if high > low else 1.0
    power = 10.0 ** math.floor(math.log10(step_wanted))
    step = next(power * m for m in (1, 2, 2.5, 5, 10) if power * m >= step_wanted * 0.999)
    first = math.ceil(low / step - 1e-9) * step
    return [first + index * step
            for index in range(math.floor((high - first) / step + 1e-9) + 1)]


def _tick_label(value: float, step: float) -> str:
    """`value` with as many decimals as the step between ticks has."""
    decimals = len(f"{step:.6f}".rstrip("0").split(".")[1])
    return f"{value:.{decimals}f}"


class _Panel:
    """One plot area: data ranges mapped to pixels, with its axes drawn (round ticks
    within each range unless given)."""

    def __init__(self, left: float, x_range: tuple[float, float],
                 y_range: tuple[float, float], x_ticks: list[float] | None = None) -> None:
        self.left, self.width = left + LEFT, PANEL_WIDTH - LEFT - RIGHT
        self.top, self.height = TOP, HEIGHT - TOP - BOTTOM
        self.x_range, self.y_range = x_range, y_range
        self.x_ticks = x_ticks if x_ticks is not None else nice_ticks(*x_range)
        self.y_ticks = nice_ticks(*y_range)

    def x(self, value: float | np.ndarray) -> float | np.ndarray:
        low, high = self.x_range
        return self.left + (value - low) / (high - low) * self.width

    def y(self, value: float | np.ndarray) -> float | np.ndarray:
        low, high = self.y_range
        return self.top + self.height - (value - low) / (high - low) * self.height

    def axes(self, x_label: str, y_label: str, title: str = "") -> list[str]:
        bottom, right = self.top + self.height, self.left + self.width
        parts = [f'<rect x="{self.left}" y="{self.top}" width="{self.width}" '
                 f'height="{self.height}" fill="none" stroke="#333"/>']
        x_step = self.x_ticks[1] - self.x_ticks[0] if len(self.x_ticks) > 1 else 1.0
        for tick in self.x_ticks:
            at = self.x(tick)
            parts.append(f'<line x1="{at:.1f}" y1="{bottom}" x2="{at:.1f}" y2="{bottom + 4}" '
                         f'stroke="#333"/><text x="{at:.1f}" y="{bottom + 16}" '
                         f'text-anchor="middle">{_tick_label(tick, x_step)}</text>')
        y_step = self.y_ticks[1] - self.y_ticks[0] if len(self.y_ticks) > 1 else 1.0
        for tick in self.y_ticks:
            at = self.y(tick)
            parts.append(f'<line x1="{self.left - 4}" y1="{at:.1f}" x2="{self.left}" '
                         f'y2="{at:.1f}" stroke="#333"/><text x="{self.left - 6}" '
                         f'y="{at + 4:.1f}" text-anchor="end">{_tick_label(tick, y_step)}'
                         '</text>')
        middle = self.top + self.height / 2
        parts.append(f'<text x="{(self.left + right) / 2:.1f}" y="{bottom + 34}" '
                     f'text-anchor="middle">{for_html(x_label)}</text>'
                     f'<text transform="translate({self.left - 44},{middle:.1f}) rotate(-90)" '
                     f'text-anchor="middle">{for_html(y_label)}</text>')
        if title:
            parts.append(f'<text x="{(self.left + right) / 2:.1f}" y="{self.top - 10}" '
                         f'text-anchor="middle" font-size="13">{for_html(title)}</text>')
        return parts


def _svg(width: int, title: str, parts: Sequence[str]) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{HEIGHT}" '
            f'viewBox="0 0 {width} {HEIGHT}" font-family="sans-serif" font-size="11">'
            f'<title>{for_html(title)}</title><rect width="{width}" height="{HEIGHT}" '
            f'fill="white"/>{"".join(parts)}</svg>\n')


def histogram_figure(data: pd.DataFrame, rubric: Rubric, title: str) -> str:
    """Figure 2: per score level of the first two dimensions, the share of machine and of
    Human captions at that level, side by side."""
    human = (data["system"] == "Human").to_numpy()
    parts: list[str] = []
    for index, dimension in enumerate(rubric.dimensions[:2]):
        bins = [level - 0.5 for level in dimension.scale] + [dimension.max + 0.5]
        values = data[dimension.key].to_numpy(float)
        shares = []
        for group in (~human, human):
            kept = values[group & ~np.isnan(values)]
            shares.append(np.histogram(kept, bins=bins, density=True)[0] if len(kept)
                          else np.zeros(len(bins) - 1))
        top = max(float(np.max(shares)), 0.05) * 1.05
        panel = _Panel(index * PANEL_WIDTH, (bins[0], bins[-1]), (0.0, top),
                       x_ticks=[float(level) for level in dimension.scale])
        bar = panel.x(bins[0] + 0.4) - panel.x(bins[0])  # two bars in 80% of a bin
        for share, colour, offset in zip(shares, (MACHINE, HUMAN), (-1, 0), strict=True):
            for level, value in zip(dimension.scale, share, strict=True):
                at, height = panel.x(level) + offset * bar, panel.y(0) - panel.y(value)
                parts.append(f'<rect x="{at:.1f}" y="{panel.y(value):.1f}" width="{bar:.1f}" '
                             f'height="{height:.1f}" fill="{colour}"/>')
        parts += panel.axes("score", "share of captions", dimension.label)
    for row, (label, colour) in enumerate((("machine", MACHINE), ("Human", HUMAN))):
        y = TOP + 10 + row * 16
        parts.append(f'<rect x="{LEFT + 10}" y="{y - 9}" width="10" height="10" '
                     f'fill="{colour}"/><text x="{LEFT + 25}" y="{y}">{label}</text>')
    return _svg(2 * PANEL_WIDTH, title, parts)


def _padded_range(values: np.ndarray) -> tuple[float, float]:
    """The values' range with 5% to spare on each side (a constant gets +-5%, or +-0.5)."""
    low, high = (float(values.min()), float(values.max())) if len(values) else (0.0, 1.0)
    pad = (high - low) * 0.05 or max(abs(low) * 0.05, 0.5)
    return low - pad, high + pad


def scatter_figure(x: np.ndarray, y: np.ndarray, x_label: str, y_label: str,
                   title: str) -> str:
    """One dot per caption where both values are defined (translucent, so that dense
    regions read as darker)."""
    kept = ~np.isnan(x) & ~np.isnan(y)
    x, y = x[kept], y[kept]
    panel = _Panel(0, _padded_range(x), _padded_range(y))
    dots = [f'<circle cx="{a:.1f}" cy="{b:.1f}" r="2"/>'
            for a, b in zip(panel.x(x), panel.y(y), strict=True)]
    parts = [f'<g fill="{MACHINE}" fill-opacity="0.4">{"".join(dots)}</g>',
             *panel.axes(x_label, y_label)]
    return _svg(PANEL_WIDTH, title, parts)


def draw_figures(report: Report, folder: Path) -> dict[str, Path]:
    """Figure 2 and one scatter plot per metric as SVG files in `folder`: title -> path."""
    data, dimensions = report.data, report.rubric.dimensions
    figures: dict[str, Path] = {}
    title = (f"{dimensions[0].label} and {dimensions[1].label.lower()}: human vs machine "
             "captions")
    figures[title] = folder / "figure2.svg"
    figures[title].write_text(histogram_figure(data, report.rubric, title), encoding="utf-8")
    for metric in report.signatures:
        title = f"{metric} vs human Total"
        path = folder / f"scatter-{re.sub(r'[^A-Za-z0-9.-]+', '-', metric).strip('-')}.svg"
        path.write_text(scatter_figure(data[metric].to_numpy(float),
                                       data["total"].to_numpy(float), metric, "human Total",
                                       title), encoding="utf-8")
        figures[title] = path
    return figures
