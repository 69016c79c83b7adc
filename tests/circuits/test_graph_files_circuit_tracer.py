"""``<slug>.json`` (``graph.json`` by default) is what circuit-tracer's own ``create_graph_files`` writes for
the same graph, node for node and link for link, and it validates against circuit-tracer's pydantic schema
(``frontend.graph_models.Model``, the schema of the files its local server and Neuronpedia read).

A graph is attributed here on a tiny model with random transcoders and saved; circuit-tracer, run live in its own
environment (``tests/reference_envs.py``), gets the very tensors of ``graph.safetensors`` as its ``Graph`` (saved
in its ``.pt`` format and read back by ``create_graph_files``), prunes it with its own code and writes its JSON.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import tokenizers
import torch

from interp.circuits import Target, attribute
from interp.circuits.features.attention import attention_edges, explain_edges
from interp.tokens import Tokenizer
from tests.circuits.transcoders import family_model, tiny_transcoders
from tests.reference_envs import require

DRIVER = Path(__file__).resolve().parent / "circuit_tracer_graph_files.py"
VALIDATE = (
    "import json, sys; from circuit_tracer.frontend.graph_models import Model; "
    "Model.model_validate(json.load(open(sys.argv[1]))); print('valid')"
)
EPS = torch.finfo(torch.float32).eps
TOKENS = torch.tensor([0, 5, 17, 9, 33, 2, 41])


def _tokenizer(folder: Path, vocab: int) -> Tokenizer:
    """A word-level tokenizer ``t0 .. t{vocab-1}`` written where circuit-tracer's ``AutoTokenizer`` finds it, and
    the same one for interp."""
    backend = tokenizers.Tokenizer(
        tokenizers.models.WordLevel({f"t{i}": i for i in range(vocab)}, unk_token="t0")
    )
    backend.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    backend.decoder = tokenizers.decoders.WordPiece(prefix="##")  # joins with spaces, as the text was
    folder.mkdir()
    backend.save(str(folder / "tokenizer.json"))
    settings = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "t0", "eos_token": "t0"}
    (folder / "tokenizer_config.json").write_text(json.dumps(settings))
    return Tokenizer(tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json")), bos_id=0, eos_id=0)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """interp's graph.json and circuit-tracer's, for graphs with token targets and with a direction."""
    python = require("circuit-tracer")
    root = tmp_path_factory.mktemp("graphs")
    model = family_model("llama3-rope")
    cfg = model.cfg
    model.tokenizer = _tokenizer(root / "tokenizer", cfg.d_vocab)
    tc = tiny_transcoders(cfg, kind="skip", seed=3)
    prompt = " ".join(f"t{t}" for t in TOKENS.tolist())
    plain = attribute(model, tc, TOKENS, max_logits=3, progress=False)
    graphs = {
        "tokens": plain,
        "explained": plain,
        "direction": attribute(
            model,
            tc,
            TOKENS,
            targets=[Target.difference(model, 7, 4), Target.difference(model, 11, 3, weight=0.5)],
            progress=False,
        ),
    }
    out = {}
    for name, graph in graphs.items():
        graph.metadata["prompt"] = prompt
        extra = {}
        if name == "explained":  # the same graph with explained edges and a subgraph in the extension
            extra["attention"] = explain_edges(model, tc, graph, attention_edges(graph, 2), top_heads=2)
            shown = json.loads((root / "tokens" / "tokens.json").read_text())["nodes"]
            features = [n["uid"] for n in shown if n["feature_type"] not in ("embedding", "logit")]
            graph = graph.subgraph(
                pinned=["token@2"], supernodes={"first": features[:2], "second": features[2:3]}
            )
        ours = graph.save(root / name, model=model, slug=name, **extra)
        settings = {
            "graph": str(ours / "graph.safetensors"),
            "tokenizer": str(root / "tokenizer"),
            "prompt": prompt,
            "slug": name,
            "scan": graph.metadata["transcoders"],
            "node_threshold": 0.8,
            "edge_threshold": 0.98,
            **{k: getattr(cfg, k) for k in ("n_layers", "d_model", "d_head", "n_heads", "d_mlp", "d_vocab")},
        }
        (root / f"{name}.json").write_text(json.dumps(settings))
        theirs = root / f"{name}-circuit-tracer"
        result = subprocess.run(
            [str(python), str(DRIVER), str(root / f"{name}.json"), str(theirs)],
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        out[name] = (graph, ours / f"{name}.json", theirs / f"{name}.json")
    return python, out


@pytest.mark.parametrize("name", ["tokens", "direction", "explained"])
def test_graph_json_is_circuit_tracers_node_for_node_and_link_for_link(written, name):
    _, out = written
    graph, ours_file, theirs_file = out[name]
    ours, theirs = json.loads(ours_file.read_text()), json.loads(theirs_file.read_text())
    if name == "explained":  # outside the extension and the subgraph, the file is circuit-tracer's
        assert set(ours) == {*theirs, "interp"}
        assert len(ours["interp"]["attention"]) == 2 and ours["interp"]["subgraph"]["pinned"]
        pinned, supernodes = ours["qParams"].pop("pinnedIds"), ours["qParams"].pop("supernodes")
        assert theirs["qParams"].pop("pinnedIds") == [] and theirs["qParams"].pop("supernodes") == []
        drawn = {n["node_id"]: n["uid"] for n in ours["nodes"]}
        assert [drawn[i] for i in pinned] == ours["interp"]["subgraph"]["pinned"]
        assert [[s[0], *(drawn[i] for i in s[1:])] for s in supernodes] == ours["interp"]["subgraph"][
            "supernodes"
        ]
    assert [n["node_id"] for n in ours["nodes"]] == [n["node_id"] for n in theirs["nodes"]]
    assert len(ours["nodes"]) > graph.n_pos + graph.n_logits  # features and errors kept, not only the ends
    for a, b in zip(ours["nodes"], theirs["nodes"], strict=True):
        assert set(a) - {"uid"} == set(b), a["node_id"]
        for key, value in b.items():
            if key in ("influence", "activation") and value is not None:
                # the same float32 computation on the same tensors: equal up to float32 rounding
                assert a[key] == pytest.approx(value, rel=8 * EPS, abs=8 * EPS), (a["node_id"], key)
            else:
                assert a[key] == value, (a["node_id"], key)
    assert [(x["source"], x["target"]) for x in ours["links"]] == [
        (x["source"], x["target"]) for x in theirs["links"]
    ]
    assert [x["weight"] for x in ours["links"]] == [x["weight"] for x in theirs["links"]]  # the same float32s
    assert ours["qParams"] == theirs["qParams"]
    for key in ("slug", "scan", "prompt", "prompt_tokens", "node_threshold", "schema_version"):
        assert ours["metadata"][key] == theirs["metadata"][key], key


@pytest.mark.parametrize("name", ["tokens", "direction", "explained"])
def test_graph_json_validates_against_circuit_tracers_schema(written, name):
    python, out = written
    result = subprocess.run(
        [str(python), "-c", VALIDATE, str(out[name][1])], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0 and result.stdout.strip() == "valid", result.stderr[-3000:]
