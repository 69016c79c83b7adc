"""Tick labels that run together: found on the drawn figure, and thinned until none does.

A figure's tick labels are placed by matplotlib without regard to their size: thirty layer numbers on a
6-inch axis, or token labels on a long sentence, print on top of each other. :func:`overlapping_tick_labels`
draws the figure and compares the labels' bounding boxes on the canvas, so it sees what a reader sees;
:func:`thin_tick_labels` keeps every second (third, ...) label on an axis until no two overlap. The report
writer thins every figure it is given, and the tests check that what is left does not overlap.
"""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

GAP = 0.6
"""The least space between two neighbouring labels, in ems of their font: closer than this, they read as one."""


def overlapping_tick_labels(fig: Figure) -> list[str]:
    """Each pair of neighbouring tick labels closer than :data:`GAP` on the drawn figure (``'title: x 10 / 11'``)."""
    renderer = _renderer(fig)
    found = []
    for ax in fig.axes:
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            for first, second in _overlaps(axis, renderer):
                found.append(f"{_title(ax)}: {name} {first!r} / {second!r}")
    return found


def thin_tick_labels(fig: Figure) -> None:
    """On every axis whose tick labels overlap, keep every n-th tick (the smallest n for which none do)."""
    renderer = _renderer(fig)
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if not _overlaps(axis, renderer):
                continue
            ticks = _visible(axis)
            locs = [t.get_loc() for t in ticks]
            labels = [t.label1.get_text() or t.label2.get_text() for t in ticks]
            for step in range(2, len(locs) + 1):
                axis.set_ticks(locs[::step], labels[::step])
                fig.canvas.draw()
                if not _overlaps(axis, renderer):
                    break


def _renderer(fig: Figure):
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)  # a plain Figure has no canvas that can draw until it is given one
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def _visible(axis: Axis) -> list:
    low, high = sorted(axis.get_view_interval())
    return [
        t
        for t in axis.get_major_ticks()
        if low - 1e-9 <= t.get_loc() <= high + 1e-9 and (t.label1.get_visible() or t.label2.get_visible())
    ]


def _overlaps(axis: Axis, renderer) -> list[tuple[str, str]]:
    """Neighbouring labels of ``axis`` whose boxes on the canvas, widened by :data:`GAP` ems, intersect."""
    labels = []
    for tick in _visible(axis):
        for label in (tick.label1, tick.label2):
            if label.get_visible() and label.get_text().strip():
                box = label.get_window_extent(renderer)
                pad = GAP * label.get_fontsize() * renderer.points_to_pixels(1.0) / 2
                labels.append((tick.get_loc(), label.get_text(), box.padded(pad)))
    labels.sort(key=lambda item: item[0])
    return [
        (a[1], b[1])
        for a, b in zip(labels, labels[1:], strict=False)
        if a[2].overlaps(b[2]) and a[2].width > 0 and b[2].width > 0
    ]


def _title(ax: Axes) -> str:
    return ax.get_title() or ax.get_ylabel() or ax.get_xlabel() or "axes"
