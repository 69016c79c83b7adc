"""The coreference report's attention line says "above chance" only where the held-out interval excludes 0.5."""

import numpy as np
import pandas as pd
import pytest

from interp.analysis import binomial_test, bootstrap_mean_interval, holm, sign_flip_test
from studies.coreference import attention
from studies.coreference.findings import _heads


def _row(layer, head, acc, low, high, p_holm, above):
    return {"query": "pronoun", "by": "weight", "rank": 1, "layer": layer, "head": head,
            "test_accuracy": acc, "test_ci_low": low, "test_ci_high": high, "test_n": 120, "p_holm": p_holm,
            "above_chance": above}  # fmt: skip


def test_a_best_head_at_chance_is_not_called_above_chance():
    # The old line: "2 of 40 selected heads attend to the referent above chance ...; the best, L21H7 ... 0.50
    # [0.42, 0.58]": the head named sat at chance under a sentence saying "above chance".
    heads = pd.DataFrame(
        [_row(21, 7, 0.50, 0.42, 0.58, 0.01, False), _row(3, 1, 0.47, 0.40, 0.55, 0.02, False)]
    )
    line = _heads(heads, "winograd")
    assert "no head attends to the referent above chance (0.5)" in line
    assert "L21H7" in line and "ranked first by accuracy on the selection schemas" in line
    assert line.endswith("at chance.")


def test_above_chance_names_the_best_held_out_head_among_those_that_pass():
    heads = pd.DataFrame(
        [_row(21, 7, 0.50, 0.42, 0.58, 0.01, False), _row(3, 1, 0.64, 0.55, 0.72, 0.001, True),
         _row(4, 2, 0.70, 0.61, 0.79, 0.0001, True)]
    )  # fmt: skip
    line = _heads(heads, "winograd")
    assert line.startswith(
        "winograd: 2 of the 3 selected heads (2 of 3 tests, by query position and measure)"
    )
    assert "attend to the referent above chance (0.5)" in line
    assert "L4H2 from pronoun (weight), 0.70 [0.61, 0.79]" in line and "L21H7" not in line


def test_held_out_interval_resamples_schemas_and_gates_above_chance():
    # 24 test schemas of two twins; head (0, 0) is right in exactly one twin of every schema (as every head is
    # before the switch word in a causal model), head (0, 1) in both twins of 20 schemas and neither of 4.
    n = 48
    schema = np.repeat(np.arange(24), 2)
    right = np.zeros((2 * n, 1, 2, 1, 2))  # [item, query, by, layer, head]; the first n items select
    right[:n, :, :, 0, 1] = 1.0
    right[n:, :, :, 0, 0] = np.tile([1.0, 0.0], 24)[:, None, None]
    right[n:, :, :, 0, 1] = np.repeat((np.arange(24) < 20).astype(float), 2)[:, None, None]
    margin = right - 0.5
    select = np.arange(2 * n) < n
    groups = np.concatenate([100 + schema, schema])
    table = attention.select_and_test(right, margin, select, ["pronoun"], top_k=2, groups=groups, seed=0)
    by_head = table[table["by"] == "weight"].set_index("head")
    assert by_head.loc[0, "test_ci_low"] == by_head.loc[0, "test_ci_high"] == 0.5  # twins together: no spread
    assert by_head.loc[0, "test_schemas"] == 24 and not by_head.loc[0, "above_chance"]
    values = right[n:, 0, 0, 0, 1]
    _, low, high = bootstrap_mean_interval(values, 2000, 0, groups=schema)
    assert (by_head.loc[1, "test_ci_low"], by_head.loc[1, "test_ci_high"]) == (low, high)
    assert by_head.loc[1, "above_chance"]
    # The p-value counts schemas, not twins: 20 of 24 units, as the binomial test over schemas has it (each
    # schema's two twins agree, so its unit is +1 or -1), not the 40 of 48 items counted as independent trials.
    assert by_head.loc[1, "p"] == sign_flip_test(values, 0.5, groups=schema)
    assert by_head.loc[1, "p"] == pytest.approx(binomial_test(20, 24), rel=1e-12)
    assert binomial_test(40, 48) < by_head.loc[1, "p"] / 10
    # Holm runs over every test in the table (two heads by two measures), not per measure.
    assert len(table) == 4
    assert table["p_holm"].tolist() == pytest.approx(holm(table["p"].tolist()))


def test_behaviour_intervals_resample_schemas_and_pairs_carry_their_chance():
    from studies.coreference.behaviour import agreement_table

    # 12 schemas of two twins; the model gets the first twin of every schema right and the second of 3
    records = []
    for s in range(12):
        for twin in range(2):
            right = twin == 0 or s < 3
            records.append({"id": f"{s}{'ab'[twin]}", "schema_id": f"s{s}", "correct": right, "targets": [0, 1],
                            "two_people": False, "antecedent_is_recent": True})  # fmt: skip
    pairs = [(2 * s, 2 * s + 1) for s in range(12)]
    row = agreement_table(records, pairs).iloc[0]
    values = [float(r["correct"]) for r in records]
    schemas = [r["schema_id"] for r in records]
    assert (row["ci_low"], row["ci_high"]) == bootstrap_mean_interval(values, 2000, 0, groups=schemas)[1:]
    assert (row["pair_accuracy"], row["pair_chance"], row["chance"]) == (0.25, 0.25, 0.5)


