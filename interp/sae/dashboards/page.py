"""The standalone dashboard page of one dictionary, ``OUT/features/SCAN/index.html``, and what it shares with the
graph viewer: the dashboard's script and style, the compact records a page embeds, and the page's policy.

A page opened from a file may not read other files (browsers give ``file:`` pages no access to their folder),
so what must work offline is embedded: the list of every feature (layer, index, density, largest activation),
and compact dashboards (the first :data:`COMPACT_TOP` top examples and :data:`COMPACT_GROUP` per quantile group)
of the densest features, up to :data:`EMBED_BYTES`. Served over http (``python -m http.server`` in the
folder, or circuit-tracer's server), the page reads each chosen feature's full file instead; the policy allows
reading from the page's own origin (``connect-src 'self'``) and nothing else.
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any

from interp.feature_id import FeatureId
from interp.report.assets import CONTENT_SECURITY_POLICY, fill, read_asset
from interp.report.serialize import json_for_script
from interp.report.shell import render_shell
from interp.sae.dashboards.reader import Scan
from interp.sae.dashboards.schema import FeatureFile

EMBED_BYTES = 4_000_000
COMPACT_TOP = 5
COMPACT_GROUP = 2
POLICY = CONTENT_SECURITY_POLICY.replace("connect-src 'none'", "connect-src 'self'")
COMPACT_NOTE = (
    f"Embedded summary: up to {COMPACT_TOP} top examples and {COMPACT_GROUP} per quantile group. Serve this "
    "folder (python -m http.server) to read every example from the feature's file."
)


def asset(name: str) -> str:
    """The text of dashboard asset ``name`` (``dashboard.js``, ``dashboard.css``, ``page.*``)."""
    return read_asset(name, "interp.sae.dashboards.assets")


def compact(file: FeatureFile, top: int = COMPACT_TOP, per_group: int = COMPACT_GROUP) -> dict[str, Any]:
    """``file`` as a page embeds it: the first ``top`` examples of the top group and ``per_group`` of each other,
    no percentiles."""
    return file.compact(top, per_group).to_dict()


def embedded(folder: Path, order: list[int], budget: int = EMBED_BYTES) -> dict[str, dict[str, Any]]:
    """Compact files of the features ``order`` (featureIndex, in order) read from ``folder``, within ``budget``
    bytes of JSON."""
    scan = Scan(folder)
    out: dict[str, dict[str, Any]] = {}
    used = 0
    for index in order:
        fid = FeatureId.from_index(index)
        if not scan.path(fid).is_file():
            continue
        record = compact(scan.read(fid))
        size = len(json.dumps(record, ensure_ascii=False))
        if used + size > budget:
            break
        out[str(index)] = record
        used += size
    return out


def render_page(folder: str | Path, index: dict[str, Any], *, budget: int = EMBED_BYTES) -> str:
    """The page for the dashboards in ``folder`` whose ``index.json`` content is ``index``."""
    rows = sorted(index["features"], key=lambda r: (-r["density"], r["layer"], r["feature"]))
    columns = {
        "layer": [r["layer"] for r in rows],
        "feature": [r["feature"] for r in rows],
        "density": [r["density"] for r in rows],
        "act_max": [r["act_max"] for r in rows],
    }
    data = {
        "scan": index["scan"],
        "dictionary": index.get("dictionary", "a dictionary"),
        "n_tokens": index["n_tokens"],
        "features": columns,
        "records": embedded(Path(folder), [r["featureIndex"] for r in rows], budget),
        "compact_note": COMPACT_NOTE,
    }
    title = f"Feature dashboards: {index['scan']}"
    return render_shell(
        title=title,
        body=fill(asset("page.html"), {"title": escape(title)}),
        css=[asset("dashboard.css"), asset("page.css")],
        data={"dashboard-data": json_for_script(data, digits=4)},
        scripts=[read_asset("svg.js"), read_asset("feature_id.js"), asset("dashboard.js"), asset("page.js")],
        policy=POLICY,
    )
