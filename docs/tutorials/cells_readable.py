"""Cells of the fourth tutorial: a graph whose features carry dashboards and scored labels (``build.py`` writes
the notebook)."""

CELLS = [
    (
        "md",
        """
# Features you can read

An attribution graph names its features `L29.F87`: a layer and a number. To read one, a researcher looks at
where it fires (its **dashboard**: the top examples, examples from each quantile of its activations, its
histogram, the tokens its decoder promotes) and says in words what it is; then checks that sentence, since a
sentence can be wrong. This notebook does all of it, offline, for a transcoder set it trains itself:

- train skip transcoders for all 30 layers of SmolLM2-135M on King James Bible passages (seconds);
- write the dashboard of **every** feature in one pass over other passages, as circuit-tracer's feature files;
- draw the graph of one prompt in the same folder, so that its feature nodes link to their dashboards;
- have a language model explain the graph's top features from their dashboards, score each explanation
  on examples it was not written from, and write the explanations into the graph file as node labels (`clerp`).

The explainer here is the packaged SmolLM2-135M-Instruct, because it is there; it is far too small to be good
at this, and the scores say so ([docs/explanations.md](../explanations.md) says what to use instead).
""",
    ),
    (
        "code",
        """
import json
from pathlib import Path

import torch

import interp
from interp.circuits import attribute
from interp.circuits.features import add_labels
from interp.sae import train
from interp.sae.dashboards import write_dashboards
from interp.sae.explanations import (
    CachedBackend,
    EmbeddingScorer,
    FeatureFiles,
    FeatureId,
    LocalBackend,
    ResponseCache,
    SentenceEmbedder,
    Settings,
    autointerp,
    chat_template_of,
    examples_of,
    read_rows,
)
from studies.data.corpus import load_corpus

torch.set_grad_enabled(False)  # forwards only; training and attribution turn gradients on themselves
model = interp.load("smollm2-135m")
texts = load_corpus(None, n_texts=160, seed=0).texts  # passages of the King James Bible, up to 600 characters
train_texts, dashboard_texts = texts[:20], texts[20:]
print(len(train_texts), "passages to train on,", len(dashboard_texts), "for the dashboards")
assert len(dashboard_texts) == 140 and not set(train_texts) & set(dashboard_texts)
""",
    ),
    (
        "md",
        """
## Transcoders in seconds

As in [the tutorial on attribution graphs](03-attribution-graphs.ipynb): the MLP's input and output at every
layer, cached from the same forward pass on the training passages (special token left out), and one *skip
transcoder* per layer, 128 TopK features with 8 active per token, trained on 6,000 tokens.
""",
    ),
    (
        "code",
        """
n_layers = model.cfg.n_layers
sites = ("ln2.hook_normalized", "hook_mlp_out")
names = [f"blocks.{layer}.{site}" for site in sites for layer in range(n_layers)]
tokens = model.to_tokens(train_texts, prepend_bos=True, padding_side="left")
_, cache = model.run_with_cache(*tokens, names_filter=names)
keep = tokens.mask.bool() & ~tokens.special  # real tokens, not the special one
inputs, outputs = (  # each [row, layer, d_model]
    torch.stack([cache[f"blocks.{layer}.{site}"][keep] for layer in range(n_layers)], dim=1) for site in sites
)
del cache
with torch.enable_grad():  # training needs the gradients turned off above
    tc = train(
        (inputs, outputs), kind="skip-transcoder", d_sae=128, k=8, tokens=6_000, batch_size=256,
        progress=False,
    )
print(f"{len(inputs)} rows; {len(tc.layers)} layers of {tc.d_transcoder} features")
assert tc.layers == list(range(30)) and tc.d_transcoder == 128
""",
    ),
    (
        "md",
        """
## A dashboard for every feature

`write_dashboards` runs the model over the other 140 passages once, encodes every layer's transcoder input, and
keeps for each of the 3,840 features what its dashboard needs, in memory bounded by the features and not by
the passages ([docs/dashboards.md](../dashboards.md)). It writes one file per feature,
`run/features/kjv-skip/<featureIndex>.json`, in the schema of circuit-tracer's feature files, an `index.json`
that lists them, and a page that shows them.
""",
    ),
    (
        "code",
        """
done = write_dashboards(model, tc, "run", data=dashboard_texts, scan="kjv-skip", progress=False)
index = json.loads((done.folder / "index.json").read_text())
print(done.folder, done.n_features, "features over", done.n_tokens, "tokens")
assert done.n_features == len(index["features"]) == 30 * 128
""",
    ),
    (
        "md",
        """
## The graph, in the same folder

The graph of *"In the beginning God created the heaven and the"* is saved into `run/` with
`dashboards="run"`: its `graph.json` names the scan, so its feature nodes open their dashboards in interp's
viewer (`run/index.html`) and in circuit-tracer's own local server. The file keeps the nodes that pruning keeps:
here ten features.
""",
    ),
    (
        "code",
        """
prompt = "In the beginning God created the heaven and the"
graph = attribute(model, tc, prompt, max_feature_nodes=200, progress=False)
graph.save("run", model=model, transcoders=tc, dashboards="run")
graph_file = json.loads(Path("run/graph.json").read_text())
in_graph = list(dict.fromkeys(
    FeatureId.from_index(node["feature"])
    for node in graph_file["nodes"]
    if node["feature_type"] == "cross layer transcoder"
))
print(graph_file["metadata"]["scan"], "|", len(in_graph), "features:", ", ".join(map(str, in_graph)))
assert graph_file["metadata"]["scan"] == "./data/features/kjv-skip" and len(in_graph) == 10
assert all((done.folder / f"{f.index}.json").is_file() for f in in_graph)  # each node has its dashboard
""",
    ),
    (
        "md",
        """
## Explanations, scored, as labels

`autointerp` shows each feature's activating examples to the explainer (ten, top quantile first) and scores
the explanation on twenty *other* activating examples against as many runs of tokens where the feature is
zero. With SmolLM2 as the explainer only the **embedding** score is asked for: it needs no answers from the
explainer, which cannot give readable detection or fuzzing answers at this size. The embedding score is the
AUC of the explanation's similarity (in MiniLM's sentence embedding) to activating against non-activating
examples: 0.5 is chance. `add_labels` writes the explanations into the graph file's `clerp` fields, where both
viewers show them, and into the copy of the graph that interp's page `run/index.html` embeds, so the page
already built shows them too; `interp autointerp run --explainer smollm2-135m --scorer embedding` does both
steps.

The result is a lesson in what a 135M explainer does: all ten explanations are *"days of the
week"*, the worked example of the explainer's prompt, copied. Five features cannot be scored at all: they fire
on a third or more of all tokens, so their examples hold no run of 8 tokens where they are zero to serve as a
non-activating example; the row says so, and the run goes on.
""",
    ),
    (
        "code",
        """
local = LocalBackend(model, name="smollm2-135m", chat_template=chat_template_of("smollm2-135m"))
backend = CachedBackend(local, ResponseCache("run/explanations-cache.jsonl"))  # a rerun asks nothing twice
embedding = EmbeddingScorer(SentenceEmbedder(interp.load("minilm-l6")))
settings = Settings(scorers=("embedding",), n_explain=10, n_test=20)
folder = FeatureFiles.open("run")
summary = autointerp(
    folder, backend, "run/explanations.jsonl", features=in_graph, settings=settings, embedding=embedding
)
rows = read_rows(Path("run/explanations.jsonl"))
labelled = add_labels("run", {i: r["explanation"] for i, r in rows.items() if r.get("explanation")}, folder.scan)
for fid in in_graph:
    row, score = rows[fid.index], rows[fid.index]["scores"]["embedding"]
    shown = f"AUC {score['auc']:.2f}, {score['n_positive']} + {score['n_negative']}" if "auc" in score else "-"
    print(f"{str(fid):>6}  density {row['density']:.3f}  {row['explanation'][:40]!r:42} {shown}")
copied = sum(rows[f.index]["explanation"] == "days of the week" for f in in_graph)
unscored = [f for f in in_graph if "auc" not in rows[f.index]["scores"]["embedding"]]
assert copied == 10 and len(unscored) == 5 and all(rows[f.index]["density"] > 1 / 3 for f in unscored)
assert settings.min_context == 8  # the shortest run of zeros taken as a non-activating example
assert [(graph.path.name, graph.labelled) for graph in labelled] == [("graph.json", 10)]
def labels() -> dict[int, str]:  # featureIndex -> label, of the graph file's feature nodes (others number other things)
    nodes = json.loads(Path("run/graph.json").read_text())["nodes"]
    return {n["feature"]: n["clerp"] for n in nodes if n["feature_type"] == "cross layer transcoder"}


assert all(labels()[f.index] == rows[f.index]["explanation"] for f in in_graph)
""",
    ),
    (
        "md",
        """
## Reading one ourselves, and scoring that

The graph's most influential feature at *" heaven"* is `L0.F45`. Its dashboard is plain to read: its top
examples are all *" LORD"*, and so is its highest quantile; *" God"* and *" heaven"* come next. Scored on
the same examples, the explanation *"the word LORD"* reaches an embedding AUC of about 0.74, with a 95%
interval (about 0.58 to 0.89) that excludes chance; the explainer's *"days of the week"* gets about 0.50, its
interval holding 0.5: it says nothing the score can tell from chance. A better explainer (an
instruction-tuned model of 7B parameters or more, served at a URL: `--explainer http://...`) is what writes
explanations worth scoring, and its detection and fuzzing answers can be read. Our explanation goes into
the graph like any other.
""",
    ),
    (
        "code",
        """
lord = FeatureId(0, 45)
record = json.loads(folder.path(lord).read_text())
for group in record["examples_quantiles"][:3]:
    print(f"{group['quantile_name'][:36]:36}", [e["tokens"][e["train_token_ind"]] for e in group["examples"]][:6])
_, test, negatives, _ = examples_of(folder.record(lord), settings)  # the examples autointerp scored
ours = embedding.score("the word LORD", test, negatives)
theirs = rows[lord.index]["scores"]["embedding"]
print(f"'the word LORD': AUC {ours.auc:.2f} {ours.interval}")
print(f"{rows[lord.index]['explanation']!r}: AUC {theirs['auc']:.2f} {theirs['interval']}")
at_heaven = [n for n in graph_file["nodes"] if n["feature_type"] == "cross layer transcoder" and n["ctx_idx"] == 7]
assert graph_file["metadata"]["prompt_tokens"][7] == " heaven"
assert FeatureId.from_index(max(at_heaven, key=lambda n: n["influence"])["feature"]) == lord
top_two = record["examples_quantiles"][:2]  # the top examples and the highest quantile
assert {e["tokens"][e["train_token_ind"]] for group in top_two for e in group["examples"]} == {" LORD"}
assert len(test) == len(negatives) == 20 and theirs["n_positive"] == theirs["n_negative"] == 20
assert abs(ours.auc - 0.74) < 0.02 and abs(ours.interval[0] - 0.58) < 0.02 and abs(ours.interval[1] - 0.89) < 0.02
assert abs(theirs["auc"] - 0.50) < 0.02 and theirs["interval"][0] < 0.5 < theirs["interval"][1]
assert theirs["chance"] == 0.5
add_labels("run", {lord.index: "the word LORD"}, folder.scan)
assert labels()[lord.index] == "the word LORD"
""",
    ),
]
