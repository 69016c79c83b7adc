"""The workbench pages' JSON routes on a live server (:mod:`tests.serve.workbench`): each answers what the library
calls it wraps give, written out here where the route adds something of its own (the ranking over a source
set's sources, the labels' ties to the served dictionaries, the next token before and after); the live graph
pages, tracing with its progress, and the secret asked of a browser. One server serves the module."""

from __future__ import annotations

import html
import json
import socket
import time

import pytest
import torch

from interp.analysis.feature_activations import feature_activations
from interp.circuits.features import FeatureEdit, attribute, generate_with_features
from interp.circuits.features.neuronpedia import graph_json
from interp.circuits.features.viewer import viewer_data
from interp.report.embedded import embedded_json
from interp.sae.explanations.embedding import SentenceEmbedder
from interp.serve import serving
from interp.serve.pages import router
from tests.circuits.transcoders import tiny_transcoders
from tests.serve.helpers import MODEL_ID, post, raw
from tests.serve.workbench import LABELS, PROMPT, build
from tests.test_tokens import needs_smollm

pytestmark = [needs_smollm, pytest.mark.slow]


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    import interp

    model = interp.load("smollm2-135m")
    root = tmp_path_factory.mktemp("workbench")
    served, graph = build(model, root)
    with serving(served, routers=[router]) as url:
        yield served, graph, root, url


def _events(text: str) -> list[dict]:
    return [json.loads(line[6:]) for line in text.split("\n") if line.startswith("data: ")]


def test_the_home_page_lists_the_folder_with_its_ties(bench):
    served, _, _, url = bench
    status, page = raw(url, "GET", "/", headers={"Accept": "text/html"})
    assert status == 200
    listing = embedded_json(page, "page-data")["folders"][0]
    assert [(g["slug"], g["folder"], g["page"]) for g in listing["graphs"]] == [("cat", "graph", True)]
    assert [(s["scan"], s["set"]) for s in listing["scans"]] == [("res3", "res")]  # made by the served SAE
    info = embedded_json(page, "workbench")
    assert info["transcoders"] == "tc" and [s["name"] for s in info["sets"]] == ["res", "att", "tc"]
    policy = html.unescape(page.split('http-equiv="Content-Security-Policy" content="')[1].split('"')[0])
    assert (
        "default-src 'none'" in policy and "connect-src 'self'" in policy
    )  # nothing from outside the server


def test_each_tokens_top_features_over_a_source_set_with_labels(bench):
    served, _, _, url = bench
    status, found = post(url, "/api/prompt", {"prompt": PROMPT, "source_set": "res", "top_k": 4})
    assert status == 200
    ids = served.model.to_tokens(PROMPT, prepend_bos=True).ids[0]
    assert found["tokens"] == served.model.to_str_tokens(ids)
    expected = []
    sources = served.sources.of_set("res")
    acts = {s.name: feature_activations(served.model, s.dictionary, ids, [s.layer])[s.layer] for s in sources}
    for p in range(len(ids)):  # every feature of every source, ranked by hand
        every = [
            (float(a[p, f]), name, f) for name, a in acts.items() for f in range(a.shape[1]) if a[p, f] > 0
        ]
        every.sort(key=lambda x: -x[0])
        expected.append([(name, f) for _, name, f in every[:4]])
    assert [[(e["source"], e["index"]) for e in row] for row in found["positions"]] == expected
    for p, row in enumerate(found["positions"]):
        for e in row:
            assert e["value"] == float(acts[e["source"]][p, e["index"]])
            assert e["label"] == (LABELS.get(e["index"]) if e["source"] == "3-res" else None)
    status, every = post(url, "/api/prompt", {"prompt": PROMPT, "source_set": "res", "top_k": 100})
    labelled = {(e["index"], e["label"]) for row in every["positions"] for e in row if e["label"]}
    assert labelled and labelled <= set(LABELS.items())


