"""Every number the tutorials' prose states, and the code in the notebook that checks it.

A claim pairs words of a markdown cell that state a number with a line of the notebook's code: for a result,
an ``assert`` whose tolerance would catch a different result (a stated "about 0.76" is checked to within 0.02,
"more than a third" as ``> 1 / 3``); for a setting (a layer, a head, a size the code chooses), the line that
sets it. ``tests/docs/test_tutorials.py`` checks that every number in the prose is covered by a claim of its
cell, that each claim's code is in the notebook, and (running the notebooks) that the asserts hold.

A number is a numeral or a word for a quantity: three to twelve, twenty to fifty, hundreds and more, twice,
half, a third, a quarter, a tenth, a twentieth, a dozen ("two" and "one" are left out: the prose says "the two
sentences", "one forward pass" of the pair and the pass it is about, not of a measured count).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Claim:
    """``phrase`` (words of one markdown cell, covering its numbers; runs of white space count as one space) is
    checked by ``code`` (a substring of a line of the same notebook's code; for a result, ``result=True``, of
    an assertion)."""

    phrase: str
    code: str
    result: bool = True


def setting(phrase: str, code: str) -> Claim:
    return Claim(phrase, code, result=False)


CLAIMS: dict[str, list[Claim]] = {
    "01-one-sentence.ipynb": [
        Claim("the sentence is 12 tokens", "len(str_tokens) == 12"),
        Claim('" it" is token 8', "(it, animal, street) == (8, 1, 6)"),
        setting("layer 3's attention", "layer, head = 3, 8"),
        Claim(
            "three query heads sharing each",
            "(cfg.n_layers, cfg.n_heads, cfg.n_kv_heads, cfg.d_head) == (30, 9, 3, 64)",
        ),
        Claim("weights that sum to 1", "torch.testing.assert_close(pattern.sum(-1), torch.ones(12))"),
        setting("head 3.8", "layer, head = 3, 8"),
        Claim("more than twice the weight", "assert row[animal] > 2 * row[street]"),
        setting("after layer 3", "layer, head = 3, 8"),
        setting("entering layer 3", "layer, head = 3, 8"),
        Claim(
            "about 1.1 (6.7 against 5.6)", "abs(why.total - 1.1) < 0.05 and abs(why.first.score - 6.7) < 0.05"
        ),
        Claim("about 1.1 (6.7 against 5.6)", "abs(why.second.score - 5.6) < 0.05"),
        Claim("what head 1.6 carried", 'key_heads.iloc[0]["component"] == \'L1H6@" cross"\''),
        Claim("heads of layers 1 and 2", 'set(key_heads.head(4)["layer"]) <= {1, 2}'),
        Claim(
            "about 0.05 on a score of 2.4",
            "abs(abs(stop.total) - 0.05) < 0.01 and abs(stop.first.score - 2.4) < 0.05",
        ),
        Claim(
            "head 2.1 reading the adjective",
            '(top["kind"], top["layer"], top["head"], top["at"]) == ("head", 2, 1, adjective)',
        ),
        setting("layers 20 to 23", 'heads = [f"blocks.{n}.attn.hook_z" for n in range(20, 24)]'),
        Claim("head 22.8 alone", '(top.iloc[0]["layer"], top.iloc[0]["head"]) == (22, 8)'),
        Claim("more than a third of the gap", 'top.iloc[0]["value"] > 1 / 3'),
    ],
    "02-features-to-circuits.ipynb": [
        setting("in two halves, alternately", "build = [pair for i, pair in enumerate(twins) if i % 2 == 0]"),
        Claim("for 74% of the 130 prompts", "len(prompts) == 130 and abs(accuracy - 0.74) < 0.02"),
        Claim(
            'half of them want " she", so always answering " she" would score 50%',
            "float(feminine.float().mean()) == 0.5",
        ),
        setting("after layer 26", 'hook = "blocks.26.hook_resid_post"'),
        setting("(256 latents, 8 active per token)", "d_sae=256, k=8"),
        Claim(
            "It explains 0.64 of the stream's variance", 'abs(quality["explained_variance"][0] - 0.64) < 0.02'
        ),
        Claim("recovers 0.93 of the next-token loss", 'abs(quality["ce_recovered_zero"][0] - 0.93) < 0.02'),
        setting("the build half", "in_build = torch.tensor([i // 2 % 2 == 0 for i in range(len(prompts))])"),
        setting("the test half", "says_feminine[~in_build]"),
        setting("the build half", "in_build = torch.tensor([i // 2 % 2 == 0 for i in range(len(prompts))])"),
        Claim(
            "right on 0.50 of the test half's 64 prompts",
            "int((~in_build).sum()) == 64 and abs(held_out - 0.5) < 0.02",
        ),
        setting("entering block 27", 'site = "blocks.27.hook_resid_pre"'),
        setting("over the build half", '[s["prompt"] for s, _ in build]'),
        setting("Added (twice)", "vector.hook(2.0)"),
        setting("the test half's *he* prompts", 'masculine = model.to_tokens([h["prompt"] for _, h in test]'),
        Claim("on nine in ten or more of the prompts it had right", "flipped > 0.9"),
        Claim("70,651 edges in SmolLM2", "scores.graph.n_edges == 70_651"),
        setting("twelve pairs to score", "scoring, held = pairs_of(aligned[:12]), pairs_of(aligned[12:])"),
        Claim(
            "head 26.2 writing straight to the logits",
            'tuple(strongest.iloc[0][["source", "input"]]) == ("L26.H2", "logits")',
        ),
        setting("The top 30 edges", "circuits = [top_n(scores, n) for n in (30, 300, 3000)]"),
        Claim("about a tenth of it (0.10)", "abs(faithfulness[0] - 0.10) < 0.05"),
        setting("the top 3,000", "circuits = [top_n(scores, n) for n in (30, 300, 3000)]"),
        Claim("about 4% of the 70,651", "round(100 * 3000 / scores.graph.n_edges) == 4"),
        Claim("about nine tenths (0.91)", "abs(faithfulness[2] - 0.91) < 0.05"),
        Claim("on the 19 pairs left to evaluate", "len(aligned) - 12 == 19"),
    ],
    "03-attribution-graphs.ipynb": [
        Claim("for all 30 layers", "tc.layers == list(range(n_layers)) == list(range(30))"),
        setting("on half of the other agreement prompts", "tokens = model.to_tokens(others[::2]"),
        setting("128 TopK features (8 active per token)", "d_sae=128"),
        setting("on 6,000 tokens", "tokens=6_000,"),
        Claim(
            "about 40% of a typical layer's MLP output variance",
            'abs(quality["explained_variance"].median() - 0.40) < 0.03',
        ),
        Claim(
            "recovers about 60% of the next-token loss", 'abs(quality["ce_recovered_zero"][0] - 0.60) < 0.03'
        ),
        setting("at most 8 per layer and position", "k=8,"),
        setting("keeps the 400 features", "max_feature_nodes=400"),
        Claim(
            "is feature 56 of layer 2's transcoder at position 1",
            '{"L2.F56@1", "L29.error@9", "token@2"} <= {str(node) for node in graph.nodes}',
        ),
        Claim(
            "what layer 29's transcoder misses",
            '{"L2.F56@1", "L29.error@9", "token@2"} <= {str(node) for node in graph.nodes}',
        ),
        Claim(
            "four of layer 2's at the first word",
            "all((node.layer, node.position) == (2, 1) for node in first_four)",
        ),
        Claim("ranks only about twentieth", "abs(at_aunt + 1 - 20) <= 3"),
        Claim(
            "completeness is about 0.76 and replacement about 0.4",
            "abs(completeness - 0.76) < 0.02 and abs(replacement - 0.40) < 0.03",
        ),
        setting(
            "carry 80% of the influence (and the edges that carry 98%)",
            "graph.prune(node_threshold=0.8, edge_threshold=0.98)",
        ),
        Claim("by less than half as much", "abs(free_moved) < abs(moved) / 2"),
    ],
    "04-readable-features.ipynb": [
        Claim("for all 30 layers", "tc.layers == list(range(30))"),
        setting("128 TopK features with 8 active per token", "d_sae=128, k=8"),
        setting("trained on 6,000 tokens", "tokens=6_000"),
        Claim("the other 140 passages", "len(dashboard_texts) == 140"),
        Claim("each of the 3,840 features", 'done.n_features == len(index["features"]) == 30 * 128'),
        Claim("here ten features", "len(in_graph) == 10"),
        setting("(ten, top quantile first)", "n_explain=10, n_test=20"),
        setting("on twenty *other* activating examples", "n_explain=10, n_test=20"),
        Claim("0.5 is chance", 'theirs["chance"] == 0.5'),
        Claim("all ten explanations", "copied == 10"),
        Claim("Five features cannot be scored", "len(unscored) == 5"),
        Claim("on a third or more of all tokens", 'rows[f.index]["density"] > 1 / 3 for f in unscored'),
        Claim("no run of 8 tokens", "settings.min_context == 8"),
        Claim("about 0.74, with a 95%", "abs(ours.auc - 0.74) < 0.02"),
        Claim(
            "(about 0.58 to 0.89)",
            "abs(ours.interval[0] - 0.58) < 0.02 and abs(ours.interval[1] - 0.89) < 0.02",
        ),
        Claim("gets about 0.50, its interval holding 0.5", 'abs(theirs["auc"] - 0.50) < 0.02'),
    ],
    "05-why-it-means-animal.ipynb": [
        Claim(
            "by about 7.9 and 7.4 logits",
            'abs(preference["tired"] - 7.9) < 0.05 and abs(preference["wide"] - 7.4) < 0.05',
        ),
        Claim("by about half a logit", 'abs(preference["tired"] - preference["wide"] - 0.5) < 0.05'),
        Claim("at all 30 layers", "tc.layers == list(range(30))"),
        Claim("on 20 King James Bible passages", "len(train_texts) == 20"),
        setting("128 TopK features with 8 active per token", "d_transcoder=128, k=8"),
        setting("trained on 6,000 tokens", "tokens=6_000"),
        Claim("at position 2", "(at_animal, at_street) == (2, 7)"),
        Claim("the three with the largest", "len(explained.heads) == 3"),
        Claim("less than a tenth of each head's query side", "pronoun_and_adjective < 0.1"),
        Claim("less than half of its key side", "at_the_animal < 0.5"),
        Claim("the first two positions", "(at_animal, at_street) == (2, 7)"),
    ],
}
