"""The screenshots of docs/workbench.md, taken from a real run of the workbench in headless Chromium.

On the packaged SmolLM2: skip transcoders at every layer trained in a minute on the agreement and Winograd
sentences of ``studies/data`` (as the attribution-graph tutorial trains them), read back from their folder as
``interp serve --transcoders`` reads them; their dashboards over the same sentences (``write_dashboards``);
explanations of the features the pictures show, written by the packaged SmolLM2 itself (``interp autointerp
--explainer smollm2-135m``: a small model's explanations, shown for what they are); a graph of a prompt traced
and saved beside them with its dashboards linked. Then the server (``serving`` with the pages' router) and
Chromium visit each page, act as a user does, and save a picture of what the page shows.

    python scripts/workbench_screenshots.py --out DIR

Needs chromium and chromium-driver (Debian's), selenium, and the packaged models.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

import torch

import interp
import studies
from interp.circuits import attribute
from interp.cli import main as interp_main
from interp.sae import save_transcoders, train_transcoders
from interp.sae.dashboards import Settings, write_dashboards
from interp.serve import Served, Sources, serving
from interp.serve.folders import Folders
from interp.serve.pages import router
from interp.serve.sources import read_dictionary

PROMPT = "My aunt is visiting next week, isn't"
NEW_PROMPT = "The keys to the cabinet are"
SIZE = (1280, 860)


def sentences() -> list[str]:
    data = Path(studies.__file__).parent / "data"
    rows = [
        json.loads(line) for name in ("agreement.jsonl", "winograd.jsonl") for line in (data / name).open()
    ]
    return sorted({row.get("prompt") or row["sentence"] for row in rows})


def trained_transcoders(model, texts: list[str]):
    """Skip transcoders of 128 features (8 active) at every layer, trained on the texts' MLP inputs and outputs."""
    n_layers = model.cfg.n_layers
    sites = ("ln2.hook_normalized", "hook_mlp_out")
    names = [f"blocks.{layer}.{site}" for site in sites for layer in range(n_layers)]
    rows = []
    for start in range(0, len(texts), 64):
        tokens = model.to_tokens(texts[start : start + 64], prepend_bos=True, padding_side="left")
        with torch.no_grad():
            _, cache = model.run_with_cache(*tokens, names_filter=names)
        keep = tokens.mask.bool() & ~tokens.special
        rows.append(
            [torch.stack([cache[f"blocks.{l}.{site}"][keep] for l in range(n_layers)], 1) for site in sites]
        )
    inputs, outputs = (torch.cat([r[i] for r in rows]) for i in range(2))  # [row, layer, d_model]
    return train_transcoders((inputs, outputs), kind="skip-transcoder", d_transcoder=128, k=8, tokens=20_000,
                             batch_size=256, progress=False)  # fmt: skip


def prepare(model, root: Path) -> tuple[Served, list[str]]:
    """The folders a user's commands would have written, and the server over them; the features explained."""
    texts = sentences()
    tc_path = save_transcoders(trained_transcoders(model, texts), root / "transcoders")
    tc = read_dictionary(tc_path, model)
    work = root / "work"
    write_dashboards(model, tc, work, texts, scan="tc", settings=Settings(sample=8))
    graph = attribute(model, tc, PROMPT, max_feature_nodes=200, progress=False)
    graph.metadata.update(model="smollm2-135m", transcoders=str(tc_path))
    graph.save(work / "aunt", model=model, transcoders=tc, slug="aunt", dashboards=work)
    influence = graph.influence()[: graph.n_features]
    top = [graph.nodes[i] for i in influence.argsort(descending=True)[:10].tolist()]
    ids = model.to_tokens(PROMPT, prepend_bos=True).ids[0]
    from interp.analysis.feature_activations import feature_activations

    acts = feature_activations(model, tc, ids)
    strongest = {
        (layer, int(a[p].argmax())) for layer, a in acts.items() for p in range(1, len(ids)) if layer % 6 == 0
    }
    chosen = sorted({(n.layer, n.feature) for n in top} | strongest)
    features = ",".join(f"{layer}:{feature}" for layer, feature in chosen)
    interp_main(["autointerp", str(work), "--explainer", "smollm2-135m", "--scorer", "embedding", "--features",
                 features, "--n-explain", "10", "--n-test", "4", "--quiet"])  # fmt: skip
    served = Served(model, "smollm2-135m", Sources([("tc", tc)]), transcoders=tc, transcoders_name=str(tc_path),
                    folders=Folders([work]))  # fmt: skip
    return served, [f"{layer}-tc:{feature}" for layer, feature in chosen]