def test_labels_tie_to_the_served_dictionary_only(bench):
    served, _, root, url = bench
    # a clerp in the graph of the served transcoders labels a tc feature; one of another scan's features does not
    doc = json.loads((root / "work" / "graph" / "cat.json").read_text())
    node = next(n for n in doc["nodes"] if n["feature_type"] == "cross layer transcoder")
    node["clerp"] = "a clerp of the graph"
    (root / "work" / "graph" / "cat.json").write_text(json.dumps(doc))
    layer, feature = int(node["layer"]), int(node["uid"].split(".F")[1].split("@")[0])
    other = root / "work" / "other" / "features" / "res3"
    other.mkdir(parents=True)
    (other / "run.json").write_text(
        json.dumps({"model": {"fingerprint": "x"}, "dictionary": {"fingerprint": "y"}})
    )
    (other / "index.json").write_text(json.dumps({"features": []}))
    (root / "work" / "other" / "explanations.jsonl").write_text(
        json.dumps(
            {"layer": 3, "index": 11, "featureIndex": 89, "scan": "res3", "explanation": "another's cats"}
        )
    )
    status, found = raw(url, "GET", "/api/search?q=cats")
    assert status == 200
    by_text = {r["text"]: r for r in found["results"]}
    assert by_text["cats and dogs"]["source"] == "3-res" and by_text["cats and dogs"]["kind"] == "explanation"
    assert (
        by_text["another's cats"]["source"] is None
        and by_text["another's cats"]["file"] == "other/explanations.jsonl"
    )
    status, clerp = raw(url, "GET", "/api/search?q=clerp+of+the")
    assert [(r["source"], r["index"], r["kind"]) for r in clerp["results"]] == [
        (f"{layer}-tc", feature, "clerp")
    ]
    status, tc = raw(url, "GET", f"/api/feature?source={layer}-tc&index={feature}")
    assert tc["label"]["text"] == "a clerp of the graph" and tc["dashboard"] is None


def test_search_by_words_and_by_meaning(bench):
    served, _, _, url = bench
    status, found = raw(url, "GET", "/api/search?q=Dates+YEARS")
    assert status == 200 and [r["text"] for r in found["results"]] == [LABELS[7]]
    assert found["results"][0]["score"] == 1.0  # the words apart, not the phrase
    assert raw(url, "GET", "/api/search?q=the+past+tense")[1]["results"][0]["score"] == 2.0
    assert raw(url, "GET", "/api/search?q=penguins")[1]["results"] == []
    status, meaning = raw(url, "GET", "/api/search?q=pets+and+animals&mode=meaning")
    assert status == 200
    import interp

    encoder = SentenceEmbedder(interp.load("minilm-l6"))
    texts = [r["text"] for r in meaning["results"]]
    want = encoder.encode(texts) @ encoder.encode(["pets and animals"])[0]
    assert [r["score"] for r in meaning["results"]] == pytest.approx(want.tolist(), abs=1e-5)
    assert texts[0] == "cats and dogs" and want.tolist() == sorted(want.tolist(), reverse=True)
    assert raw(url, "GET", "/api/search?q=+")[0] == 400
    assert raw(url, "GET", "/api/search?q=x&mode=sound")[0] == 422


def test_a_features_page_data_from_its_scan_or_computed_live(bench):
    served, _, root, url = bench
    status, scanned = raw(url, "GET", "/api/feature?source=3-res&index=5")
    assert status == 200 and scanned["label"]["text"] == LABELS[5]
    assert scanned["dashboard"] == {"folder": "work", "path": "features/res3", "scan": "res3"}
    assert (root / "work" / "features" / "res3" / f"{scanned['featureIndex']}.json").is_file()
    status, live = raw(url, "GET", "/api/feature?source=5-res&index=3")
    assert live["dashboard"] is None and live["label"] is None
    sae = served.sources.get("5-res").dictionary
    row = sae.decoder(5, torch.tensor([3]))[0, 0].float()
    cos = torch.nn.functional.cosine_similarity(sae.decoder(5)[:, 0].float(), row[None], dim=-1)
    order = [i for i in cos.argsort(descending=True).tolist() if i != 3][:10]
    assert [n["index"] for n in live["live"]["neighbours"]] == order
    w_u = served.model.unembed.weight.float()
    gain = served.model.ln_final.gain.float()
    logits = (row * gain) @ w_u  # rmsnorm as a linear map at unit scale
    assert live["live"]["promotes"] == served.model.to_str_tokens(logits.topk(10).indices.tolist())
    status, att = raw(url, "GET", "/api/feature?source=2-att&index=0")
    assert att["live"]["promotes"] is None and "blocks.2.attn.hook_z" in att["live"]["why"]
    assert raw(url, "GET", "/api/feature?source=3-res&index=64")[0] == 400
    assert raw(url, "GET", "/api/feature?source=3-ress&index=1")[0] == 404


