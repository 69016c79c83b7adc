"""Reports: the folder every study writes.

A report is a folder written in one go by :class:`Report`:

- ``index.html``: one self-contained page (inline CSS and JS, figures as data URIs, no network), every string
  from a tokenizer, a data file or a user escaped;
- ``figures/NAME.png`` and ``tables/NAME.csv``: each figure and the full table behind each HTML table;
- ``results.json``: headline numbers and results, rounded and key-sorted so that a fixed seed gives the same
  bytes;
- ``manifest.json``: model and data hashes, config, seed, versions, command, device, dtype and times.

Example:
    >>> from interp.report import Report, figures
    >>> report = Report("reports/demo", "Demo", seed=0)
    >>> report.add_section("Result", "Head 1.3 attends to the previous token.")
    >>> fig = figures.heatmap_layer_head([[0.1, 0.9]], title="score", cbar_label="score")
    >>> report.add_figure("scores", fig)
    >>> report.add_headline("best score", 0.9)
    >>> report.write()  # doctest: +SKIP
"""

from interp.report.attention_view import AttentionView, attention_view
from interp.report.manifest import sha256_file, sha256_path
from interp.report.schema import ReportSchemaError, validate_manifest, validate_results
from interp.report.serialize import dumps_deterministic, json_for_script, table_records, to_jsonable
from interp.report.writer import REPORT_ENTRIES, Report, check_report_folder

__all__ = [
    "AttentionView",
    "REPORT_ENTRIES",
    "Report",
    "ReportSchemaError",
    "attention_view",
    "check_report_folder",
    "dumps_deterministic",
    "json_for_script",
    "sha256_file",
    "sha256_path",
    "table_records",
    "to_jsonable",
    "validate_manifest",
    "validate_results",
]