def test_a_head_passing_by_weight_and_by_norm_counts_once():
    rows = [_row(17, 0, 0.61, 0.56, 0.68, 0.045, True), _row(17, 0, 0.61, 0.56, 0.68, 0.045, True),
            _row(21, 7, 0.50, 0.50, 0.50, 1.0, False)]  # fmt: skip
    line = _heads(pd.DataFrame(rows), "winograd")
    assert line.startswith("winograd: 1 of the 2 selected heads (2 of 3 tests")


def _table(plan, above=(), pronoun_first=(21, 7)):
    """A heads table as select_and_test writes it: ``plan`` maps (query, by) to five head numbers (layer = head
    number, head = 0, except ``pronoun_first``); ``above`` lists the (query, by, number) tests that pass."""
    rows = []
    for (query, by), numbers in plan.items():
        for rank, number in enumerate(numbers, start=1):
            layer, head = pronoun_first if (query, rank) == ("pronoun", 1) else (number, 0)
            passed = (query, by, number) in above
            blind = query == "pronoun"
            acc, low, high = (0.61, 0.56, 0.68) if passed else (0.5, 0.5, 0.5) if blind else (0.52, 0.45, 0.6)
            rows.append({"query": query, "by": by, "rank": rank, "layer": layer, "head": head,
                         "select_accuracy": 0.9 - 0.01 * rank - (0.05 if query == "final" else 0),
                         "test_accuracy": acc, "test_ci_low": low, "test_ci_high": high,
                         "test_n": 142, "test_schemas": 71, "p": 0.001 if passed else 0.5,
                         "p_holm": 0.034 if passed else 1.0, "above_chance": passed})  # fmt: skip
    return pd.DataFrame(rows)


# Winograd as the report had it: 40 tests of 31 distinct heads (a head tested by weight and by norm counts once),
# one passing, and the pronoun's tests at 0.50 [0.50, 0.50] by construction, L21H7 ranked first among them.
WINOGRAD = {
    ("pronoun", "weight"): [1, 2, 3, 4, 5], ("pronoun", "norm"): [1, 2, 3, 4, 5],
    ("switch", "weight"): [6, 7, 8, 9, 10], ("switch", "norm"): [17, 7, 11, 12, 13],
    ("end", "weight"): [14, 15, 16, 18, 19], ("end", "norm"): [20, 21, 22, 23, 24],
    ("final", "weight"): [25, 26, 27, 28, 29], ("final", "norm"): [25, 26, 27, 31, 32],
}  # fmt: skip
TWINS = {q: {"pairs_after": 141, "pairs_before": 0, "mass_after": 0.0 if q == "pronoun" else 0.4,
             "mass_before": 0.0} for q in ("pronoun", "switch", "end", "final")}  # fmt: skip


def test_the_summary_and_the_section_count_heads_and_tests_in_the_same_words():
    from studies.coreference.findings import blind_queries
    from studies.coreference.report import _heads_text

    heads = _table(WINOGRAD, above={("switch", "norm", 17)})
    blind = blind_queries(TWINS)
    assert blind == ["pronoun"]
    summary, section = _heads(heads, "winograd", blind), _heads_text(heads, blind, causal=True)
    counts = (
        "1 of the 31 selected heads (1 of 40 tests, by query position and measure) attend to the referent"
    )
    assert counts in summary and counts in section  # the old section said "1 of 40 selected heads"
    assert "L17H0 from switch (norm), 0.61" in summary
    assert "The highest held-out accuracy among them: L17H0 from switch (norm), held out 0.61" in section
    assert "L21H7" not in summary and "L21H7" not in section  # the pronoun's first, at 0.50 by construction
    assert (
        "From the pronoun position no head's attention differs between twins (in a causal model, they come "
        "before the switch word), so each of its 10 tests scores 0.50 by construction"
    ) in section
    # agreement as the report had it: 10 tests of 8 distinct heads, 5 tests of 4 heads passing
    plan = {("final", "weight"): [1, 2, 3, 4, 5], ("final", "norm"): [1, 2, 6, 7, 8]}
    passing = {("final", "weight", 1), ("final", "weight", 2), ("final", "weight", 3), ("final", "norm", 1),
               ("final", "norm", 6)}  # fmt: skip
    heads = _table(plan, above=passing)
    counts = "4 of the 8 selected heads (5 of 10 tests, by query position and measure) attend to the referent"
    assert counts in _heads(heads, "agreement") and counts in _heads_text(heads, [], causal=True)


