import pytest
import torch

from interp.analysis import probe_layers, train_probe, wilson_interval
from interp.analysis.probes import split_by_group
from tests.analysis.models import build


def planted(n: int = 400, d: int = 16, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    features = torch.randn(n, d, generator=generator)
    labels = (features[:, 3] - 0.5 * features[:, 7] > 0).long()
    features[:, 3] += 0.5 * (2 * labels - 1)  # a margin between the classes: separable, not just barely
    return features, labels, torch.arange(n) // 2  # twin pairs share a group


def test_probe_finds_a_planted_feature_and_the_control_does_not():
    features, labels, groups = planted()
    result = train_probe(features, labels, groups)
    assert result.accuracy >= 0.99
    assert result.ci_low <= result.accuracy <= result.ci_high
    assert 0.35 <= result.control_accuracy <= 0.65
    assert result.n_train + result.n_test == 400 and result.n_test == 200


def test_the_interval_counts_held_out_groups_not_items():
    # Noisy labels, so the accuracy is neither 0 nor 1; then every row copied five times into its own group.
    # The copies add no evidence: the probe, its accuracy and its interval stay the same (the interval
    # resamples groups). An interval over items would shrink by about sqrt(5).
    generator = torch.Generator().manual_seed(5)
    features = torch.randn(240, 8, generator=generator)
    labels = ((features[:, 0] + 1.5 * torch.randn(240, generator=generator)) > 0).long()
    groups = torch.arange(240) // 2
    once = train_probe(features, labels, groups, seed=3)
    copied = train_probe(
        features.repeat_interleave(5, 0), labels.repeat_interleave(5), groups.repeat_interleave(5), seed=3
    )
    assert 0.55 < once.accuracy < 0.9 and once.n_test == 120 and copied.n_test == 600
    assert copied.accuracy == pytest.approx(once.accuracy, abs=1e-12)
    assert (copied.ci_low, copied.ci_high) == pytest.approx((once.ci_low, once.ci_high), abs=1e-12)
    items_low, items_high = wilson_interval(round(copied.accuracy * 600), 600)
    assert copied.ci_high - copied.ci_low > 1.8 * (items_high - items_low)
    # The control (its shuffle differs with the row count) is resampled by groups too.
    items_low, items_high = wilson_interval(round(copied.control_accuracy * 600), 600)
    assert copied.control_ci_high - copied.control_ci_low > 1.8 * (items_high - items_low)


def test_group_split_keeps_groups_whole():
    groups = torch.arange(100) // 4
    train, test = split_by_group(groups, 0.3, seed=1)
    assert not set(groups[train].tolist()) & set(groups[test].tolist())
    assert int(test.sum()) == 4 * round(0.3 * 25)


def test_wilson_interval():
    low, high = wilson_interval(50, 100)
    assert (low, high) == pytest.approx((0.4038, 0.5962), abs=1e-4)
    assert wilson_interval(0, 10)[0] == 0 and wilson_interval(10, 10)[1] == 1


def test_probe_errors():
    features, labels, groups = planted(n=20)
    with pytest.raises(ValueError, match="labels has 19 entries but features has 20 rows"):
        train_probe(features, labels[:19], groups)
    with pytest.raises(ValueError, match="single class"):
        train_probe(features, torch.zeros(20), groups)
    with pytest.raises(ValueError, match="groups has 1 distinct"):
        train_probe(features, labels, torch.zeros(20))


def test_probe_layers_reads_token_identity():
    model = build("gpt2")
    generator = torch.Generator().manual_seed(0)
    toks = torch.randint(0, 50, (240, 6), generator=generator)
    positions = torch.randint(0, 6, (240,), generator=generator)
    labels = toks[torch.arange(240), positions] % 2  # parity of the token id: a lookup from the embedding
    frame = probe_layers(
        model, toks, positions, labels, torch.arange(240) // 2, hook="resid_pre", batch_size=100
    )
    assert list(frame["layer"]) == [0, 1]
    assert {"accuracy", "ci_low", "ci_high", "control_accuracy", "n_test"} <= set(frame.columns)
    assert frame.loc[0, "accuracy"] > 0.8 and frame.loc[0, "control_accuracy"] < 0.7
    with pytest.raises(IndexError, match="position 6 is out of range"):
        probe_layers(model, toks[:4], torch.tensor([0, 1, 2, 6]), labels[:4], [0, 0, 1, 1])
