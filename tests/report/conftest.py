"""Fixtures for report tests: a headless Chromium (see ``browser.py``) and a small report."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.report.browser import Browser, missing_reason


@pytest.fixture(scope="session")
def _chromium() -> Iterator[Browser]:
    reason = missing_reason()
    if reason is not None:
        pytest.skip(f"browser tests need Chromium: {reason}")
    chromium = Browser()
    try:
        yield chromium
    finally:
        chromium.close()


@pytest.fixture
def browser(_chromium: Browser) -> Browser:
    """A headless Chromium with empty logs; open pages with ``browser.open_file(path)``."""
    _chromium.driver.get("about:blank")
    _chromium.reset_logs()
    return _chromium


PAYLOAD = '<script>alert(1)</script> </script> "quotes\' <img src=x onerror="window.__pwned=1"> &amp;'
"""A string that would run script or break out of an element if any part of a report failed to escape it."""


def build_report(out_dir, *, seed: int = 0, **kwargs):
    """A small report with every kind of block, with ``PAYLOAD`` in each place a user string can go."""
    import numpy as np
    import pandas as pd

    from interp.report import Report, figures

    rng = np.random.default_rng(seed)
    report = Report(
        out_dir,
        f"Test report {PAYLOAD}",
        subtitle=f"subtitle {PAYLOAD}",
        command=["interp", "study", "demo", PAYLOAD],
        seed=seed,
        config={"n_items": 8, "label": PAYLOAD},
        **kwargs,
    )
    report.add_section(f"Section {PAYLOAD}", f"Prose with `code`, **strong** and {PAYLOAD}.\n\n- a\n- b")
    scores = rng.random((3, 4))
    report.add_figure(
        "scores", figures.heatmap_layer_head(scores, title="score", cbar_label="s"), caption=PAYLOAD
    )
    report.add_section("Tables")
    frame = pd.DataFrame({"item": np.arange(150), "value": rng.normal(size=150), "text": [PAYLOAD] * 150})
    report.add_table("items", frame, caption=f"caption {PAYLOAD}", max_rows=25)
    report.add_headline("accuracy", float(scores.mean()), ci=(0.1, 0.9), note=f"note {PAYLOAD}")
    report.add_headline(PAYLOAD, 3, unit=PAYLOAD)
    report.add_results({"scores": scores, "label": PAYLOAD, "missing": float("nan")})
    return report


@pytest.fixture
def make_report():
    """:func:`build_report`, as a fixture."""
    return build_report