def test_the_steering_page_gives_the_completion_endpoints_texts_and_the_next_token(bench):
    served, _, _, url = bench
    model = served.model
    completion = {
        "prompt": PROMPT, "model": MODEL_ID, "steer_method": "SIMPLE_ADDITIVE", "normalize_steering": False,
        "types": ["STEERED", "DEFAULT"],
        "features": [{"model": MODEL_ID, "source": "3-res", "index": 5, "strength": 30.0}],
        "n_completion_tokens": 5, "temperature": 0, "strength_multiplier": 1, "freq_penalty": 0, "seed": 0,
    }  # fmt: skip
    status, found = post(url, "/api/steer", {"completion": completion, "top_k": 5})
    assert status == 200
    assert found["outputs"] == post(url, "/v1/steer/completion", completion)[1]["outputs"]
    ids = model.to_tokens(PROMPT, prepend_bos=True).ids[0]
    row = served.sources.get("3-res").dictionary.decoder(3, torch.tensor([5]))[0, 0]
    with torch.no_grad():
        before = model(ids[None])[0, -1].float()
        after = model.run_with_hooks(
            ids[None], fwd_hooks=[("blocks.3.hook_resid_post", lambda x, hook: x + 30.0 * row)]
        )[0, -1].float()
    nxt = found["next_token"]
    assert [t["id"] for t in nxt["after"]] == after.softmax(-1).topk(5).indices.tolist()
    assert [t["prob"] for t in nxt["after"]] == pytest.approx(
        after.softmax(-1).topk(5).values.tolist(), rel=1e-4
    )
    assert [t["id"] for t in nxt["before"]] == before.softmax(-1).topk(5).indices.tolist()
    assert [t["id"] for t in nxt["raised"]] == (after - before).topk(5).indices.tolist()
    assert [t["change"] for t in nxt["lowered"]] == pytest.approx(
        (after - before).topk(5, largest=False).values.tolist(), abs=1e-3
    )
    assert post(url, "/api/steer", {"completion": {**completion, "stream": True}})[0] == 422


@pytest.mark.parametrize("constrained", [False, True])
def test_interventions_on_graph_nodes_equal_graph_intervene(bench, constrained):
    served, graph, _, url = bench
    model, tc = served.model, served.transcoders
    nodes = [str(n) for n in graph.nodes if n.kind == "feature"][:3]
    body = {
        "tokens": graph.input_tokens.tolist(),
        "nodes": nodes,
        "scale": 0.0,
        "constrained": constrained,
        "top_k": 5,
    }
    status, found = post(url, "/api/graph/intervene", body)
    assert status == 200 and found["mode"] == ("constrained" if constrained else "free")
    from interp.analysis.node import Node

    edits = [FeatureEdit(n.layer, n.feature, n.position, scale=0.0) for n in map(Node.parse, nodes)]
    after = graph.intervene(model, tc, edits, constrained=constrained).logits[-1].float()
    before = graph.intervene(model, tc, [], constrained=constrained).logits[-1].float()
    nxt = found["next_token"]
    for shown, logits in ((nxt["after"], after), (nxt["before"], before)):
        top = logits.softmax(-1).topk(5).indices.tolist()
        assert [t["id"] for t in shown] == top
        assert [t["logit"] for t in shown] == pytest.approx(
            [float(logits[i]) for i in top], rel=1e-5, abs=1e-5
        )
    assert nxt["after"] != nxt["before"]  # the ablation moved the next token
    if not constrained:
        return
    # with generation: the model's own text, and generate_with_features with the prompt's attention held
    status, gen = post(url, "/api/graph/intervene", {**body, "n_tokens": 4, "hold_attention": True})
    assert status == 200
    ids = graph.input_tokens
    assert gen["generated"]["default"] == model.generate(ids, 4).text[0]
    assert (
        gen["generated"]["edited"]
        == generate_with_features(model, tc, ids, edits, 4, hold_attention=True).text[0]
    )


