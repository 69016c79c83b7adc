"""Neuronpedia's graph-server API on ``interp serve``: ``/generate-graph`` gives the file ``interp attribute`` writes
for the same prompt and settings, and circuit-tracer's graph on the golden cases (``tests/circuits/golden``);
``/steer`` gives what generation with the same feature edits gives, as Neuronpedia's graph server shapes it."""

from __future__ import annotations

import json

import pytest
import torch

from interp.analysis.feature_activations import feature_activations
from interp.circuits.features import FeatureEdit, generate_with_features
from interp.circuits.features.inputs import prompt_ids
from interp.circuits.features.neuronpedia import graph_json
from interp.cli import main
from interp.sae import save_transcoders
from interp.serve import Served, Sources, serving
from interp.serve.sources import read_dictionary
from tests.circuits.test_golden import GOLDEN, golden_case, golden_graph
from tests.serve.helpers import post

CASES = ["llama-per-layer", "llama-skip", "llama-clt", "qwen3-clt"]


@pytest.fixture(scope="module", params=CASES)
def golden(request, tmp_path_factory):
    """A server over a golden case's model and transcoders (saved in circuit-tracer's format and read back)."""
    model, tc, ref, meta = golden_case(request.param)
    folder = save_transcoders(tc, tmp_path_factory.mktemp(request.param) / "tc")
    transcoders = read_dictionary(folder, model)
    served = Served(
        model,
        meta["family"],
        Sources([("tc", transcoders)]),
        transcoders=transcoders,
        transcoders_name=str(folder),
    )
    with serving(served) as url:
        yield request.param, served, ref, url, folder


def _graph_request(served, prompt, **settings):
    return {
        "prompt": prompt,
        "model_id": served.model_id,
        "max_n_logits": 5,
        "desired_logit_prob": 0.95,
        "batch_size": 32,
        "slug_identifier": "golden",
        "max_feature_nodes": 10_000,
        **settings,
    }


def _text(model, ref):
    """The golden prompt as text: its ids after the BOS, decoded (the prompt tokenizes back to the same ids)."""
    text = model.tokenizer.decode(ref["input_tokens"][1:].tolist())
    assert prompt_ids(model, text).tolist() == ref["input_tokens"].tolist()
    return text


def test_generate_graph_is_circuit_tracers_graph(golden):
    name, served, ref, url, _ = golden
    model = served.model
    status, doc = post(url, "/generate-graph", _graph_request(served, _text(model, ref)))
    assert status == 200, doc
    expected = graph_json(golden_graph(ref, model.cfg.n_layers), slug="golden", vocab=model.cfg.d_vocab)
    assert [n["node_id"] for n in doc["nodes"]] == [n["node_id"] for n in expected["nodes"]]
    assert [(x["source"], x["target"]) for x in doc["links"]] == [
        (x["source"], x["target"]) for x in expected["links"]
    ]
    scale = ref["adjacency"].abs().max()
    for ours, theirs_link in zip(doc["links"], expected["links"], strict=True):
        assert abs(ours["weight"] - theirs_link["weight"]) <= 1e-4 * scale
    for ours, theirs_node in zip(doc["nodes"], expected["nodes"], strict=True):
        if theirs_node["activation"] is not None:
            assert ours["activation"] == pytest.approx(theirs_node["activation"], rel=1e-4, abs=1e-5)
    assert doc["metadata"]["slug"] == "golden" and doc["qParams"] == expected["qParams"]


def test_generate_graph_is_the_file_interp_attribute_writes(golden, tmp_path):
    name, served, ref, url, folder = golden
    text = _text(served.model, ref)
    status, doc = post(
        url, "/generate-graph", _graph_request(served, text, node_threshold=0.7, edge_threshold=0.95)
    )
    assert status == 200, doc
    model_folder = GOLDEN / name.split("-")[0]
    argv = [
        "attribute",
        str(model_folder),
        "--transcoders",
        str(folder),
        "--prompt",
        text,
        "--out",
        str(tmp_path),
    ]
    argv += ["--max-logits", "5", "--batch-size", "32", "--node-threshold", "0.7", "--edge-threshold", "0.95"]
    assert main([*argv, "--slug", "golden", "--quiet"]) == 0
    written = json.loads((tmp_path / "golden.json").read_text())
    record = written.pop("interp")  # the save's own record, which ties the folder's files together
    assert set(record) == {"generation", "version"}
    assert doc == written  # the same computation on the same machine: equal to the last bit


def test_a_capped_graph_keeps_the_most_influential_features(golden):
    name, served, ref, url, _ = golden
    text = _text(served.model, ref)
    status, capped = post(
        url, "/generate-graph", _graph_request(served, text, max_feature_nodes=6, node_threshold=1.0)
    )
    assert status == 200
    features = [n for n in capped["nodes"] if n["feature_type"] == "cross layer transcoder"]
    assert 0 < len(features) <= 6


def _steer_request(served, prompt, features, **settings):
    return {
        "model_id": served.model_id,
        "prompt": prompt,
        "features": features,
        "n_tokens": 4,
        "top_k": 3,
        **settings,
    }


