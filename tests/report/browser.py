"""A headless Chromium for tests of report pages.

Reports must open from the file system with no network, no console errors and no injected markup, and only a
real browser can show that. :class:`Browser` wraps a selenium Chromium session with the helpers these tests
need; the ``browser`` fixture in ``tests/report/conftest.py`` hands one to each test (one browser per
session).

Helpers:
    ``open_file(path)``: load a local file (discarding log entries from earlier pages) and wait for ``load``.
    ``console_errors()``: console messages of level SEVERE since the page was opened (JS errors, CSP refusals,
    failed loads, ``console.error``).
    ``network_requests()``: URLs the page requested other than ``file:``, ``data:``, ``about:``, ``blob:``.
    ``js(script, *args)``: run JavaScript in the page and return its value (``return ...;``).
    ``screenshot(name)``: save a full-page PNG to ``test-artifacts/NAME.png`` at the repository root.
    ``layout_problems()``: what a reader at a laptop's width would meet: the page scrolling sideways, an
    element running past the right edge outside a scrolling box, a figure with crowded tick labels.

The binaries are ``/usr/bin/chromium`` and ``/usr/bin/chromedriver`` unless ``INTERP_CHROMIUM`` and
``INTERP_CHROMEDRIVER`` name others; when either is missing the browser tests skip and say why.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO_ROOT / "test-artifacts"
LOCAL_SCHEMES = ("file:", "data:", "about:", "blob:")
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--disable-dev-shm-usage",
    "--window-size=1280,900",
)


LAPTOP_WIDTH = 1280
"""A laptop's window width in CSS pixels, at which every report must read without scrolling sideways."""
LAYOUT_PROBLEMS = """
const root = document.documentElement, width = root.clientWidth, found = [];
if (root.scrollWidth > width + 1) found.push(`the page is ${root.scrollWidth}px wide in a ${width}px window`);
const scrolls = (el) => { for (let p = el.parentElement; p; p = p.parentElement) {
  const o = getComputedStyle(p).overflowX; if (o === "auto" || o === "scroll" || o === "hidden") return true; }
  return false; };
for (const el of document.querySelectorAll("main *")) {
  const box = el.getBoundingClientRect();
  if (box.width > 0 && box.right > width + 1 && !scrolls(el))
    found.push(`<${el.tagName.toLowerCase()} id=${el.id || "-"}> ends at ${Math.round(box.right)}px`);
}
for (const fig of document.querySelectorAll("figure[data-crowded-ticks]"))
  found.push(`${fig.id}: crowded tick labels ${fig.dataset.crowdedTicks}`);
return found.slice(0, 20);
"""


def chromium_paths() -> tuple[str, str]:
    """The Chromium and chromedriver binaries to use (from the environment or the Debian paths)."""
    return (
        os.environ.get("INTERP_CHROMIUM", "/usr/bin/chromium"),
        os.environ.get("INTERP_CHROMEDRIVER", "/usr/bin/chromedriver"),
    )


def missing_reason() -> str | None:
    """Why a browser cannot start here, or ``None`` if it can."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e .[test])"
    for path, package in zip(chromium_paths(), ("chromium", "chromium-driver"), strict=True):
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            return f"{path} not found; install the Debian package {package}"
    return None


class Browser:
    """One headless Chromium session with console and network logging on."""

    def __init__(self) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        binary, driver = chromium_paths()
        self._profile = tempfile.mkdtemp(prefix="interp-chromium-")
        options = webdriver.ChromeOptions()
        options.binary_location = binary
        for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={self._profile}"):
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
        self.driver = webdriver.Chrome(service=Service(driver), options=options)
        self._console: list[dict[str, Any]] = []
        self._requests: list[str] = []
        self.driver.get("about:blank")
        self.reset_logs()

    def close(self) -> None:
        """Quit the browser and remove its profile folder."""
        try:
            self.driver.quit()
        finally:
            shutil.rmtree(self._profile, ignore_errors=True)

    def reset_logs(self) -> None:
        """Forget every console message and request seen so far."""
        self._drain()
        self._console.clear()
        self._requests.clear()

    def open_file(self, path: str | os.PathLike[str]) -> None:
        """Open a local file in a fresh log window and wait for its ``load`` event."""
        path = Path(path).resolve()
        if not path.is_file():
            raise FileNotFoundError(f"no file to open at {str(path)!r}")
        self.reset_logs()
        self.driver.get(path.as_uri())

    def js(self, script: str, *args: Any) -> Any:
        """Run ``script`` in the page (``return`` a value to get it back)."""
        return self.driver.execute_script(script, *args)

    def console_messages(self) -> list[dict[str, Any]]:
        """Every console entry since the page was opened: ``{"level", "message", "source"}``."""
        self._drain()
        return list(self._console)

    def console_errors(self) -> list[str]:
        """Messages of level SEVERE since the page was opened."""
        return [e["message"] for e in self.console_messages() if e["level"] == "SEVERE"]

    def requests(self) -> list[str]:
        """Every URL the page requested since it was opened, local or not."""
        self._drain()
        return list(self._requests)

    def network_requests(self) -> list[str]:
        """Requested URLs that would leave the machine (all but file, data, about and blob URLs)."""
        return [u for u in self.requests() if not u.startswith(LOCAL_SCHEMES)]

    def screenshot(self, name: str) -> Path:
        """Save a screenshot of the whole page to ``test-artifacts/NAME.png`` and return its path."""
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
        ARTIFACTS.mkdir(exist_ok=True)
        out = ARTIFACTS / f"{safe}.png"
        height = self.js("return Math.min(document.documentElement.scrollHeight, 12000);") or 900
        size = self.driver.get_window_size()
        self.driver.set_window_size(size["width"], max(int(height), 600))
        try:
            self.driver.save_screenshot(str(out))
        finally:
            self.driver.set_window_size(size["width"], size["height"])
        return out

    def layout_problems(self, width: int = LAPTOP_WIDTH) -> list[str]:
        """At ``width`` CSS pixels: horizontal overflow of the page, elements cut off at the right edge
        (outside a box that scrolls them), and figures the report marked as having crowded tick labels."""
        size = self.driver.get_window_size()
        self.driver.set_window_size(width, size["height"])
        try:
            return self.js(LAYOUT_PROBLEMS)
        finally:
            self.driver.set_window_size(size["width"], size["height"])

    def _drain(self) -> None:
        for entry in self.driver.get_log("browser"):
            self._console.append(
                {"level": entry["level"], "message": entry["message"], "source": entry.get("source")}
            )
        for entry in self.driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            if message.get("method") == "Network.requestWillBeSent":
                self._requests.append(message["params"]["request"]["url"])
