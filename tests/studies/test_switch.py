"""Switch sensitivity and bias (studies/data/switch.py): the per-pair numbers against a naive computation, the
identity that ties them to "right in both twins", and the summary on planted data sets whose answer is known."""

import doctest
import itertools

import numpy as np
import pytest

from studies.data import switch
from studies.data.switch import summarise, switch_from_margins, switch_pair


def test_examples_in_the_docstrings_hold():
    result = doctest.testmod(switch, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 4 and result.failed == 0


def test_a_pair_is_the_signed_twin_difference_and_the_mean_preference():
    # "she" - "he" is 1.5 in the feminine twin (a) and -0.5 in the masculine one (b)
    pair = switch_pair(1.5, -0.5, 0)
    assert pair.sensitivity == pytest.approx(2.0)  # (she - he | a) - (she - he | b)
    assert pair.bias == pytest.approx(0.5)  # (1.5 + -0.5) / 2, toward "she"
    assert pair.right_both
    # twin a expects label 1: the difference is taken toward label 1, the bias stays toward label 0
    flipped = switch_pair(-0.5, 1.5, 1)
    assert flipped.sensitivity == pytest.approx(2.0) and flipped.bias == pytest.approx(0.5)


def test_the_seed_pair_is_sensitive_and_biased_but_not_right_in_both():
    # animal - street 7.89 after "tired" (expects the animal) and 7.37 after "wide" (expects the street)
    pair = switch_pair(7.89, 7.37, 0)
    assert pair.sensitivity == pytest.approx(0.52)
    assert pair.bias == pytest.approx(7.63)
    assert not pair.right_both


def test_right_in_both_is_exactly_half_the_sensitivity_above_the_size_of_the_bias():
    rng = np.random.default_rng(0)
    for a, b, answer in zip(
        rng.normal(0, 2, 500), rng.normal(0, 2, 500), rng.integers(0, 2, 500), strict=True
    ):
        pair = switch_pair(float(a), float(b), int(answer))
        margin_a = a if answer == 0 else -a  # naive: each twin toward its own answer
        margin_b = -b if answer == 0 else b
        assert pair.right_both == (margin_a > 0 and margin_b > 0)
        assert pair.right_both == (pair.sensitivity / 2 > abs(pair.bias))
        assert pair.sensitivity == pytest.approx(margin_a + margin_b)


def test_margins_give_the_same_pair_as_preferences():
    for a, b, answer in itertools.product((-2.0, 0.3, 4.0), (-1.0, 0.5), (0, 1)):
        margin_a = a if answer == 0 else -a
        margin_b = -b if answer == 0 else b
        assert switch_from_margins(margin_a, margin_b, answer) == switch_pair(a, b, answer)


def test_a_sensitive_but_biased_model_is_shown_sensitive_with_no_pair_right_in_both():
    # every pair moves 0.5 toward the expected answer, under a bias of 3 toward label 0: right in no pair
    pairs = [switch_pair(3.25, 2.75, 0) if k % 2 else switch_pair(2.75, 3.25, 1) for k in range(8)]
    s = summarise(pairs, labels=('"animal"', '"street"'), unit="nats")
    assert s.sensitivity.estimate == pytest.approx(0.5)
    assert s.sensitivity.p_value == pytest.approx(2 / 2**8)  # all 8 positive: 2 of the 256 flips as extreme
    assert s.shown and s.sensitive == 8
    assert s.bias.estimate == pytest.approx(3.0) and s.bias.interval.low > 0
    assert s.right_both == 0
    assert s.right_both_p == pytest.approx(0.75**8 * 2, rel=0.5)  # far from evidence against chance
    text = s.verdict()
    assert text.startswith("The model is sensitive to the switch word: the twin difference is +0.50")
    assert 'a bias toward "animal": +3.00' in text and "0 of 8 pairs" in text


def test_an_insensitive_model_is_not_shown_sensitive():
    # differences symmetric around 0: no sensitivity
    diffs = [1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 0.2, -0.2]
    pairs = [switch_pair(d / 2, -d / 2, 0) for d in diffs]
    s = summarise(pairs)
    assert s.sensitivity.estimate == pytest.approx(0.0)
    assert s.sensitivity.p_value == pytest.approx(1.0)
    assert not s.shown
    assert "shows no sensitivity to the switch word" in s.verdict()


def test_a_model_moved_against_the_switch_word_is_said_to_be():
    pairs = [switch_pair(-d, d, 0) for d in (0.4, 0.6, 0.5, 0.9, 0.3, 0.7)]  # every twin wrong
    s = summarise(pairs)
    assert s.sensitivity.interval.high < 0
    assert "moves against the switch word" in s.verdict()


def test_groups_flip_whole_schemas():
    pairs = [switch_pair(1.0, -1.0, 0)] * 6  # six positive pairs in three schemas: 2 of 8 flips as extreme
    s = summarise(pairs, groups=[0, 0, 1, 1, 2, 2])
    assert s.sensitivity.p_value == pytest.approx(0.25)
    assert s.sensitivity.n_units == 3


def test_one_pair_gives_numbers_and_no_test():
    s = summarise([switch_pair(7.89, 7.37, 0)], labels=('"animal"', '"street"'))
    assert s.sensitivity.p_value == 1.0
    assert not s.shown
    assert "one twin pair: numbers, no test" in s.verdict()
    assert s.to_json()["sensitivity"]["interval"]["ci"] == ["-inf", "inf"]


def test_bad_input_is_refused_in_one_line():
    with pytest.raises(ValueError, match="answer_a=2; give the label twin a expects, 0 or 1"):
        switch_pair(1.0, 2.0, 2)
    with pytest.raises(ValueError, match="must be finite"):
        switch_pair(float("nan"), 2.0, 0)
    with pytest.raises(ValueError, match="no twin pairs to summarise"):
        summarise([])
    with pytest.raises(ValueError, match="groups has 1 labels for 2 pairs"):
        summarise([switch_pair(1.0, 0.0, 0)] * 2, groups=[0])


def test_twins_read_before_the_switch_word_give_no_sensitivity_and_no_error():
    # a causal model read at the pronoun, before the switch word: both twins have the same preference, so
    # every difference is exactly 0 (the sign-flip test once took such values for right-or-wrong ones)
    pairs = [switch_pair(p, p, k % 2) for k, p in enumerate((0.4, -1.2, 2.0, 0.7))]
    s = summarise(pairs)
    assert s.sensitivity.estimate == 0.0 and s.sensitivity.p_value == 1.0
    assert s.right_both == 0