def test_bad_interventions_are_one_line_each(bench):
    served, graph, _, url = bench
    tokens = graph.input_tokens.tolist()
    feature = next(str(n) for n in graph.nodes if n.kind == "feature")
    cases = {
        "L3.error@2": "is a error node",
        "L99.F1@1": "not a feature of the server's transcoders",
        "L3.F1@40": "past the prompt",
        "nonsense": "node 'nonsense'",
    }
    for node, said in cases.items():
        status, found = post(url, "/api/graph/intervene", {"tokens": tokens, "nodes": [node], "scale": 0.0})
        assert status == 400 and said in found["error"], (node, found)
    both = post(
        url, "/api/graph/intervene", {"tokens": tokens, "nodes": [feature], "scale": 0.0, "value": 1.0}
    )
    assert both[0] == 400 and "exactly one" in both[1]["error"]
    vocab = post(url, "/api/graph/intervene", {"tokens": [10**6], "nodes": [feature], "scale": 0.0})
    assert vocab[0] == 400 and "vocabulary" in vocab[1]["error"]
    held = post(
        url,
        "/api/graph/intervene",
        {"tokens": tokens, "nodes": [feature], "scale": 0.0, "hold_attention": True},
    )
    assert held[0] == 400 and "n_tokens" in held[1]["error"]


def test_a_folders_graph_opens_live_only_on_its_own_transcoders(bench, tmp_path):
    served, graph, root, url = bench
    status, page = raw(url, "GET", "/live/graph/work/graph/", headers={"Accept": "text/html"})
    assert status == 200
    live = embedded_json(page, "graph-live")
    assert live["on"] and live["tokens"] == graph.input_tokens.tolist() and live["why"] == ""
    offline = (root / "work" / "graph" / "index.html").read_text()
    assert embedded_json(page, "graph-data") == embedded_json(
        offline, "graph-data"
    )  # the same graph, drawn again
    assert "graph-live" not in offline and "live.js" not in offline
    assert raw(url, "GET", "/live/graph/work/graph/cat.json")[1] == json.loads(
        (root / "work" / "graph" / "cat.json").read_text()
    )
    assert (
        raw(url, "GET", "/live/graph/work/graph")[0] == 307
    )  # to .../graph/, where the page's own files resolve
    # a graph of other transcoders of the same shape: its page opens, interventions are off, saying which node
    other = tiny_transcoders(served.model.cfg, d_transcoder=16, kind="skip", seed=11)
    g = attribute(served.model, other, PROMPT, max_logits=2, max_feature_nodes=30, progress=False)
    g.save(root / "work" / "foreign", model=served.model, transcoders=other, slug="foreign")
    status, page = raw(url, "GET", "/live/graph/work/foreign/")
    assert any(
        n["feature_type"] == "cross layer transcoder" for n in embedded_json(page, "graph-data")["nodes"]
    )
    live = embedded_json(page, "graph-live")
    assert status == 200 and not live["on"]
    assert "not traced with the server's transcoders" in live["why"] and "in the graph and" in live["why"]


