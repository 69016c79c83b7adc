"""Cells of the second tutorial: from features to circuits (``build.py`` writes the notebook)."""

CELLS = [
    (
        "md",
        """
# From features to circuits

*"Emma is coming to the party tonight, isn't"* — the next word should be " she"; with *Jack* it should be " he".
This notebook asks where SmolLM2-135M-Instruct (the packaged 4-bit GGUF, Q4_1, dequantized) keeps that
choice: as **sparse features** of its residual
stream (a small sparse autoencoder trained here), as a **direction** that can steer what it says, and as a
**circuit** of attention heads and MLPs found by edge attribution.

The prompts are the agreement twins that come with interp's studies (`studies/data/agreement.jsonl`): pairs of
prompts that differ only in the name. Everything runs on a laptop CPU in about a minute.
""",
    ),
    (
        "code",
        """
import json
from pathlib import Path

import torch

import interp
import interp.sae
import studies
from interp.analysis import steering_vector
from interp.circuits import Pairs, eap_ig, evaluate, logit_difference, top_n

torch.set_grad_enabled(False)  # forwards only, except where a cell turns them back on (eap_ig does it itself)
model = interp.load("smollm2-135m")
lines = (Path(studies.__file__).parent / "data" / "agreement.jsonl").read_text(encoding="utf-8").splitlines()
rows = {row["id"]: row for row in map(json.loads, lines)}
# (she-twin, he-twin) pairs whose next word is " she" or " he" (others end at "her"/"his", "herself", ...)
she_rows = [row for row in rows.values() if row["answer"] == 0 and row["targets"] == [" she", " he"]]
twins = [(row, rows[row["twin_id"]]) for row in she_rows]
she, he = (int(model.to_tokens(w, prepend_bos=False).ids[0, 0]) for w in (" she", " he"))
print(len(twins), "twin pairs, e.g.", [twins[0][0]["prompt"], twins[0][1]["prompt"]])
assert len(twins) == 65
""",
    ),
    (
        "md",
        """
## The behaviour

We split the pairs in two halves, alternately: one to build things on, the other to test them.
At the last token, the model puts more weight on the agreeing pronoun than on the other one for 74% of the 130
prompts; half of them want " she", so always answering " she" would score 50%.
One forward pass gives both the logits and the residual stream after layer 26, which the next section trains on.
""",
    ),
    (
        "code",
        """
build = [pair for i, pair in enumerate(twins) if i % 2 == 0]
test = [pair for i, pair in enumerate(twins) if i % 2 == 1]
prompts = [row["prompt"] for pair in twins for row in pair]  # she-twin, he-twin, she-twin, ...
feminine = torch.tensor([row["answer"] == 0 for pair in twins for row in pair])
hook = "blocks.26.hook_resid_post"
tokens = model.to_tokens(prompts, padding_side="left")  # left padding: the last token is last
logits, cache = model.run_with_cache(*tokens, names_filter=hook)
prefers_she = logits[:, -1, she] > logits[:, -1, he]
accuracy = float((prefers_she == feminine).float().mean())
print(f"agreeing pronoun preferred on {accuracy:.0%} of {len(prompts)} prompts")
assert len(prompts) == 130 and abs(accuracy - 0.74) < 0.02  # 74%, give or take two prompts
assert float(feminine.float().mean()) == 0.5  # the score of always answering " she"
""",
    ),
    (
        "md",
        """
## Sparse features

A sparse autoencoder rewrites each stream vector as a few active *latents* out of many. We train a small TopK
one (256 latents, 8 active per token) on the stream rows of those prompts, in seconds. It explains 0.64 of the
stream's variance, and spliced into the model in place of the stream it recovers 0.93 of the next-token loss
that zeroing the stream costs (`ce_recovered_zero`).
""",
    ),
    (
        "code",
        """
real = tokens.mask.bool()
rows_26 = cache[hook][real]  # [real tokens, d_model]
with torch.enable_grad():  # training needs the gradients turned off above
    sae = interp.sae.train(
        rows_26, hook_name=hook, d_sae=256, k=8, tokens=30_000, batch_size=256, progress=False
    )
quality = interp.sae.evaluate(model, sae, model.to_tokens(prompts[:8]), skip_first=1)
columns = ["l0", "explained_variance", "ce_spliced", "ce_clean", "ce_recovered_zero"]
print(quality[columns].round(3).to_string())
assert quality["l0"][0] == 8 and abs(quality["explained_variance"][0] - 0.64) < 0.02
assert abs(quality["ce_recovered_zero"][0] - 0.93) < 0.02
""",
    ),
    (
        "md",
        """
Does one feature tell a *she* prompt from a *he* prompt at the last token? We pick the latent whose mean
activation differs most between the feminine and masculine prompts of the build half, and read it as a
classifier on the test half (above the build half's median: feminine). It does no better than a coin: right on
0.50 of the test half's 64 prompts, the score of a classifier that ignores the prompt. A good
reconstruction does not mean a latent for the distinction we care about, the same negative result the features
study reports with a larger dictionary (`interp study features`).
""",
    ),
    (
        "code",
        """
latents = sae.encode(cache[hook][:, -1])  # [prompt, d_sae] at the last token
in_build = torch.tensor([i // 2 % 2 == 0 for i in range(len(prompts))])
gap = latents[in_build & feminine].mean(0) - latents[in_build & ~feminine].mean(0)
best = int(gap.abs().argmax())
threshold = latents[in_build, best].median()
says_feminine = (latents[:, best] > threshold) == (gap[best] > 0)
held_out = float((says_feminine[~in_build] == feminine[~in_build]).float().mean())
print(f"latent {best}: held-out accuracy {held_out:.2f} on {int((~in_build).sum())} prompts")
assert int((~in_build).sum()) == 64 and abs(held_out - 0.5) < 0.02  # 32 of 64, give or take one
""",
    ),
    (
        "md",
        """
## A direction that steers

A plainer object works: the mean difference of the stream entering block 27 between each *she* prompt and its
*he* twin, over the build half. Added (twice) to the stream of the test half's *he* prompts, it flips the model's
choice to " she" on nine in ten or more of the prompts it had right, while a random direction of the same length
flips almost none.
""",
    ),
    (
        "code",
        """
site = "blocks.27.hook_resid_pre"
vector = steering_vector(model, [s["prompt"] for s, _ in build], [h["prompt"] for _, h in build], site)
noise = torch.randn(vector.vector.shape, generator=torch.Generator().manual_seed(0))
noise = noise / noise.norm() * vector.vector.norm()
masculine = model.to_tokens([h["prompt"] for _, h in test], padding_side="left")


def prefers_she_with(hooks: list) -> torch.Tensor:
    last = model.run_with_hooks(*masculine, fwd_hooks=hooks)[:, -1]
    return last[:, she] > last[:, he]


right = ~prefers_she_with([])
flipped = float(prefers_she_with([vector.hook(2.0)])[right].float().mean())
by_chance = float(prefers_she_with([(site, lambda resid, hook: resid + 2.0 * noise)])[right].float().mean())
print(f"{int(right.sum())} prompts flipped: {flipped:.0%} by she - he, {by_chance:.0%} by a random direction")
assert flipped > 0.9 and by_chance < 0.1
""",
    ),
    (
        "md",
        """
The same hook works while generating text: `model.generate(prompt, 16, fwd_hooks=[vector.hook(2.0, positions="new")])`
steers only the new tokens ([docs/generation.md](../generation.md)).

## A circuit

`interp.circuits` scores every edge between components (the input, each head's query, keys and values, each MLP,
the logits): 70,651 edges in SmolLM2. EAP-IG estimates how much the logit difference " she" − " he" (answer minus
foil) changes when one edge carries the corrupted twin's value instead of the clean one. Clean and corrupted
prompts must line up token for token, so we use the twins whose two prompts have the same number of tokens,
left-padded to one length with a shared attention mask; twelve pairs to score, the rest to evaluate.

The strongest edge is head 26.2 writing straight to the logits, the head the coreference study's patching points
to. A circuit keeps the top edges (pruned to paths from the input to the logits) and gives every other edge the
corrupted value; its *faithfulness* is the share of the model's clean-minus-corrupted preference it reproduces on
pairs the scores never saw. The top 30 edges (fewer once pruned to paths) reproduce about a tenth of it (0.10);
the top 3,000, about 4% of the 70,651, reproduce about nine tenths (0.91), on the 19 pairs left to evaluate.
""",
    ),
    (
        "code",
        """
def length(text: str) -> int:
    return model.to_tokens(text).ids.shape[1]


aligned = [(s, h) for s, h in twins if length(s["prompt"]) == length(h["prompt"])]


def pairs_of(group: list) -> Pairs:
    clean = model.to_tokens([s["prompt"] for s, _ in group], padding_side="left")
    corrupt = model.to_tokens([h["prompt"] for _, h in group], padding_side="left")
    assert torch.equal(clean.mask, corrupt.mask)  # twins of equal length share the padding
    answer, foil = torch.tensor([she] * len(group)), torch.tensor([he] * len(group))
    labels = {"answer": answer, "foil": foil}
    return Pairs(clean=clean.ids, corrupt=corrupt.ids, attention_mask=clean.mask, labels=labels)


scoring, held = pairs_of(aligned[:12]), pairs_of(aligned[12:])
scores = eap_ig(model, scoring, logit_difference, steps=5)
strongest = scores.frame(top=5)
print(strongest.to_string(index=False))
circuits = [top_n(scores, n) for n in (30, 300, 3000)]
faithfulness = evaluate(model, circuits, held, logit_difference).faithfulness  # one per circuit
for circuit, value in zip(circuits, faithfulness, strict=True):
    print(f"{len(circuit.edges):5d} edges: faithfulness {value:.2f} on {len(aligned) - 12} held-out pairs")
assert tuple(strongest.iloc[0][["source", "input"]]) == ("L26.H2", "logits")
assert scores.graph.n_edges == 70_651
assert len(aligned) - 12 == 19 and round(100 * 3000 / scores.graph.n_edges) == 4
assert abs(faithfulness[0] - 0.10) < 0.05 and abs(faithfulness[2] - 0.91) < 0.05
""",
    ),
    (
        "md",
        """
## Where next

- Sparse dictionaries (formats, training from the command line, attribution to features):
  [docs/sparse-dictionaries.md](../sparse-dictionaries.md).
- Steering vectors, sweeps and generation with hooks: [docs/generation.md](../generation.md).
- Circuits (EAP, exact edge patching, faithfulness curves, drawing): [docs/circuits.md](../circuits.md).
- The next tutorial trains transcoders for every layer and explains one she/he prediction with an attribution
  graph of their features: [03-attribution-graphs.ipynb](03-attribution-graphs.ipynb).
- The studies that run these at scale, with intervals and baselines: `interp study features`, `interp study
  steering`, `interp study circuits` ([docs/studies.md](../studies.md)).
""",
    ),
]
