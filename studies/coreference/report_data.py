"""The report's data section: which file was read as which format, what was derived, what was noted, and
how many items each analysis used."""

from __future__ import annotations

import numpy as np

from interp.report import Report

DERIVED_NAMES = {
    "schema_id": "the schema",
    "twin_id": "the twin",
    "candidate_char_offsets": "the candidates' positions",
    "switch_word": "the switch",
    "distractor_char_offset": "the distractor's position",
}


def _derived(items) -> str:
    parts = []
    for name, what in DERIVED_NAMES.items():
        n = sum(name in x.derived and getattr(x, name, None) is not None for x in items)
        if n:
            parts.append(f"{what} for {n}")
    return (
        "Derived from the text: " + ", ".join(parts) + "." if parts else "Every field was given by the file."
    )


def data_section(report: Report, result, out: dict) -> None:
    """Add the section and put its numbers into ``out["data"]``."""
    data, pairing, label = result.data, result.pairing, result.name
    report.add_section(f"Data: {label}")
    n, schemas = len(data.items), len({x.schema_id for x in data.items})
    twins = (
        "twin links as the file gives them"
        if data.format.twins_given
        else "twins found by comparing neighbouring items (the format has no twin links)"
    )
    text = (
        f"Read {data.name!r} as {data.format.title}: {n} items in {schemas} schema(s), "
        f"{len(pairing.pairs)} twin pair(s) ({twins}). {_derived(data.items)}"
    )
    notes = data.notes.sentences()
    if notes:
        text += "\n\nLeft out where they cannot serve (one line per kind of problem):\n" + "\n".join(
            f"- {line}" for line in notes
        )
    report.add_text(text)
    coverage = result.analysis["coverage"]
    report.add_table(
        f"{label}_coverage", coverage, caption="Items each analysis used, and why it left the others out"
    )
    out["data"] = {
        "source": data.name,
        "format": data.format.key,
        "n_items": n,
        "schemas": schemas,
        "pairs": len(pairing.pairs),
        "comparable_pairs": len(pairing.comparable),
        "notes": data.notes.to_dict(),
        "coverage": {
            str(r.analysis): {
                "items": int(np.int64(r.items)),
                "left_out": int(np.int64(r.left_out)),
                "why": r.why,
            }
            for r in coverage.itertuples()
        },
    }
