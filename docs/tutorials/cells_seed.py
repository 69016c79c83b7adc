"""Cells of the fifth tutorial: the seed's question, why "it" means "animal", in one graph (``build.py`` writes
the notebook)."""

CELLS = [
    (
        "md",
        """
# Why does "it" mean "animal"? The seed's question in one graph

*"The animal didn't cross the street because it was too tired"*: "it" is the animal; with *wide* it is the
street. The pages this project grew from explain it with attention: the query at "it", informed by the
adjective, matches the key of the right noun. This notebook asks the question of SmolLM2-135M-Instruct (the
packaged 4-bit GGUF, Q4_1, dequantized) in the order a careful reader should:

- **does the model do it at all?** (does its answer flip with the switch word);
- the attribution graph of the answer, on transcoders trained here in seconds;
- the referent's edge into the answer, the heads that carry it, and each head's score split into the graph's
  own nodes on the query side and the key side (`graph.explain_attention`), and why the head prefers the animal's
  key to the street's.

It runs in under a minute on a CPU. The transcoders here are tiny, so their error nodes carry much of the graph;
the study behind this notebook (`interp study attribution`, [its README](../../studies/attribution/README.md))
uses larger ones, tests the explanation by removing the named nodes against matched random ones, with intervals
over twin pairs, and states the answer.
""",
    ),
    (
        "code",
        """
import torch

import interp
from interp.circuits import attribute
from interp.sae import train_transcoders
from studies.attribution.prompts import SEED, SEED_QUESTION
from studies.data.corpus import load_corpus

torch.set_grad_enabled(False)  # forwards only; training and attribution turn gradients on themselves
model = interp.load("smollm2-135m")
twins = {"tired": SEED[0], "wide": SEED[1]}  # the attribution study's pair, full stops included
question = SEED_QUESTION  # ' In that sentence, "it" means the'
print(twins)
animal, street = (int(model.to_tokens(w, prepend_bos=False).ids[0, 0]) for w in (" animal", " street"))
""",
    ),
    (
        "md",
        """
## Does the model do it?

The sentences and the question are the attribution study's own (`studies.attribution.prompts`, full stops
included), so the preferences below are the ones its report gives for the seed's pair. A question after the
sentence makes the answer one next token: the model's preference is the logit of " animal" minus that of
" street". A model that resolves the pronoun prefers the animal after *tired* and the street after *wide*.
SmolLM2 prefers the animal in both, by about 7.9 and 7.4 logits: **the switch word does not flip its answer**.
It does move it, by about half a logit toward the street after *wide*, the direction resolution needs, on top
of a strong preference for the animal in either twin. A single pair cannot say whether that shift is more than
chance; the study measures it over every twin pair. (On the Winograd twin pairs of the coreference study the
model does better than chance with its own scoring; this pair is not among its successes.) The graph below
shows what carries " animal" and why the heads on that path attend where they do.
""",
    ),
    (
        "code",
        """
def animal_minus_street(text: str) -> float:
    logits = model(model.to_tokens(text + question, prepend_bos=True).ids)[0, -1]
    return float(logits[animal] - logits[street])


preference = {word: animal_minus_street(text) for word, text in twins.items()}
print(preference)
assert abs(preference["tired"] - 7.9) < 0.05 and abs(preference["wide"] - 7.4) < 0.05
assert abs(preference["tired"] - preference["wide"] - 0.5) < 0.05  # toward the street after "wide"
""",
    ),
    (
        "md",
        """
## Transcoders in seconds

As in [the tutorial on readable features](04-readable-features.ipynb): the MLP's input and output at all 30
layers, cached on 20 King James Bible passages (special token left out), and one *skip transcoder* per layer,
128 TopK features with 8 active per token, trained on 6,000 tokens.
""",
    ),
    (
        "code",
        """
n_layers = model.cfg.n_layers
train_texts = load_corpus(None, n_texts=20, seed=0).texts
sites = ("ln2.hook_normalized", "hook_mlp_out")
names = [f"blocks.{layer}.{site}" for site in sites for layer in range(n_layers)]
tokens = model.to_tokens(train_texts, prepend_bos=True, padding_side="left")
_, cache = model.run_with_cache(*tokens, names_filter=names)
keep = tokens.mask.bool() & ~tokens.special  # real tokens, not the special one
inputs, outputs = (  # each [row, layer, d_model]
    torch.stack([cache[f"blocks.{layer}.{site}"][keep] for layer in range(n_layers)], dim=1) for site in sites
)
del cache
with torch.enable_grad():
    tc = train_transcoders(
        (inputs, outputs), kind="skip-transcoder", d_transcoder=128, k=8, tokens=6_000, batch_size=256,
        progress=False,
    )
assert len(train_texts) == 20 and tc.layers == list(range(30)) and tc.d_transcoder == 128
""",
    ),
    (
        "md",
        """
## The referent's edge into the answer

The graph of the *tired* twin with the question, its targets the two answers (`logit.0` is " animal",
`logit.1` " street"). The referent is the animal, at position 2 (after the special token and "The"); of the
graph's nodes there (features, error nodes, the token itself), the one with the largest direct edge into
" animal" is the edge to explain. The answer is read at the last position, so the edge passes through attention.
With transcoders this small the strongest such node is an **error node**, what the transcoder of some layer
misses at the animal: a lesson in itself (a graph explains only what its dictionary captures).
""",
    ),
    (
        "code",
        """
prompt = twins["tired"] + question
graph = attribute(model, tc, prompt, targets=[" animal", " street"], max_feature_nodes=200, progress=False)
words = model.to_str_tokens(prompt, prepend_bos=True)
at_animal, at_street = words.index(" animal"), words.index(" street")
at_animal_nodes = [str(n) for n in graph.nodes if n.kind != "logit" and n.position == at_animal]
edges = sorted(((graph.edge("logit.0", n), n) for n in at_animal_nodes), key=lambda e: -abs(e[0]))
print(edges[:4])
source = edges[0][1]
assert (at_animal, at_street) == (2, 7) and "error" in source
""",
    ),
    (
        "md",
        """
## Which heads carry it, and why they attend

`graph.explain_attention` splits the edge into the heads it passes through (their *loadings*) and, for each of
the three with the largest, splits the head's score from the last position to the animal into a query-node ×
key-node matrix over the graph's nodes, plus `bias`, what no node writes (biases, position, the special
token's MLP writes). The matrix sums to the score exactly, to float precision. With `other_key` it also splits
the difference between the score to the animal and the score to the street: what makes the head prefer one key
to the other.
""",
    ),
    (
        "code",
        """
explained = graph.explain_attention(model, tc, ("logit.0", source), top_heads=3, other_key=at_street)
print(explained)
for head, versus in zip(explained.heads, explained.differences, strict=True):
    print(f"L{head.layer}H{head.head}: loading {head.loading:+.3f}, weight on the animal {head.pattern:.3f}, "
          f"score {head.score:.3f}; animal minus street {versus.difference:+.3f}")
    for query_node, key_node, value in head.top(4):
        print(f"    {query_node:>14} x {key_node:<14} {value:+.3f}")
    assert abs(float(head.matrix.sum()) - head.score) < 1e-4 * max(1.0, abs(head.score))
    assert abs(float(versus.matrix.sum()) - versus.difference) < 1e-4 * max(1.0, abs(versus.difference))
assert len(explained.heads) == 3
""",
    ),
    (
        "md",
        """
## Reading it

Sum each head's matrix over the key nodes and every query node has its part of the score; over the query nodes,
every key node. The nodes at "it" and "tired" make less than a tenth of each head's query side (by absolute
parts), and the nodes at the animal's own position less than half of its key side: the rest is what no node
writes and what the first two positions (the special token and "The") write, through earlier heads. So the
heads that carry the animal into the answer do not attend to it because the pronoun and the adjective ask for
it: **in this graph, "it" does not take its meaning from "animal" the way the seed pages draw it**. That is one
twin of one pair, read through transcoders too small to capture much of the model, not the study's finding: the
study asks the same question with larger transcoders of every twin pair, tests the reading by zeroing the named
nodes against matched random ones, within a prompt and held out on the twin, and states its own answer, with
intervals over twin pairs, in [its README](../../studies/attribution/README.md).
""",
    ),
    (
        "code",
        """
for head in explained.heads:  # the nodes are values: each knows its position (None for the bias)
    query_parts = dict(zip(head.query_components, head.matrix.sum(1).abs().tolist(), strict=True))
    key_parts = dict(zip(head.key_components, head.matrix.sum(0).abs().tolist(), strict=True))
    pronoun_and_adjective = sum(v for n, v in query_parts.items() if n.position in (9, 12))
    pronoun_and_adjective /= sum(query_parts.values())
    at_the_animal = sum(v for n, v in key_parts.items() if n.position == at_animal) / sum(key_parts.values())
    print(f"L{head.layer}H{head.head}: query side from 'it' and 'tired' {pronoun_and_adjective:.2f}, "
          f"key side from the animal {at_the_animal:.2f}")
    assert pronoun_and_adjective < 0.1 and at_the_animal < 0.5
assert (words[9], words[12]) == (" it", " tired")
""",
    ),
]
