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
    assert "L4H2 from pronoun, 0.70 [0.61, 0.79]" in line and "L21H7" not in line


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
