"""The held-out analyses, and when the data are too small for them.

Heads are selected on half the schemas and tested on the other half; probes are trained on some schemas and
tested on the others. With too few schemas (``--limit 2``: one twin pair) there is nothing to hold out: the
analysis is skipped and the reason goes into the report instead of an error.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from studies.coreference import attention, probes
from studies.data.load import split_by_schema

MIN_PROBE_SCHEMAS = 4
"""A probe's training side needs two items: a split of four schemas or more trains on two of them; with fewer,
every schema must hold two items."""


def held_out_heads(items, right, margin, queries, config, pairs=()) -> tuple[pd.DataFrame, str | None]:
    """Heads selected on half the schemas and tested on the other half (with their switch sensitivity on the
    held-out twin ``pairs``); skipped (with the reason) when the data hold fewer than two schemas."""
    n_schemas = len({x.schema_id for x in items})
    if n_schemas < 2:
        return pd.DataFrame(), (
            f"the held-out head test selects heads on half the schemas and tests them on the other half; "
            f"it needs at least 2 schemas and these {len(items)} item(s) form {n_schemas}"
        )
    first, _ = split_by_schema(items, 0.5, config.seed)
    select = np.isin([x.id for x in items], [x.id for x in first])
    schemas = [x.schema_id or x.id for x in items]  # an item without a twin is its own schema
    table = attention.select_and_test(
        right, margin, select, queries, config.top_k, groups=schemas, seed=config.seed, pairs=pairs
    )
    return table, None


def probes_for(measured, records, kind: str, lm: bool, config) -> tuple[pd.DataFrame, str | None]:
    """The probe table, or an empty one and why none was trained."""
    roles = probe_roles(kind, lm, config.probes)
    if not roles:
        return pd.DataFrame(), "probes were not run (--probes none)"
    sizes = Counter(r["schema_id"] for r in records)
    n_labels = len(set(probes.labels_for(records)))
    too_few = len(sizes) < 2 or (len(sizes) < MIN_PROBE_SCHEMAS and min(sizes.values()) < 2)
    if too_few or n_labels < 2:
        return pd.DataFrame(), (
            "probes are trained on some schemas and tested on the others, which takes two schemas or more (each "
            f"of two items or more when there are fewer than {MIN_PROBE_SCHEMAS}) and two classes; these "
            f"{len(records)} item(s) form {len(sizes)} schema(s) with {n_labels} class(es)"
        )
    return probes.probe_table(measured, records, roles, config.seed, config.probe_steps), None


def probe_roles(kind: str, lm: bool, which: str) -> tuple[str, ...]:
    """Where the probes read the stream: the referent's own position and the prediction position
    (``which="all"``), only the latter (``"final"``), or nowhere (``"none"``)."""
    if kind == "resolution":
        roles = ("pronoun", "final") if lm else ("pronoun", "end")
    else:
        roles = ("antecedent", "final")
    return {"all": roles, "final": roles[-1:], "none": ()}[which]
