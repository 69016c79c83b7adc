"""The study's plan phase: every data set read, checked, cut to ``--limit`` and paired, before any model loads.

A bad file is refused here, with its file, line, id and rule, so a run never fails after the work. Each data
set gets the name its report tables and figures carry: a shipped name, else the file's stem, sanitised and
made unique (a path is never put into a table or file name).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from studies.data.load import SHIPPED, DataSet, read_data
from studies.data.twins import Pairing, pair_up


@dataclass
class Planned:
    """One data set, read and checked, with its report label and its twin pairs."""

    data: DataSet
    label: str
    pairing: Pairing


def report_labels(names: Sequence[str]) -> list[str]:
    """A name for each data set's tables and figures: a shipped name, else the file's stem with anything but
    letters, digits, ``_`` and ``-`` replaced, made unique with ``-2``, ``-3`` ...

    >>> report_labels(["winograd", "/data/my set/items.v2.jsonl", "other/items.v2.jsonl"])
    ['winograd', 'items_v2', 'items_v2-2']
    """
    labels: list[str] = []
    for name in names:
        base = name if name in SHIPPED else re.sub(r"[^A-Za-z0-9_-]+", "_", Path(name).stem)
        base = base.strip("_-")[:40] or "data"
        label, n = base, 1
        while label in labels:
            n += 1
            label = f"{base}-{n}"
        labels.append(label)
    return labels


def take(items: list, limit: int | None) -> list:
    """The first ``limit`` items in file order, with the rest of their schemas (so twins stay together)."""
    if limit is None:
        return items
    schemas = {x.schema_id for x in items[:limit]}
    return [x for x in items if x.schema_id in schemas]


def plan(data: Sequence[str], format: str | None = None, limit: int | None = None) -> list[Planned]:
    """Read and check every data set, take ``limit`` items of each and pair the twins: all before a model
    loads (``format``: see :func:`~studies.data.load.read_data`).

    Raises:
        FileNotFoundError, ValueError: a data set that cannot be used, naming file, line, id and rule.
    """
    sets = [read_data(name, format) for name in data]
    planned = []
    for data_set, label in zip(sets, report_labels(data), strict=True):
        data_set = data_set.subset(take(data_set.items, limit))
        planned.append(Planned(data_set, label, pair_up(data_set.items, data_set.notes)))
    return planned
