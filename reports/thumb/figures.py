"""`thumb report`'s figures: THUMB Figure 2 (P and R histograms, human vs machine captions)
and a metric-vs-Total scatter plot per metric, coloured by system. `figure_data` computes
what each figure shows, once; `draw_figures` writes it as SVG directly (a few bars and dots:
importing a plotting library took longer than the whole report's statistics, issue #19) and
`reports.thumb.print_figures` draws the same data with matplotlib for print. Every label is
stored text and is escaped for XML. The palette is Okabe and Ito's, safe for colour-blind
readers."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from reports.thumb.tables import Report
from rubrics import Rubric, for_html

# Okabe & Ito (2008), "Color Universal Design": told apart by readers with any common
# colour-vision deficiency. Yellow comes last (it is faint on white); black is kept for ink.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442")
MACHINE, HUMAN = PALETTE[0], PALETTE[1]
HUMAN_SYSTEM = "Human"
PANEL_WIDTH, HEIGHT = 450, 350
LEFT, RIGHT, TOP, BOTTOM = 60, 15, 30, 45  # margins around a plot area, in pixels
LEGEND_WIDTH = 120  # right of a scatter plot
LEGEND_CHARACTERS = 18  # a longer group name is cut (with …) to fit that width
POINT_OPACITY = 0.7  # overlapping points read darker, each colour still tells its group


@dataclass(frozen=True)
class Bars:
    """One histogram panel: per score level, each group's share of captions (percent)."""

    title: str
    levels: tuple[float, ...]
    shares: dict[str, np.ndarray]  # group -> percent of its captions at each level