@pytest.mark.parametrize("freeze", [False, True])
def test_steer_is_generation_with_the_same_edits(golden, freeze):
    name, served, ref, url, _ = golden
    model, tc = served.model, served.transcoders
    text = _text(model, ref)
    ids = prompt_ids(model, text)
    acts = feature_activations(model, tc, ids, [0, 1])  # the clean activations the edits are set from
    active = (acts[0][2] > 0).nonzero().flatten()
    f = int(active[0]) if len(active) else 0
    features = [
        {"layer": 0, "index": f, "token_active_position": 2, "steer_position": 2, "delta": 3.0},
        {"layer": 1, "index": 4, "token_active_position": 3, "steer_generated_tokens": True, "ablate": True},
    ]
    status, r = post(url, "/steer", _steer_request(served, text, features, freeze_attention=freeze))
    assert status == 200, r
    edits = [
        FeatureEdit(0, f, 2, value=float(acts[0][2, f]) + 3.0),
        FeatureEdit(1, 4, value=0.0, generated=True),
    ]
    steered = generate_with_features(model, tc, ids, edits, 5, hold_attention=freeze, return_logits=True)
    default = model.generate(ids, 5, return_logits=True)
    for key, generation in (("STEERED", steered), ("DEFAULT", default)):
        sequence = ids.tolist() + generation.new_tokens[0][:4]
        pieces = model.tokenizer.to_str_tokens(sequence)
        assert r[f"{key}_GENERATION"] == "".join(pieces)
        by_token = r[f"{key}_LOGITS_BY_TOKEN"]
        assert [t["token"] for t in by_token] == pieces
        assert all(t["top_logits"] == [] for t in by_token[: len(ids) - 1])
        for i, entry in enumerate(by_token[len(ids) - 1 :]):
            probs = generation.logits[0, i].softmax(-1)
            values, tokens = probs.topk(3)
            assert [x["prob"] for x in entry["top_logits"]] == values.tolist()
            assert [x["token"] for x in entry["top_logits"]] == [
                model.tokenizer.decode([t]) for t in tokens.tolist()
            ]
    assert r["STEERED_LOGITS_BY_TOKEN"] != r["DEFAULT_LOGITS_BY_TOKEN"]


def test_steer_refuses_what_it_cannot_do(golden):
    name, served, ref, url, _ = golden
    text = _text(served.model, ref)
    feature = {"layer": 0, "index": 1, "token_active_position": 1, "steer_position": 1, "delta": 1.0}
    cases = [
        ({**feature, "ablate": True}, 400, "give ablate true or a delta, exactly one"),
        ({**feature, "steer_position": 0}, 400, "position 0 is the BOS token"),
        ({**feature, "steer_position": 99}, 400, "steer_position=99 is outside the prompt of 7 tokens"),
        ({**feature, "layer": 9}, 400, "layer 9 has no transcoder"),
        ({**feature, "index": 10_000}, 400, "feature 10000 is out of range"),
    ]
    for f, code, message in cases:
        status, body = post(url, "/steer", _steer_request(served, text, [f]))
        assert status == code and message in body["error"], body
    status, body = post(url, "/steer", _steer_request(served, text, [feature], freq_penalty=1.0))
    assert status == 400 and "applies only when sampling" in body["error"]
    status, body = post(url, "/steer", _steer_request(served, text, [feature], model_id="gemma"))
    assert status == 404 and f"this server serves {served.model_id!r}" in body["error"]
    request = _graph_request(served, text, signed_url="https://example.invalid/put")
    status, body = post(url, "/generate-graph", request)
    assert status == 422 and "signed_url concerns uploading" in body["error"]
    status, body = post(url, "/generate-graph", _graph_request(served, text, slug_identifier="../x"))
    assert status == 400 and "not a usable name" in body["error"]
    status, body = post(url, "/generate-graph", _graph_request(served, " ".join(["w3"] * 80)))
    assert status == 400 and "is 80 tokens long, more than the model's context n_ctx=64" in body["error"]


def test_steering_with_a_transcoder_feature_writes_every_layer_it_writes(golden):
    """A cross-layer transcoder's feature steers at each later layer's output with its row there."""
    from interp.analysis.steering import steer

    name, served, ref, url, _ = golden
    model, tc = served.model, served.transcoders
    body = {
        "prompt": _text(model, ref),
        "model": served.model_id,
        "steer_method": "SIMPLE_ADDITIVE",
        "normalize_steering": False,
        "types": ["STEERED"],
        "features": [{"model": served.model_id, "source": "0-tc", "index": 3, "strength": 6.0}],
        "n_completion_tokens": 5,
        "temperature": 0,
        "strength_multiplier": 1,
        "freq_penalty": 0,
        "seed": 0,
    }
    status, r = post(url, "/v1/steer/completion", body)
    assert status == 200, r
    rows = tc.decoder(0, torch.tensor([3]))[0]  # [outputs, d_model]
    assert rows.shape[0] == (model.cfg.n_layers if name.endswith("clt") else 1)
    hooks = [
        (tc.output_hook(out), steer(row, 6.0)) for row, out in zip(rows, tc.output_layers(0), strict=True)
    ]
    ids = model.to_tokens(body["prompt"], prepend_bos=True).ids[0]
    assert r["outputs"][0]["output"] == model.generate(ids, 5, fwd_hooks=hooks).text[0]
