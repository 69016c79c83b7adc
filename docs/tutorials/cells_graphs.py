"""Cells of the third tutorial: transcoders and an attribution graph (``build.py`` writes the notebook)."""

CELLS = [
    (
        "md",
        """
# Transcoders and an attribution graph

*"My aunt is visiting next week, isn't"* — the next word is " she"; with *uncle* it is " he". An **attribution
graph** explains one such prediction through sparse features: every MLP of the model is replaced by a
**transcoder** (a sparse dictionary that reads the MLP's input and writes its output) plus an *error node* for
what the transcoder misses, and with attention patterns and norms frozen at their values on the prompt the
model is linear in what each node writes. The graph's edges are those direct, linear effects, from the tokens
through features to the logit difference " she" − " he".

This notebook trains transcoders for all 30 layers of SmolLM2-135M-Instruct (the packaged 4-bit GGUF, Q4_1,
dequantized) in seconds, draws the graph of the *aunt*
prompt, reads its top features and its scores, and checks one intervention against what the graph predicts. It
runs on a laptop CPU in about a minute. Transcoders this small explain only part of each MLP, and the graph
says so: reading how much is the first lesson.
""",
    ),
    (
        "code",
        """
import json
from pathlib import Path

import torch

import interp
import studies
from interp.circuits import FeatureEdit, Target, attribute, intervene
from interp.sae import evaluate, train

torch.set_grad_enabled(False)  # forwards only; training and attribution turn gradients on themselves
model = interp.load("smollm2-135m")
lines = (Path(studies.__file__).parent / "data" / "agreement.jsonl").read_text(encoding="utf-8").splitlines()
rows = {row["id"]: row for row in map(json.loads, lines)}
aunt = rows["ag-053b"]
uncle = rows[aunt["twin_id"]]
she, he = (int(model.to_tokens(w, prepend_bos=False).ids[0, 0]) for w in (" she", " he"))
print(aunt["prompt"], "|", uncle["prompt"])
assert aunt["prompt"] == "My aunt is visiting next week, isn't"
assert uncle["prompt"] == aunt["prompt"].replace("aunt", "uncle")
""",
    ),
    (
        "md",
        """
## The behaviour, as the graph sees it

An attribution graph attributes nothing at the first position, which should hold a special token: SmolLM2's
tokenizer adds none, so `attribute` puts `<|im_start|>` first, and we read the model on the same tokens. It
prefers " she" after *aunt* and " he" after *uncle*.
""",
    ),
    (
        "code",
        """
def she_minus_he(text: str) -> float:
    logits = model(model.to_tokens(text, prepend_bos=True).ids)[0, -1]
    return float(logits[she] - logits[he])


print(model.to_str_tokens(aunt["prompt"], prepend_bos=True))
preference = {row["prompt"].split()[1]: she_minus_he(row["prompt"]) for row in (aunt, uncle)}
print(preference)
assert preference["aunt"] > 2 and preference["uncle"] < -2
""",
    ),
    (
        "md",
        """
## Transcoders in seconds

A transcoder is trained on pairs of rows: the MLP's input (`ln2.hook_normalized`, the norm's output before its
gain) and its output (`hook_mlp_out`), cached from the same forward pass. We cache them at every layer on half
of the other agreement prompts (never the aunt/uncle pair), special token first and its row left out, as the
graph will see them, and train one *skip transcoder* per layer: 128 TopK features (8 active per token) plus a
linear skip term, on 6,000 tokens. Published transcoders are trained on far more text (`interp sae train --kind
skip-transcoder`, [docs/transcoders.md](../transcoders.md)); these take seconds.

On the aunt prompt they explain about 40% of a typical layer's MLP output variance, and the replacement model
(every MLP replaced, no error term) recovers about 60% of the next-token loss that zeroing the MLPs loses: a
rough replacement, and the graph's scores will show it.
""",
    ),
    (
        "code",
        """
n_layers = model.cfg.n_layers
sites = ("ln2.hook_normalized", "hook_mlp_out")
names = [f"blocks.{layer}.{site}" for site in sites for layer in range(n_layers)]
others = [row["prompt"] for row in rows.values() if row["schema_id"] != aunt["schema_id"]]
tokens = model.to_tokens(others[::2], prepend_bos=True, padding_side="left")
_, cache = model.run_with_cache(*tokens, names_filter=names)
keep = tokens.mask.bool() & ~tokens.special  # real tokens, not the special one
inputs, outputs = (  # each [row, layer, d_model]
    torch.stack([cache[f"blocks.{layer}.{site}"][keep] for layer in range(n_layers)], dim=1) for site in sites
)
del cache
with torch.enable_grad():  # training needs the gradients turned off above
    tc = train(
        (inputs, outputs),
        kind="skip-transcoder",
        d_sae=128,
        k=8,
        tokens=6_000,
        batch_size=256,
        progress=False,
    )
quality = evaluate(model, tc, model.to_tokens(aunt["prompt"], prepend_bos=True))
print(f"{len(inputs)} rows; {len(tc.layers)} layers of {tc.d_transcoder} features")
print(quality[["explained_variance", "l0"]].describe().loc[["50%", "min", "max"]].round(2).to_string())
print(quality[["ce_clean", "ce_spliced", "ce_zero", "ce_recovered_zero"]].iloc[0].round(2).to_dict())
assert tc.layers == list(range(n_layers)) == list(range(30)) and (quality["l0"] == 8).all()
assert abs(quality["explained_variance"].median() - 0.40) < 0.03  # about 40%
assert abs(quality["ce_recovered_zero"][0] - 0.60) < 0.03  # about 60%
""",
    ),
    (
        "md",
        """
## The graph

`attribute` runs the prompt once with everything frozen, finds the active features (at most 8 per layer and
position here), and fills the adjacency matrix with one batch of backward passes per batch of rows. The target
is a direction, the logit difference " she" − " he" (`Target.difference`). `max_feature_nodes` keeps the 400
features with the most influence on the target, ranked as circuit-tracer ranks them.

The nodes are values: `L2.F56@1` is feature 56 of layer 2's transcoder at position 1, `L29.error@9` what layer
29's transcoder misses at the last position, `token@2` the embedding of " aunt". A node's *influence* is its
total effect on the target through every path (over the row-normalised absolute edges).

The most influential features are four of layer 2's at the first word, "My" (the first position after the
special token), and they come in pairs whose direct edges nearly cancel. The first feature at " aunt" ranks
only about twentieth: nothing near the top is about the aunt.
""",
    ),
    (
        "code",
        """
target = Target.difference(model, " she", " he")
graph = attribute(model, tc, aunt["prompt"], targets=[target], max_feature_nodes=400, progress=False)
words = model.to_str_tokens(graph.input_tokens)
print(graph)
assert (graph.n_features, graph.n_pos, graph.n_logits) == (400, 10, 1)
assert len(graph.nodes) == 400 + n_layers * 10 + 10 + 1

influence = graph.influence()
direct = graph.adjacency[-1]  # [node]: each node's direct edge into the target
ranked = influence[: graph.n_features].argsort(descending=True)[:8].tolist()
for i in ranked:
    node = graph.nodes[i]
    where = words[node.position]
    print(f"{node!s:>10} at {where!r:>9}: influence {influence[i]:.4f}, direct {direct[i]:+.3f}")
assert {"L2.F56@1", "L29.error@9", "token@2"} <= {str(node) for node in graph.nodes} and words[2] == " aunt"
first_four = [graph.nodes[i] for i in ranked[:4]]
assert all((node.layer, node.position) == (2, 1) for node in first_four)
pairs = direct[ranked[:4]]
assert abs(float(pairs.sum())) < 0.25 * float(pairs.abs().sum())  # they nearly cancel
order = influence[: graph.n_features].argsort(descending=True).tolist()
at_aunt = next(rank for rank, i in enumerate(order) if graph.nodes[i].position == words.index(" aunt"))
print("the first feature at ' aunt' ranks", at_aunt + 1)
assert abs(at_aunt + 1 - 20) <= 3  # about twentieth
""",
    ),
    (
        "md",
        """
## How much the graph explains

Two scores say how far to trust it. The *replacement score* is the share of the influence on the target that
starts at tokens rather than at error nodes; the *completeness score* is the share of all the nodes' inputs,
weighted by influence, that does not come from errors. Here completeness is about 0.76 and replacement about
0.4: most inputs are features or tokens, but much of what reaches " she" − " he" passes through error nodes on the way.
Pruning keeps the nodes that carry 80% of the influence (and the edges that carry 98%).
""",
    ),
    (
        "code",
        """
replacement, completeness = graph.scores()
pruned = graph.prune(node_threshold=0.8, edge_threshold=0.98)
print(f"replacement {replacement:.2f}, completeness {completeness:.2f}")
kept, edges = int(pruned.node_mask.sum()), int(pruned.edge_mask.sum())
print(f"pruned: {kept} of {len(graph.nodes)} nodes, {edges} edges")
assert abs(completeness - 0.76) < 0.02 and abs(replacement - 0.40) < 0.03
assert pruned.node_mask[-1] and kept < len(graph.nodes) / 2
""",
    ),
    (
        "md",
        """
## Aunt against uncle

Where, then, does the graph keep the difference between the two prompts? The graph of the *uncle* prompt has its
error and token nodes at the same places (its features are its own), so we add up each kind of node's direct
edges into " she" − " he" in both graphs and compare. The features differ little between the twins, the token
embeddings somewhat; most of the difference sits in error nodes, and most of that in the error nodes at the
noun itself. These transcoders have not learnt what makes an aunt *she*: the part of the MLPs that knows it is
what they miss. That is what a low replacement score warns of, and what transcoders trained on far more text
are for.
""",
    ),
    (
        "code",
        """
def direct_by_kind(g) -> dict[str, torch.Tensor]:
    \"\"\"Direct edges into the target: features [n], errors [layer, position], tokens [position].\"\"\"
    row, n_f, n_e = g.adjacency[-1], g.n_features, g.n_errors
    errors = row[n_f : n_f + n_e].view(n_layers, g.n_pos)
    return {"features": row[:n_f], "errors": errors, "tokens": row[n_f + n_e : -1]}


uncle_graph = attribute(model, tc, uncle["prompt"], targets=[target], max_feature_nodes=400, progress=False)
both = [direct_by_kind(g) for g in (graph, uncle_graph)]
gap = {kind: float(both[0][kind].sum() - both[1][kind].sum()) for kind in both[0]}
print({kind: round(value, 2) for kind, value in gap.items()})
error_gap = both[0]["errors"].sum(0) - both[1]["errors"].sum(0)  # [position]
print("error gap by position", [round(float(v), 2) for v in error_gap])
assert gap["errors"] > 0.6 * sum(gap.values()) and gap["errors"] > 4 * abs(gap["features"])
assert abs(gap["features"]) < abs(gap["tokens"]) < gap["errors"] / 3
assert int(error_gap.argmax()) == words.index(" aunt") and error_gap.max() > 0.6 * gap["errors"]
""",
    ),
    (
        "md",
        """
## An intervention the graph predicts

The graph is a prediction: in the frozen model, turning a feature off changes the target by minus its direct
edge and every later feature's pre-activation by minus its edge from that feature. `intervene(...,
constrained=True)`, which holds patterns, norms and every other feature at their values on the prompt, runs
exactly that experiment, on the feature with the largest direct edge into " she" − " he", and matches the graph
to float precision.

A *free* run (`constrained=False`) lets attention, norms and every other feature respond, with the error terms
kept so that the unedited run is the model's own. Here the logit difference moves the same way but by less than half
as much: the rest of the network makes up part of the loss. An edge says what a node does directly, not what the
whole network does once it is gone.
""",
    ),
    (
        "code",
        """
strongest = int(direct[: graph.n_features].abs().argmax())
layer, position, feature = graph.features[strongest].tolist()
print(graph.nodes[strongest], "direct edge", round(float(direct[strongest]), 3))
off = [FeatureEdit(layer, feature, position, scale=0.0)]


def she_he(run) -> float:
    return float(run.logits[-1, she] - run.logits[-1, he])


base, cut = (intervene(model, tc, graph.input_tokens, edits, constrained=True) for edits in ([], off))
moved = float((cut.unembed_in[-1] - base.unembed_in[-1]) @ target.vector)
print(f"constrained: the target moves by {moved:+.4f}; the graph says {-float(direct[strongest]):+.4f}")
assert abs(moved + float(direct[strongest])) < 1e-4
nodes = graph.features.tolist()  # (layer, position, feature) of each feature node
later = torch.stack([cut.pre_activations[l][p, f] - base.pre_activations[l][p, f] for l, p, f in nodes])
torch.testing.assert_close(later, -graph.adjacency[: graph.n_features, strongest], atol=1e-4, rtol=1e-3)

free_base, free_cut = (intervene(model, tc, graph.input_tokens, edits, constrained=False) for edits in ([], off))
free_moved = she_he(free_cut) - she_he(free_base)
print(f"free: she - he goes from {she_he(free_base):.2f} to {she_he(free_cut):.2f} ({free_moved:+.2f})")
assert abs(she_he(free_base) - preference["aunt"]) < 1e-3  # with the error terms kept, the model's own output
assert free_moved * moved > 0 and abs(free_moved) < abs(moved) / 2
""",
    ),
    (
        "md",
        """
## Where next

- Attribution graphs (targets, pruning, graph files, the offline viewer, head loadings):
  [docs/attribution-graphs.md](../attribution-graphs.md); `graph.save(folder, model=model, transcoders=tc)`
  writes a page that opens in a browser with no network, and files Neuronpedia and circuit-tracer read.
- Transcoders (formats, cross-layer transcoders, training from the command line):
  [docs/transcoders.md](../transcoders.md).
- Why a head attends where it does, with transcoder features as the parts:
  [docs/qk-attribution.md](../qk-attribution.md) and the first tutorial, [01-one-sentence.ipynb](01-one-sentence.ipynb).
""",
    ),
]