class Pages:
    """A browser on the server, saving a picture of each page."""

    def __init__(self, url: str, out: Path) -> None:
        # The test suite's headless Chromium driver; run as a file, this script's folder is on the path, not the
        # repository root that holds tests/.
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from tests.report.browser import Browser

        self.browser, self.url, self.out = Browser(), url, out
        self.browser.driver.set_window_size(*SIZE)

    def visit(self, path: str) -> None:
        self.browser.reset_logs()
        self.browser.driver.get(self.url + path)

    def js(self, script: str, *args):
        return self.browser.js(script, *args)

    def wait(self, script: str, timeout: float = 600) -> None:
        end = time.monotonic() + timeout
        while not self.js(script):
            if time.monotonic() > end:
                raise RuntimeError(f"the page never satisfied {script}")
            time.sleep(0.1)

    def save(self, name: str) -> Path:
        errors = self.browser.console_errors()
        if errors:
            raise RuntimeError(f"{name}: console errors {errors}")
        path = self.out / f"workbench-{name}.png"
        self.browser.driver.save_screenshot(str(path))
        print(f"wrote {path}")
        return path

    def close(self) -> None:
        self.browser.close()


def shoot(pages: Pages, served: Served, explained: list[str]) -> None:
    pages.visit("/")
    pages.save("home")
    pages.visit(f"/prompt?prompt={quote(PROMPT)}&set=tc&k=3")
    pages.wait("return document.getElementById('features')")
    pages.save("prompt")
    labelled = pages.js("return [...document.querySelectorAll('a.feature')].filter((a) => a.querySelector('.label'))"
                        ".map((a) => [a.dataset.source, a.dataset.index]);")  # fmt: skip
    source, index = labelled[0] if labelled else explained[0].split(":")
    pages.visit(f"/feature?source={source}&index={index}&prompt={quote(PROMPT)}")
    pages.wait(
        "return document.getElementById('dashboard').dataset.state && document.querySelector('#acts span')"
    )
    pages.save("feature")
    pages.visit(f"/steer?source={source}&index={index}&prompt={quote(PROMPT)}&strength=12")
    pages.js("document.getElementById('n-tokens').value = '12'; document.getElementById('go').click();")
    pages.wait("return document.getElementById('output-steered')")
    pages.save("steer")
    label = pages.js(
        "return document.querySelector('.label') && document.querySelector('.label').textContent;"
    )
    word = (label or "the").split()[0]
    pages.visit(f"/search?q={quote(word)}&mode=meaning")
    pages.wait("return document.getElementById('result-table')")
    pages.save("search")
    pages.visit("/live/graph/work/aunt/")
    pages.wait("return window.graphLive")
    node = pages.js("const f = [...document.querySelectorAll('svg .node.feature')]"
                    ".sort((a, b) => b.getAttribute('r') - a.getAttribute('r'))[0]; return f.dataset.id;")  # fmt: skip
    pages.js(
        "document.querySelector(`svg .node[data-id='${arguments[0]}']`).dispatchEvent(new Event('click'));",
        node,
    )
    pages.js("const t = document.getElementById('live-target'); window.graphLive.refreshTargets();"
             "t.value = 'selected'; t.dispatchEvent(new Event('change'));"
             "document.getElementById('live-tokens').value = '6';"
             "document.getElementById('live-run').click();")  # fmt: skip
    pages.wait("return window.graphLive.last()")
    pages.js("document.getElementById('panel').scrollTop = 0;")
    pages.save("graph-live")
    pages.js("document.getElementById('trace-prompt').value = arguments[0];"
             "document.getElementById('trace-run').click();", NEW_PROMPT)  # fmt: skip
    pages.wait(
        "const b = document.getElementById('trace-progress'); return b && b.value > 0 && b.value < b.max;"
    )
    pages.js("document.getElementById('live-trace').scrollIntoView();")
    pages.save("trace")
    pages.wait("return location.pathname.startsWith('/live/traced/') && window.graphLive")
    pages.save("traced")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="docs/images", help="where the pictures go")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = interp.load("smollm2-135m")
    with tempfile.TemporaryDirectory() as tmp:
        served, explained = prepare(model, Path(tmp))
        with serving(served, routers=[router]) as url:
            pages = Pages(url, out)
            try:
                shoot(pages, served, explained)
            finally:
                pages.close()


if __name__ == "__main__":
    main()
