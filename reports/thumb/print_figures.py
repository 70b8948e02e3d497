"""The report's figures for print: each `reports.thumb.figures.FigureData` drawn with matplotlib
(in the `metrics` extra, imported only here, only when print figures are asked for) as a
vector PDF and a 300-dpi PNG beside its SVG: the same data, palette and labels. Labels are
stored text: `reports.plotting` draws them safely."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from reports.plotting import plot_label, pyplot
from reports.thumb.figures import POINT_OPACITY, Bars, FigureData, Points

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

PRINT_DPI = 300
PRINT_SETTINGS = {"font.size": 9, "pdf.fonttype": 42, "svg.fonttype": "none"}  # editable text
PANEL_INCHES = (4.0, 3.2)  # one panel's width and height, a column of a two-column page
LEGEND_INCHES = 1.3  # right of a scatter plot


def _draw_bars(axes: Axes, panel: Bars, figure: FigureData) -> None:
    """Each group's share per level, side by side in 80% of a level's width."""
    width = 0.8 / len(panel.shares)
    for offset, (group, shares) in enumerate(panel.shares.items()):
        at = [level + (offset - (len(panel.shares) - 1) / 2) * width for level in panel.levels]
        axes.bar(at, shares, width=width, color=figure.colours[group],
                 label=plot_label(group))
    axes.set_xticks(list(panel.levels), [f"{level:g}" for level in panel.levels])
    axes.set_title(plot_label(panel.title))


def _draw_points(axes: Axes, points: Points, figure: FigureData) -> None:
    for group, (x, y) in points.groups.items():
        axes.scatter(x, y, s=9, alpha=POINT_OPACITY, linewidths=0, color=figure.colours[group],
                     label=plot_label(group))


def plot(figure: FigureData, plt: ModuleType) -> Figure:
    """`figure` as a matplotlib Figure (its axes in the order of the data's panels)."""
    panels = len(figure.bars) or 1
    width = PANEL_INCHES[0] * panels + (LEGEND_INCHES if figure.points is not None else 0)
    drawn, axes_list = plt.subplots(1, panels, figsize=(width, PANEL_INCHES[1]),
                                    squeeze=False)
    for axes, panel in zip(axes_list[0], figure.bars, strict=False):
        _draw_bars(axes, panel, figure)
    if figure.points is not None:
        _draw_points(axes_list[0][0], figure.points, figure)
    for axes in axes_list[0]:
        axes.set_xlabel(plot_label(figure.x_label))
        axes.set_ylabel(plot_label(figure.y_label))
        axes.spines[["top", "right"]].set_visible(False)
    if figure.points is not None:  # beside the plot area, where it hides no point
        axes_list[0][0].legend(loc="upper left", bbox_to_anchor=(1.02, 1), frameon=False,
                               markerscale=2)
    else:
        axes_list[0][0].legend(loc="upper left", frameon=False)
    drawn.tight_layout()
    return drawn


def write_print_figures(figures: Sequence[FigureData], folder: Path) -> list[Path]:
    """Each figure as `<stem>.pdf` (vector) and `<stem>.png` (300 dpi) in `folder`."""
    written = []
    with pyplot("print figures", **PRINT_SETTINGS) as plt:
        for figure in figures:
            drawn = plot(figure, plt)
            try:
                for suffix in (".pdf", ".png"):  # the dpi sets the PNG's pixels only
                    written.append(folder / f"{figure.stem}{suffix}")
                    drawn.savefig(written[-1], dpi=PRINT_DPI)
            finally:
                plt.close(drawn)
    return written
