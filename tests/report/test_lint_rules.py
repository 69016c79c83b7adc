"""eslint.config.mjs holds the page scripts to one dialect and one set of helpers: planted scripts, linted as if
they sat among the page assets, are refused for an ES5 form, a second definition of a shared helper, a DOM call
the helpers wrap or the feature pairing's formula, and pass when they take the helpers from dom.js.

Runs the eslint that package-lock.json pins (``npm ci`` installs it into node_modules/, as scripts/run_tests.sh
does)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = "interp/circuits/features/viewer/planted.js"
LINT = """
const { ESLint } = require("eslint");
(async () => {
  const eslint = new ESLint({ cwd: process.cwd() });
  const found = [];
  for (const [code, filePath] of JSON.parse(require("fs").readFileSync(0, "utf8"))) {
    const [result] = await eslint.lintText(code, { filePath });
    found.push(result.messages.map((m) => m.ruleId || "fatal: " + m.message));
  }
  process.stdout.write(JSON.stringify(found));
})();
"""


def _lint_all(cases: list[tuple[str, str]]) -> list[list[str]]:
    """The rules each ``(code, path)`` breaks, linted as the file ``path`` (nothing is written there), in one
    node process."""
    if not (ROOT / "node_modules" / "eslint").is_dir() or shutil.which("node") is None:
        pytest.skip("eslint is not installed: run npm ci (package-lock.json pins it)")
    scripts = [('(function () {\n  "use strict";\n' + code + "\n})();\n", path) for code, path in cases]
    done = subprocess.run(
        ["node", "-e", LINT], input=json.dumps(scripts), capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return [sorted(rules) for rules in json.loads(done.stdout)]


ALLOWED = (
    "  const { el, svg, clear, byId } = window.interpDom;\n"
    "  const featureId = window.interpFeatureId;\n"
    '  clear(byId("x")).append(el("p", { class: "note" }, "hi"), svg("circle", { r: 2 }));\n'
    '  for (const n of [1, 2]) byId(String(featureId.index(n, 3))).replaceChildren(el("b"));'
)
SECOND_EL = "  function el(tag) { return document.createElement(tag); }\n  window.interpDom = { el };"
REFUSED = {
    "  function el(tag) { return tag; }\n  el();": ["no-restricted-syntax"],
    '  const byId = (id) => window.document.querySelector("#" + id);\n  byId("a");': ["no-restricted-syntax"],
    '  window.x = document.createElement("div");': ["no-restricted-properties"],
    '  window.x = document.createElementNS("ns", "svg");': ["no-restricted-properties"],
    '  window.x = document.getElementById("a");': ["no-restricted-properties"],
    "  window.box.replaceChildren();": ["no-restricted-syntax"],
    "  const s = window.l + window.f;\n  window.x = s * (s + 1) / 2 + window.f;": ["no-restricted-syntax"],
    "  window.x = (window.l + window.f + 1) * (window.l + window.f) / 2;": ["no-restricted-syntax"],
    "  var x = 1;\n  window.x = x;": ["no-var"],
    "  let x = 1;\n  window.x = x;": ["prefer-const"],
    "  window.x = [1].map(function (v) { return v; });": ["prefer-arrow-callback"],
    "  window.x = Math.max.apply(Math, window.xs);": ["prefer-spread"],
    "  const a = 1;\n  window.x = { a: a };": ["object-shorthand"],
}


def test_helpers_from_dom_js_pass_and_a_second_helper_a_wrapped_call_or_an_es5_form_is_refused():
    cases = [(ALLOWED, PAGE), *((code, PAGE) for code in REFUSED)]
    # the shared files themselves may define the helpers; a page script may not
    paths = [
        "interp/report/assets/dom.js",
        "interp/report/assets/report.js",
        "interp/serve/pages/assets/home.js",
    ]
    cases += [(SECOND_EL, path) for path in paths]
    found = _lint_all(cases)
    assert found[0] == []
    assert dict(zip(REFUSED, found[1:-3], strict=True)) == REFUSED
    refused = ["no-restricted-properties", "no-restricted-syntax"]
    assert found[-3:] == [[], refused, refused]  # the workbench's scripts are page scripts too
