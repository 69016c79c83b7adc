"""The dashboards of the graphs' top features: what each feature the graphs lean on fires on and writes.

The features read are the ``per_graph`` most influential of each graph (the ones the report lists and ablates),
over the first passages of the study's corpus, in one pass of :func:`interp.sae.dashboards.write_dashboards`
that reads only their layers. The pass writes into the transcoders' cache folder (``--work``), under a scan
named by the features and passages, so a second run with the same ones reads them back; once the report is
written they are copied beside it, ``OUT/dashboards/features/SCAN/`` (circuit-tracer's feature files,
``index.json`` and the dashboard page, ``index.html``). Each feature's summary goes into the report: how often
it fires, its largest activation, its top example with the token marked, the tokens its decoder promotes.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

FOLDER = "dashboards"


def top_features(tables: Mapping[str, pd.DataFrame], per_graph: int) -> list[tuple[int, int]]:
    """The ``per_graph`` most influential features of each graph's table (ranked by influence), each once, in
    order of first appearance."""
    seen: dict[tuple[int, int], None] = {}
    for table in tables.values():
        for row in table.head(per_graph).itertuples():
            seen.setdefault((int(row.layer), int(row.feature)), None)
    return list(seen)


def write(
    model: Any, tc: Any, texts: list[str], features: list[tuple[int, int]], work: Path, progress: bool
) -> tuple[Path, dict[tuple[int, int], dict[str, Any]]]:
    """Dashboards of ``features`` over ``texts`` in ``work/dashboards`` (or those a run before wrote there);
    their folder and each feature's record."""
    from interp.feature_id import FeatureId
    from interp.sae.dashboards import Settings, write_dashboards

    key = hashlib.sha256(json.dumps([sorted(features), texts]).encode()).hexdigest()[:12]
    settings = Settings(top=8, quantiles=5, per_quantile=3, sample=40, before=12, after=3)
    done = write_dashboards(
        model, tc, work / FOLDER, texts, scan=f"top-{key}", settings=settings, features=features,
        progress=progress,
    )  # fmt: skip
    records = {
        (layer, feature): json.loads((done.folder / f"{FeatureId(layer, feature).index}.json").read_text())
        for layer, feature in features
    }
    return done.folder, records


def publish(folder: Path, out: Path) -> Path:
    """Copy the dashboards ``folder`` (``.../features/SCAN``) to ``out/dashboards/features/SCAN``, replacing the
    dashboards an earlier run put there; the dashboard page's path."""
    target = out / FOLDER
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(folder, target / "features" / folder.name)
    return target / "features" / folder.name / "index.html"


def summary_rows(
    records: Mapping[tuple[int, int], dict[str, Any]], promoted: int = 5
) -> list[dict[str, Any]]:
    """One row per feature: its ``featureIndex``, density, largest activation, top example (token marked
    ``[[...]]``) and the first ``promoted`` tokens its decoder promotes."""
    rows = []
    for (layer, feature), record in records.items():
        groups = record["examples_quantiles"]
        top = groups[0]["examples"][0] if groups else None
        example = (
            "".join(f"[[{t}]]" if i == top["train_token_ind"] else t for i, t in enumerate(top["tokens"]))
            if top
            else ""
        )
        rows.append(
            {
                "layer": layer,
                "feature": feature,
                "featureIndex": record["index"],
                "density": record["activation_frequency"],
                "act_max": record["act_max"],
                "top example": example,
                "promotes": " ".join(record["top_logits"][:promoted]),
            }
        )
    return rows