@dataclass(frozen=True)
class Points:
    """One scatter panel: each group's (x, y) points, both values defined."""

    groups: dict[str, tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class FigureData:
    """What one figure shows, for every renderer: its file name (without extension), title,
    caption, axis labels (with units), the colour of each group, and either histogram
    panels side by side or one scatter panel."""

    stem: str
    title: str
    caption: str
    x_label: str
    y_label: str
    colours: dict[str, str]
    bars: tuple[Bars, ...] = ()
    points: Points | None = None

    @property
    def has_data(self) -> bool:
        """Whether there is anything to draw (no human score yet: no bar, no point)."""
        return any(panel.shares for panel in self.bars) or bool(
            self.points and self.points.groups)


def group_colours(groups: Sequence[str]) -> dict[str, str]:
    """A colour per group, the Human captions always in HUMAN, the others in palette order
    (repeating after seven groups)."""
    others = [colour for colour in PALETTE if colour != HUMAN]
    machine = iter(others * (len(groups) // len(others) + 1))
    return {group: HUMAN if group == HUMAN_SYSTEM else next(machine) for group in groups}


def histogram_data(data: pd.DataFrame, rubric: Rubric) -> FigureData:
    """Figure 2: per score level of the first two dimensions, the share of machine and of
    Human captions at that level (a group without a scored caption is left out)."""
    human = (data["system"] == HUMAN_SYSTEM).to_numpy()
    colours = {"machine": MACHINE, HUMAN_SYSTEM: HUMAN}
    panels = []
    for dimension in rubric.dimensions[:2]:
        levels = tuple(float(level) for level in dimension.scale)
        values = data[dimension.key].to_numpy(float)
        shares = {}
        for group, rows in (("machine", ~human), (HUMAN_SYSTEM, human)):
            kept = values[rows & ~np.isnan(values)]
            if len(kept):
                counts = np.array([(kept == level).sum() for level in levels], dtype=float)
                shares[group] = 100 * counts / len(kept)
        panels.append(Bars(dimension.label, levels, shares))
    first, second = rubric.dimensions[:2]
    scale = (f"{first.min}–{first.max}" if (first.min, first.max) == (second.min, second.max)
             else f"{first.short} {first.min}–{first.max}, {second.short} "
                  f"{second.min}–{second.max}")
    drawn = {group for panel in panels for group in panel.shares}
    return FigureData(
        stem="figure2",
        title=f"{first.label} and {second.label.lower()}: human vs machine captions",
        caption=(f"Share of captions at each {first.short} and {second.short} score, machine "
                 f"captions and Human captions apart (THUMB Figure 2; {len(data)} captions)."),
        x_label=f"score ({scale})", y_label="share of captions (%)",
        colours={group: colour for group, colour in colours.items() if group in drawn},
        bars=tuple(panels))


def scatter_data(data: pd.DataFrame, metric: str, rubric: Rubric) -> FigureData:
    """One point per caption where the metric and the human Total are both defined, in its
    system's colour."""
    x, y = data[metric].to_numpy(float), data["total"].to_numpy(float)
    kept = ~np.isnan(x) & ~np.isnan(y)
    groups = {}
    for system in dict.fromkeys(data["system"]):
        rows = kept & (data["system"] == system).to_numpy()
        if rows.any():
            groups[system] = (x[rows], y[rows])
    best = max(d.max for d in rubric.dimensions)
    return FigureData(
        stem=f"scatter-{re.sub(r'[^A-Za-z0-9.-]+', '-', metric).strip('-')}",
        title=f"{metric} vs human Total",
        caption=(f"{metric} against the human Total, one point per caption ({int(kept.sum())} "
                 "where both are defined), coloured by system."),
        x_label=f"{metric} (metric score)", y_label=f"human Total (points, {best} best)",
        colours=group_colours(list(groups)), points=Points(groups))


def figure_data(report: Report) -> list[FigureData]:
    """Figure 2 and one scatter plot per metric, those with something to draw."""
    if report.data.empty:
        return []
    figures = [histogram_data(report.data, report.rubric),
               *[scatter_data(report.data, metric, report.rubric)
                 for metric in report.signatures]]
    return [figure for figure in figures if figure.has_data]


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


def _legend(colours: dict[str, str], left: float, top: float) -> list[str]:
    """A swatch and name per group, one below the other from (left, top)."""
    parts = []
    for row, (group, colour) in enumerate(colours.items()):
        y = top + 14 + row * 16
        name = (group if len(group) <= LEGEND_CHARACTERS
                else group[:LEGEND_CHARACTERS - 1] + "…")
        parts.append(f'<rect x="{left}" y="{y - 9}" width="10" height="10" fill="{colour}"/>'
                     f'<text x="{left + 15}" y="{y}">{for_html(name)}</text>')
    return parts


def _svg(width: int, title: str, parts: Sequence[str]) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{HEIGHT}" '
            f'viewBox="0 0 {width} {HEIGHT}" font-family="sans-serif" font-size="11">'
            f'<title>{for_html(title)}</title><rect width="{width}" height="{HEIGHT}" '
            f'fill="white"/>{"".join(parts)}</svg>\n')


def _bars_svg(figure: FigureData) -> str:
    """Each panel's groups side by side in 80% of a level's width."""
    parts: list[str] = []
    for index, panel_data in enumerate(figure.bars):
        levels = panel_data.levels
        top = max([5.0, *(float(np.max(s)) for s in panel_data.shares.values())]) * 1.05
        panel = _Panel(index * PANEL_WIDTH, (levels[0] - 0.5, levels[-1] + 0.5), (0.0, top),
                       x_ticks=list(levels))
        bar = (panel.x(levels[0] + 0.8) - panel.x(levels[0])) / len(panel_data.shares)
        start = -len(panel_data.shares) / 2
        for offset, (group, shares) in enumerate(panel_data.shares.items()):
            for level, share in zip(levels, shares, strict=True):
                at, height = panel.x(level) + (start + offset) * bar, panel.y(0) - panel.y(share)
                parts.append(f'<rect x="{at:.1f}" y="{panel.y(share):.1f}" width="{bar:.1f}" '
                             f'height="{height:.1f}" fill="{figure.colours[group]}"/>')
        parts += panel.axes(figure.x_label, figure.y_label, panel_data.title)
        if index == 0:  # the bars are low at the low levels: room in the top left corner
            parts += _legend(figure.colours, panel.left + 8, panel.top)
    return _svg(len(figure.bars) * PANEL_WIDTH, figure.title, parts)


def _padded_range(values: np.ndarray) -> tuple[float, float]:
    """The values' range with 5% to spare on each side (a constant gets +-5%, or +-0.5)."""
    low, high = (float(values.min()), float(values.max())) if len(values) else (0.0, 1.0)
    pad = (high - low) * 0.05 or max(abs(low) * 0.05, 0.5)
    return low - pad, high + pad


def _points_svg(figure: FigureData, points: Points) -> str:
    """One translucent dot per point (dense regions read as darker), a group per colour;
    the legend right of the plot area, where it hides no point."""
    x = np.concatenate([xs for xs, _ in points.groups.values()] or [np.empty(0)])
    y = np.concatenate([ys for _, ys in points.groups.values()] or [np.empty(0)])
    panel = _Panel(0, _padded_range(x), _padded_range(y))
    parts = []
    for group, (xs, ys) in points.groups.items():
        dots = "".join(f'<circle cx="{a:.1f}" cy="{b:.1f}" r="3"/>'
                       for a, b in zip(panel.x(xs), panel.y(ys), strict=True))
        parts.append(f'<g fill="{figure.colours[group]}" fill-opacity="{POINT_OPACITY}">'
                     f'{dots}</g>')
    parts += panel.axes(figure.x_label, figure.y_label)
    parts += _legend(figure.colours, PANEL_WIDTH, TOP)
    return _svg(PANEL_WIDTH + LEGEND_WIDTH, figure.title, parts)


def figure_svg(figure: FigureData) -> str:
    return _bars_svg(figure) if figure.points is None else _points_svg(figure, figure.points)


@dataclass(frozen=True)
class WrittenFigure:
    data: FigureData
    path: Path


def draw_figures(report: Report, folder: Path) -> list[WrittenFigure]:
    """Every figure of `figure_data` as an SVG file in `folder`."""
    written = []
    for figure in figure_data(report):
        path = folder / f"{figure.stem}.svg"
        path.write_text(figure_svg(figure), encoding="utf-8")
        written.append(WrittenFigure(figure, path))
    return written