def test_with_no_head_above_chance_both_lead_with_the_first_ranked_where_the_switch_word_is_seen():
    from studies.coreference.report import _heads_text

    heads = _table(WINOGRAD)
    summary, section = _heads(heads, "winograd", ["pronoun"]), _heads_text(heads, ["pronoun"], causal=True)
    assert (
        "no head attends to the referent above chance (0.5) on held-out schemas (0 of the 31 selected"
        in summary
    )
    assert summary.startswith("winograd: no head attends") and section.startswith("No head attends")
    # switch/weight rank 1 has the highest selection accuracy outside the pronoun (final's are lower)
    assert "at a position that can see the switch word, L6H0 from switch (weight), scores 0.52" in summary
    assert "Ranked first on the selection schemas among the positions that can see the switch word: L6H0 from " \
           "switch (weight), held out 0.52 [0.45, 0.60]" in section  # fmt: skip
    assert "L21H7" not in summary + section
    only_blind = heads[heads["query"] == "pronoun"]
    assert _heads(only_blind, "winograd", ["pronoun"]).endswith("scores 0.5 by construction (10 tests).")


class _Cards:
    """A report that records what the behaviour section adds."""

    def __init__(self):
        self.texts, self.headlines, self.captions = [], [], []

    def add_table(self, name, table, caption="", **_):
        self.captions.append(caption)

    def add_text(self, text):
        self.texts.append(text)

    def add_headline(self, title, value, ci=None, note=""):
        self.headlines.append((title, value, ci, note))


def test_the_agreement_headline_and_verdicts_carry_the_tables_chance_level():
    from studies.coreference.behaviour import agreement_table
    from studies.coreference.report import _behaviour_section

    records = [{"id": f"{s}{t}", "schema_id": f"s{s}", "correct": t == "a" or s < 4, "targets": [0, 1, 2],
                "two_people": False, "antecedent_is_recent": True} for s in range(12) for t in "ab"]  # fmt: skip
    table = agreement_table(records, [(2 * s, 2 * s + 1) for s in range(12)])
    table["bos_prepended"] = True
    cards = _Cards()
    _behaviour_section(cards, table, "m", "three", "agreement")
    ((title, value, ci, note),) = cards.headlines
    assert note == "95% bootstrap over schemas, chance 0.333333" and value == round(16 / 24, 3)
    assert "(chance 0.333333; pair accuracy" in cards.captions[0]
    assert cards.texts[0] == f"m is above chance on three (model, all prompts): 0.67 [{ci[0]:.2f}, {ci[1]:.2f}] " \
                             "(chance 0.333333, n = 24)."  # fmt: skip


def test_a_head_biased_to_one_candidate_is_at_chance_by_accuracy_and_sensitive_by_its_twin_difference():
    # 24 test pairs (twins 2s, 2s + 1; twin a's referent is candidate 0, twin b's candidate 1). Head (0, 0) gives
    # candidate 0 more mass in both twins, 0.3 more in twin a than in twin b: right in one twin of each pair
    # (accuracy 0.5), its mass moved toward the referent by the switch word in every pair. Head (0, 1) moves
    # nothing: the same margins in both twins.
    from studies.coreference.findings import sensitivity_line

    n = 48
    schema = np.repeat(np.arange(24), 2)
    margin = np.zeros((2 * n, 1, 2, 1, 2))  # toward each twin's own referent
    twin_b = np.arange(2 * n) % 2 == 1
    margin[:, :, :, 0, 0] = np.where(twin_b, -0.35, 0.65)[:, None, None]  # candidate 0: +0.5 +- 0.15
    margin[:, :, :, 0, 1] = np.where(twin_b, 0.2, -0.2)[:, None, None]
    right = (margin > 0).astype(float)
    select = np.arange(2 * n) < n
    groups = np.concatenate([100 + schema, schema])
    pairs = [(2 * s, 2 * s + 1) for s in range(48)]
    table = attention.select_and_test(
        right, margin, select, ["switch"], top_k=2, groups=groups, seed=0, pairs=pairs
    )
    by_head = table[table["by"] == "weight"].set_index("head")
    assert by_head.loc[0, "test_accuracy"] == 0.5 and not by_head.loc[0, "above_chance"]
    assert by_head.loc[0, "sens"] == pytest.approx(0.3) and by_head.loc[0, "sens_pairs"] == 24
    assert by_head.loc[0, "sensitive"] and by_head.loc[0, "sens_low"] > 0
    assert by_head.loc[1, "sens"] == pytest.approx(0.0) and not by_head.loc[1, "sensitive"]
    assert table["sens_p_holm"].tolist() == pytest.approx(holm(table["sens_p"].tolist()))
    line = sensitivity_line(table)
    assert "2 of 4 tests sensitive" in line and "L0H0 from switch" in line and "+0.300" in line