def test_tracing_a_graph_streams_its_progress_then_opens_it(bench):
    served, _, _, url = bench
    body = {"prompt": "The dog ran to the", "model_id": MODEL_ID, "max_feature_nodes": 40, "batch_size": 16,
            "max_n_logits": 3, "slug_identifier": "traced-1"}  # fmt: skip
    status, text = post(url, "/api/trace", body)
    assert status == 200
    events = _events(text)
    states = [e["state"] for e in events]
    assert states[0] == "queued" and states[-2:] == ["drawing", "done"], states
    tracing = [(e["done"], e["total"]) for e in events if e["state"] == "tracing"]
    assert len(tracing) >= 3 and tracing[0][0] == 0 and tracing[-1][0] == tracing[-1][1] == 40
    assert [d for d, _ in tracing] == sorted(d for d, _ in tracing)
    where = events[-1]["url"]
    status, page = raw(url, "GET", where)
    assert status == 200
    model, tc = served.model, served.transcoders
    graph = attribute(
        model, tc, body["prompt"], max_logits=3, max_feature_nodes=40, batch_size=16, progress=False
    )
    graph.metadata.update(model=MODEL_ID, transcoders=served.transcoders_name)
    doc = graph_json(
        graph, slug="traced-1", prompt_tokens=model.to_str_tokens(graph.input_tokens), vocab=model.cfg.d_vocab
    )
    assert raw(url, "GET", where + "traced-1.json")[1] == json.loads(json.dumps(doc))
    drawn = embedded_json(page, "graph-data")
    want = viewer_data(graph, doc, model=model, transcoders=tc)
    assert [n["uid"] for n in drawn["nodes"]] == [n["uid"] for n in want["nodes"]]
    assert embedded_json(page, "graph-live")["on"]
    assert raw(url, "GET", "/live/traced/nothing/")[0] == 404
    bad = post(url, "/api/trace", {**body, "max_feature_nodes": 0})
    assert bad[0] == 400 and "max_feature_nodes=0" in bad[1]["error"]


def test_a_page_that_goes_away_stops_its_trace(bench):
    served, _, _, url = bench
    cancelled = served.engine.cancelled
    body = json.dumps({"prompt": "The dog ran to the park and the", "model_id": MODEL_ID, "batch_size": 8,
                       "max_feature_nodes": 400, "slug_identifier": "gone"}).encode()  # fmt: skip
    host, port = url.split("//")[1].split(":")
    s = socket.create_connection((host, int(port)))
    head = "\r\n".join(
        [
            "POST /api/trace HTTP/1.1",
            f"Host: {host}:{port}",
            "Content-Type: application/json",
            f"Content-Length: {len(body)}",
            "",
            "",
        ]
    )
    s.sendall(head.encode() + body)
    received = b""
    while b'"state": "tracing"' not in received:  # until attribution has begun
        received += s.recv(65536)
    s.close()
    end = time.monotonic() + 120
    while served.engine.cancelled == cancelled and time.monotonic() < end:
        time.sleep(0.05)
    assert served.engine.cancelled == cancelled + 1  # stopped at its next backward pass, not run to the end
    assert post(url, "/api/prompt", {"prompt": "Hi", "source_set": "res"})[0] == 200


def test_a_browser_gives_the_secret_once_in_a_form_then_a_cookie(bench):
    served, graph, _, _ = bench
    from dataclasses import replace

    guarded = replace(served, secret="s3cret")
    with serving(guarded, routers=[router]) as url:
        status, page = raw(url, "GET", "/prompt?prompt=x", headers={"Accept": "text/html"})
        assert status == 401 and 'name="secret"' in page and 'value="/prompt?prompt=x"' in page
        assert raw(url, "GET", "/api/folders")[0] == 401  # JSON for a program, not the form
        form = "application/x-www-form-urlencoded"
        wrong = raw(url, "POST", "/login", b"secret=nope&next=/prompt", {"Content-Type": form})
        assert wrong[0] == 401 and "not this server" in wrong[1]
        import http.client

        connection = http.client.HTTPConnection(url.split("//")[1].split(":")[0], int(url.rsplit(":", 1)[1]))
        connection.request(
            "POST", "/login", "secret=s3cret&next=//elsewhere.example/x", {"Content-Type": form}
        )
        answer = connection.getresponse()
        answer.read()
        cookie = answer.getheader("set-cookie")
        assert answer.status == 303 and answer.getheader("location") == "/"  # never to another site
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "s3cret" not in cookie
        jar = {"Cookie": cookie.split(";")[0]}
        assert raw(url, "GET", "/prompt", headers={**jar, "Accept": "text/html"})[0] == 200
        assert post(url, "/api/prompt", {"prompt": "Hi", "source_set": "res"}, headers=jar)[0] == 200
        forged = {"Cookie": "interp_serve=" + "0" * 64}
        assert raw(url, "GET", "/prompt", headers={**forged, "Accept": "text/html"})[0] == 401
        assert raw(url, "GET", "/files/work/graph/cat.json", headers=forged)[0] == 401
