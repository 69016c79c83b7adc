"""The headless Chromium of the report tests, for the tests that open each study's report."""

from tests.report.conftest import _chromium, browser  # noqa: F401 - fixtures, found by name
