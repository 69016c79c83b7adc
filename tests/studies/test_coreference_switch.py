"""The coreference study's primary behavioural measure: switch sensitivity and bias per scoring method, on
planted records whose preferences are known, and in the report's lead."""

import pytest

from studies.coreference.findings import add_findings
from studies.coreference.sensitivity import switch_summaries, switch_table


def _resolution(n_pairs: int, bias: float, move: float) -> list[dict]:
    """Twins a (expects candidate 0) and b (expects candidate 1): first minus second candidate is
    ``bias + move / 2`` in a and ``bias - move / 2`` in b, for every scoring method."""
    records = []
    for s in range(n_pairs):
        for twin, answer, pref in (("a", 0, bias + move / 2), ("b", 1, bias - move / 2)):
            scores = [pref - 3.0, -3.0]
            records.append({"id": f"wg-{s}{twin}", "schema_id": f"wg-{s}", "answer": answer,
                            **{m: scores for m in ("full", "partial", "question", "lm_eval")}})  # fmt: skip
    return records


def test_a_biased_but_sensitive_model_is_found_sensitive_with_no_pair_right_in_both():
    # the seed's pattern on 8 pairs: the first candidate preferred by 7.6 in both twins, moved 0.5 by the switch
    records = _resolution(8, bias=7.63, move=0.52)
    pairs = [(2 * s, 2 * s + 1) for s in range(8)]
    found = switch_summaries(records, pairs, "resolution")
    partial = found["partial scoring"]
    assert partial.sensitivity.estimate == pytest.approx(0.52)
    assert partial.sensitivity.p_value == pytest.approx(2 / 256)  # every pair positive: exact sign flips
    assert partial.bias.estimate == pytest.approx(7.63)
    assert partial.right_both == 0 and partial.unit == "nats"
    row = switch_table(found).set_index("method").loc["partial scoring"]
    assert row["sens_low"] > 0 and row["right_both_fraction"] == 0 and row["right_both_chance"] == 0.25


def test_pairs_with_an_unscored_method_are_left_out_of_that_method_only():
    records = _resolution(6, bias=0.0, move=2.0)
    records[0]["lm_eval"] = [float("nan"), -3.0]
    found = switch_summaries(records, [(2 * s, 2 * s + 1) for s in range(6)], "resolution")
    assert found["partial scoring"].n_pairs == 6
    assert found["partial scoring, lm-eval-harness rules"].n_pairs == 5


def test_agreement_uses_the_target_logits_and_a_two_person_subset():
    records = []
    for s in range(7):
        two = s < 3
        for twin, answer, logits in (("a", 0, [2.0, 1.0]), ("b", 1, [1.5, 2.5 + s])):
            records.append({"id": f"ag-{s}{twin}", "schema_id": f"ag-{s}", "answer": answer,
                            "target_logits": logits, "two_people": two})  # fmt: skip
    found = switch_summaries(records, [(2 * s, 2 * s + 1) for s in range(7)], "agreement")
    everyone, two = found["model, all prompts"], found["model, two-person prompts"]
    # she - he: 1.0 in a, 1.5 - (2.5 + s) = -1 - s in b; the difference toward a's answer: 2 + s
    assert everyone.sensitivity.estimate == pytest.approx(sum(2 + s for s in range(7)) / 7)
    assert two.n_pairs == 3 and two.sensitivity.estimate == pytest.approx(3.0)
    assert everyone.right_both == 7 and everyone.unit == "logits"


class _Findings:
    def __init__(self):
        self.lines = []

    def add_finding(self, text, section):
        self.lines.append((section, text))


class _Result:
    name, kind, measured = "winograd", "resolution", []

    def __init__(self, analysis):
        self.analysis = analysis


def test_the_report_leads_each_data_set_with_its_switch_sensitivity():
    records = _resolution(8, bias=7.63, move=0.52)
    found = switch_summaries(records, [(2 * s, 2 * s + 1) for s in range(8)], "resolution")
    report = _Findings()
    add_findings(report, "SmolLM2", [_Result({"switch": found})], causal=False)
    section, text = report.lines[0]
    assert section == "Behaviour: winograd"
    assert text.startswith("winograd (partial scoring): SmolLM2 is sensitive to the switch word: the twin "
                           "difference is +0.52")  # fmt: skip
    assert "a bias toward the first candidate: +7.63" in text and "0 of 8 pairs" in text
