"""Cells of the first tutorial: one sentence, every activation (``build.py`` writes the notebook)."""

CELLS = [
    (
        "md",
        """
# One sentence, every activation

*"The animal didn't cross the street because it was too tired."* Who was tired? Every reader knows it was the
animal; swap *tired* for *wide* and "it" is the street. This notebook follows that sentence through
SmolLM2-135M-Instruct in a 4-bit GGUF (Q4_1), dequantized: the small model packaged with interp, from tokens
to queries, keys and values, attention patterns, what the pronoun's position takes in and why it looks there,
and which attention heads carry the difference between the two versions.

It runs on a laptop CPU in about a minute, with no network: `interp.load("smollm2-135m")` reads the model from
an installed package.
""",
    ),
    (
        "code",
        """
import torch

import interp
from interp.analysis import patch, qk_key_difference, qk_twin_difference, source_contributions

torch.set_grad_enabled(False)  # we only read and edit activations here, never train
model = interp.load("smollm2-135m")
cfg = model.cfg
print(f"{cfg.n_layers} layers; {cfg.n_heads} query heads, {cfg.n_kv_heads} key/value heads of {cfg.d_head}")
assert (cfg.n_layers, cfg.n_heads, cfg.n_kv_heads, cfg.d_head) == (30, 9, 3, 64)
""",
    ),
    (
        "md",
        """
## Tokens

The model reads tokens, not words. SmolLM2's tokenizer keeps the leading space with each word (`' animal'`) and
puts no beginning-of-sequence token in front, so the sentence is 12 tokens and " it" is token 8. The *wide*
version has the same tokens except the last, which will let us compare the two position by position.
""",
    ),
    (
        "code",
        """
tired = "The animal didn't cross the street because it was too tired"
wide = tired.replace("tired", "wide")
str_tokens = model.to_str_tokens(tired)
print(list(enumerate(str_tokens)))
it, animal, street = (str_tokens.index(word) for word in (" it", " animal", " street"))
assert len(str_tokens) == 12 and (it, animal, street) == (8, 1, 6) and str_tokens[0] == "The"
assert model.to_str_tokens(wide) == str_tokens[:-1] + [" wide"]
""",
    ),
    (
        "md",
        """
## Queries, keys and values

Every activation has a name. We cache those of layer 3's attention: the queries `hook_q` (one per query head),
the keys `hook_k` and values `hook_v` (one per key/value head: SmolLM2 uses grouped-query attention, three query
heads sharing each key/value head), the queries and keys after the rotary position embedding (`hook_rot_q`,
`hook_rot_k`), the scores, the pattern and the mixture of values `hook_z`.
""",
    ),
    (
        "code",
        """
layer, head = 3, 8
attn = f"blocks.{layer}.attn"
names = [f"{attn}.hook_{n}" for n in ("q", "k", "v", "rot_q", "rot_k", "attn_scores", "pattern", "z")]
_, cache = model.run_with_cache(tired, names_filter=names)
q, k, v = (cache[f"{attn}.hook_{n}"] for n in "qkv")
print("q", tuple(q.shape), "k", tuple(k.shape), "v", tuple(v.shape))  # [batch, pos, head, d_head]
assert q.shape == (1, 12, 9, 64) and k.shape == v.shape == (1, 12, 3, 64)
""",
    ),
    (
        "md",
        """
We can redo the attention by hand from the cached pieces, step by step. A query is compared with every
key by a dot product, divided by $\\sqrt{d_{head}}$ so that the scores do not grow with the width; a token may not
look at later tokens, so those scores are set to $-\\infty$; a softmax turns each row into weights that sum to 1,
and the head's output at each position is the weighted mixture of the values. The hand computation equals what
the model computed.
""",
    ),
    (
        "code",
        """
kv = head // (cfg.n_heads // cfg.n_kv_heads)  # the key/value head query head 8 reads
rq = cache[f"{attn}.hook_rot_q"][0, :, head]  # [pos, d_head], after rotary
rk = cache[f"{attn}.hook_rot_k"][0, :, kv]  # [pos, d_head]
scores = rq @ rk.T / cfg.d_head**0.5  # [query, key]
later = torch.ones(12, 12, dtype=torch.bool).triu(1)  # keys after the query
scores = scores.masked_fill(later, float("-inf"))
pattern = scores.softmax(dim=-1)
z = pattern @ v[0, :, kv]  # [query, d_head]
torch.testing.assert_close(scores, cache[f"{attn}.hook_attn_scores"][0, head])
torch.testing.assert_close(pattern, cache[f"{attn}.hook_pattern"][0, head])
torch.testing.assert_close(pattern.sum(-1), torch.ones(12))  # each row's weights sum to 1
torch.testing.assert_close(z, cache[f"{attn}.hook_z"][0, :, head])
""",
    ),
    (
        "md",
        """
## The pattern, drawn

`interp.report.attention_view` draws the same computation as an interactive page, inline: pick a layer and a
head, hover a token to see where it looks, and compare what its query seeks with what each key offers. It needs
no network; `view.save("explain.html")` writes it to a file, and `interp explain` does the same from the shell.
""",
    ),
    (
        "code",
        """
view = interp.report.attention_view(model, tired, token="it", layer=layer, head=head)
assert view.query == it and (view.layer, view.head) == (layer, head)
view
""",
    ),
    (
        "md",
        """
## What "it" takes in

From " it", head 3.8 looks mostly at " animal": more than twice the weight it gives " street". What the head
writes into the residual stream at " it" is a sum over the tokens it looks at (each one's value vector, weighted
and projected by the output matrix); `source_contributions` splits that write by source, and the largest piece by
far comes from " animal". So after layer 3 the stream at the pronoun carries information read from the animal.

The head cannot be doing this *because* the animal was tired: " it" comes before " tired", and a token never sees
later tokens. In the *wide* sentence its row is exactly the same.
""",
    ),
    (
        "code",
        """
row = cache[f"{attn}.hook_pattern"][0, head, it]  # [key]: where " it" looks
print({str_tokens[i]: round(float(w), 3) for i, w in enumerate(row[: it + 1])})
assert row[animal] > 2 * row[street] and int(row.argmax()) == animal

_, cache = model.run_with_cache(tired, names_filter=[f"{attn}.hook_pattern", f"{attn}.hook_v"])
parts = source_contributions(model, cache, layer=layer, head=head, query_pos=it)[0]  # [key, d_model]
sizes = parts.norm(dim=-1)
print({str_tokens[i]: round(float(s), 2) for i, s in enumerate(sizes[: it + 1])})
assert int(sizes.argmax()) == animal and sizes[animal] > 2 * sizes[street]

_, wide_cache = model.run_with_cache(wide, names_filter=f"{attn}.hook_pattern")
torch.testing.assert_close(wide_cache[f"{attn}.hook_pattern"][0, head, it], row)
""",
    ),
    (
        "md",
        """
## Why does "it" attend where it does?

A score is the query dotted with the key, and both are made of the residual stream entering layer 3: the token
embeddings plus what every earlier head and MLP wrote. *QK attribution* splits the stream at the query and at
the key into those parts, pushes each through the layer's (frozen) norm, `W_Q` or `W_K` and rotary, and returns
the matrix of part-by-part products, which sums to the score exactly. `qk_key_difference` does it for the
difference between two keys: why head 3.8 scores " animal" above " street" from " it".

The two scores differ by about 1.1 (6.7 against 5.6), and the terms add up to the scores the model computed.
Labels say what wrote a part and where: `L1H6@" cross"`, the largest head term on the key side, is what head
1.6 carried into the key's position from the token " cross"; on the key side a part written at the key itself
shows both tokens (`MLP0@" animal| street"`). The preference is made by earlier heads: their writes into the two
keys account for almost all of it on the key side (mostly heads of layers 1 and 2), and the same holds for their
writes into the query.
""",
    ),
    (
        "code",
        """
why = qk_key_difference(model, tired, layer=layer, head=head, query=it, key=animal, other_key=street)
print(why.first)
print(why.second)
print(why.table(top=6)[["query", "key", "value"]].to_string(index=False))
_, cache = model.run_with_cache(tired, names_filter=f"{attn}.hook_attn_scores")
model_scores = cache[f"{attn}.hook_attn_scores"][0, head, it]  # [key]
assert abs(why.first.score - float(model_scores[animal])) < 1e-3
assert abs(why.second.score - float(model_scores[street])) < 1e-3
assert abs(why.total - (why.first.score - why.second.score)) < 1e-3
# the prose's numbers, to the digit it gives: about 1.1, 6.7 against 5.6
assert abs(why.total - 1.1) < 0.05 and abs(why.first.score - 6.7) < 0.05 and abs(why.second.score - 5.6) < 0.05

sides = (("key", why.key_marginal()), ("query", why.query_marginal()))
by_kind = {side: frame.groupby("kind")["value"].sum() for side, frame in sides}
print({side: sums.round(2).to_dict() for side, sums in by_kind.items()})
assert by_kind["key"]["head"] > 0.85 * why.total and by_kind["query"]["head"] > 0.85 * why.total
key_heads = why.key_marginal().query("kind == 'head'")
print(key_heads.head(4)[["component", "value"]].to_string(index=False))
assert set(key_heads.head(4)["layer"]) <= {1, 2} and key_heads.iloc[0]["component"] == 'L1H6@" cross"'
""",
    ),
    (
        "md",
        """
What changes when *tired* becomes *wide*? `qk_twin_difference` splits a score in one prompt minus the same score
in its twin, matching positions by their characters. From " it" the answer is *nothing*, term by term: " it"
comes before the adjective, so neither its query nor the keys can contain it.

The first token that has seen both is a full stop after the adjective. From there, head 3.8's score for
" animal" does change, but by only about 0.05 on a score of 2.4. The largest single change in the query is head
2.1 reading the adjective (each twin's adjective appears on its own side of the table), and writes made at the
full stop itself nearly cancel it: head 3.8 does not pick the referent by the adjective.
""",
    ),
    (
        "code",
        """
same = qk_twin_difference(model, tired, wide, layer=layer, head=head, query=it, key=animal)
assert same.total == 0.0 and not same.matrix.any()

stop = qk_twin_difference(model, tired + ".", wide + ".", layer=layer, head=head, query=-1, key=animal)
print(f"tired: {stop.first.score:.3f}  wide: {stop.second.score:.3f}  difference: {stop.total:.3f}")
changes = stop.query_marginal()
print(changes.head(5)[["component", "at", "value"]].to_string(index=False))
assert abs(stop.total - (stop.first.score - stop.second.score)) < 1e-4
assert abs(abs(stop.total) - 0.05) < 0.01 and abs(stop.first.score - 2.4) < 0.05  # about 0.05 on 2.4
top = changes.iloc[0]
adjective, full_stop = len(str_tokens) - 1, len(str_tokens)
assert (top["kind"], top["layer"], top["head"], top["at"]) == ("head", 2, 1, adjective)
by_position = changes.groupby("at")["value"].sum()  # what was read from each position, or written there
print(f"from the adjective {by_position[adjective]:.3f}, at the stop {by_position[full_stop]:.3f}")
assert by_position[adjective] < 0 < by_position[full_stop]
assert abs(by_position[adjective] + by_position[full_stop]) < 0.2 * abs(by_position[adjective])
""",
    ),
    (
        "md",
        """
## Does the model resolve "it"?

One way to ask (the coreference study's *partial scoring*): put each candidate in the pronoun's place and compare
how likely the model finds the rest of the sentence. With *tired* the model prefers "the animal was too tired";
with *wide* it prefers "the street was too wide". By this measure SmolLM2 resolves the sentence both ways.
""",
    ),
    (
        "code",
        """
def log_prob(prefix: str, rest: str) -> float:
    \"\"\"Log-probability of ``rest`` after ``prefix``, summed over its tokens.\"\"\"
    ids = model.to_tokens(prefix + rest).ids
    start = model.to_tokens(prefix).ids.shape[1]
    logp = model(ids).log_softmax(dim=-1)[0]  # [pos, d_vocab]
    return float(sum(logp[i - 1, ids[0, i]] for i in range(start, ids.shape[1])))


prefix = "The animal didn't cross the street because the {}"
preference = {
    adjective: log_prob(prefix.format("animal"), f" was too {adjective}")
    - log_prob(prefix.format("street"), f" was too {adjective}")
    for adjective in ("tired", "wide")
}
print(preference)  # > 0: the animal reading is more likely
assert preference["tired"] > 0 > preference["wide"]
""",
    ),
    (
        "md",
        """
## Patching a head

Which components carry the adjective's effect? We ask a question after each sentence and measure the logit of
" animal" minus that of " street" as the answer. The model prefers " animal" after both sentences, but by less
after the *wide* one. *Activation patching* runs the *wide* prompt while copying one head's output from the
*tired* run, and reports the share of the gap between the two that comes back.

Each head of layers 20 to 23 in turn (a sweep of every layer takes a few minutes on a CPU): head 22.8 alone
recovers more than a third of the gap, more than any other head there.
""",
    ),
    (
        "code",
        """
question = " What was too {}? The"
clean = model.to_tokens(tired + question.format("tired")).ids
corrupt = model.to_tokens(wide + question.format("wide")).ids
assert clean.shape == corrupt.shape  # the positions line up
animal_id, street_id = (int(model.to_tokens(w, prepend_bos=False).ids[0, 0]) for w in (" animal", " street"))


def animal_over_street(logits: torch.Tensor, batch) -> torch.Tensor:
    return logits[:, -1, animal_id] - logits[:, -1, street_id]  # one value per row; patch averages them


heads = [f"blocks.{n}.attn.hook_z" for n in range(20, 24)]
frame = patch(model, clean, corrupt, heads, animal_over_street, by="head")
print("tired:", round(frame.attrs["clean_metric"], 2), " wide:", round(frame.attrs["corrupt_metric"], 2))
top = frame.sort_values("value", ascending=False).head(5)
print(top[["layer", "head", "value"]].to_string(index=False))
assert frame.attrs["clean_metric"] > frame.attrs["corrupt_metric"] > 0
assert (top.iloc[0]["layer"], top.iloc[0]["head"]) == (22, 8) and top.iloc[0]["value"] > 1 / 3
""",
    ),
    (
        "md",
        """
## Where next

- Every hook name and shape: [docs/hooks.md](../hooks.md); patching, ablation, attribution and probes:
  [docs/analysis.md](../analysis.md).
- QK attribution (transcoder features as parts, the explainer's "Why here" panel):
  [docs/qk-attribution.md](../qk-attribution.md).
- The coreference study runs these measurements over many sentences, with intervals and baselines:
  `interp study coreference` ([studies/coreference/README.md](../../studies/coreference/README.md)).
- The second tutorial goes from sparse features to steering and circuits:
  [02-features-to-circuits.ipynb](02-features-to-circuits.ipynb).
""",
    ),
]
