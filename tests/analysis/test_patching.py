import pandas as pd
import pytest
import torch

from interp import HookedTransformer
from interp.analysis import Batch, attribution_patch, logit_difference, patch, run_patched, verify_top_k
from tests.analysis.models import CONFIGS, build, tokens


@pytest.fixture(autouse=True)
def _no_grad():
    """These tests run without autograd, as analysis code usually does; the mode ends with each test."""
    with torch.no_grad():
        yield


def logit_diff(logits: torch.Tensor, batch: Batch) -> torch.Tensor:
    return logits[:, -1, 3] - logits[:, -1, 7]


@pytest.fixture(scope="module")
def setting():
    model = build("gpt2")
    return model, tokens(seed=1), tokens(seed=2)


def test_patching_everything_gives_the_source_and_nothing_the_target(setting):
    model, clean, corrupt = setting
    clean_logits, corrupt_logits = model(clean), model(corrupt)
    everything = run_patched(model, corrupt, clean, "blocks.0.hook_resid_pre")
    torch.testing.assert_close(everything, clean_logits, atol=0, rtol=0)
    nothing = run_patched(model, corrupt, clean, "blocks.0.hook_resid_pre", positions=[])
    torch.testing.assert_close(nothing, corrupt_logits, atol=0, rtol=0)
    frame = patch(model, clean, corrupt, "blocks.0.hook_resid_pre", logit_diff, by="layer")
    assert frame["value"].tolist() == pytest.approx([1.0], abs=1e-6)


def test_batched_patches_match_one_at_a_time(setting):
    model, clean, corrupt = setting
    frame = patch(
        model, clean, corrupt, "blocks.{layer}.attn.hook_z", logit_diff, by="head_position", batch_size=7
    )
    assert list(frame.columns) == ["hook", "layer", "position", "head", "delta", "value"]
    assert len(frame) == 2 * 8 * 4
    corrupt_metric = float(logit_diff(model(corrupt), Batch(corrupt)).mean())
    for row in frame.sample(6, random_state=0).itertuples():
        logits = run_patched(model, corrupt, clean, row.hook, positions=[row.position], heads=[row.head])
        assert float(logit_diff(logits, Batch(corrupt)).mean()) - corrupt_metric == pytest.approx(
            row.delta, abs=1e-5
        )
    clean_metric = frame.attrs["clean_metric"]
    assert frame["value"].to_numpy() == pytest.approx(
        frame["delta"].to_numpy() / (clean_metric - corrupt_metric)
    )


def test_resid_patching_recovers_at_the_last_position(setting):
    model, clean, corrupt = setting
    frame = patch(model, clean, corrupt, "blocks.*.hook_resid_post", logit_diff)
    assert frame["layer"].tolist() == [0] * 8 + [1] * 8
    # after the last block only the last position reaches the metric, and it carries all of it
    final = frame[frame["layer"] == 1]
    assert final["value"].tolist() == pytest.approx([0.0] * 7 + [1.0], abs=1e-5)


def test_attribution_agrees_with_patching(setting):
    _, clean, corrupt = setting
    model = HookedTransformer(CONFIGS["gpt2"])  # the default init (std 0.02) is close to linear
    hooks = "blocks.{layer}.attn.hook_z"
    exact = patch(model, clean, corrupt, hooks, logit_diff, by="head")
    approx = attribution_patch(model, clean, corrupt, logit_diff, hooks, by="head")
    assert list(approx.columns) == list(exact.columns)
    assert approx.attrs["corrupt_metric"] == pytest.approx(exact.attrs["corrupt_metric"], abs=1e-5)
    spearman = exact["delta"].corr(approx["delta"], method="spearman")
    assert spearman > 0.8, spearman
    assert exact["delta"].abs().idxmax() == approx["delta"].abs().idxmax()
    checked = verify_top_k(model, clean, corrupt, logit_diff, approx, k=3)
    top = exact.reindex(exact["delta"].abs().sort_values(ascending=False).index).head(3)
    assert checked["patched_delta"].to_numpy() == pytest.approx(top["delta"].to_numpy(), abs=1e-5)
    assert {"attribution", "patched", "attribution_delta", "patched_delta"} <= set(checked.columns)


@pytest.mark.parametrize("hook", ["unembed.hook_in", "ln_final.hook_normalized"])
def test_attribution_is_exact_where_the_metric_is_linear(setting, hook):
    model, clean, corrupt = setting
    exact = patch(model, clean, corrupt, hook, logit_diff)
    approx = attribution_patch(model, clean, corrupt, logit_diff, hook)
    assert approx["delta"].to_numpy() == pytest.approx(exact["delta"].to_numpy(), abs=1e-4)
    assert approx["delta"][:7].abs().max() == 0 and exact["delta"][7] != 0


@pytest.mark.parametrize(
    "hook", ["blocks.1.attn.hook_pattern", "blocks.0.attn.hook_z", "blocks.0.attn.hook_v"]
)
def test_attribution_slots_are_labelled_consistently(setting, hook):
    model, clean, corrupt = setting
    grid = attribution_patch(model, clean, corrupt, logit_diff, hook, by="head_position")
    assert len(grid) == 8 * 4
    for by, key in (("head", "head"), ("position", "position")):
        total = attribution_patch(model, clean, corrupt, logit_diff, hook, by=by)
        summed = grid.groupby(key)["delta"].sum()
        assert summed.to_numpy() == pytest.approx(total.set_index(key)["delta"].to_numpy(), abs=1e-5)
    whole = attribution_patch(model, clean, corrupt, logit_diff, hook, by="layer")
    assert whole["delta"].item() == pytest.approx(grid["delta"].sum(), abs=1e-5)


def test_key_value_hooks_are_patched_per_key_value_head():
    llama = build("llama")  # 4 query heads sharing 2 key/value heads
    clean, corrupt = tokens(seed=1), tokens(seed=2)
    exact = patch(llama, clean, corrupt, "blocks.0.attn.hook_v", logit_diff, by="head")
    approx = attribution_patch(llama, clean, corrupt, logit_diff, "blocks.0.attn.hook_v", by="head")
    assert exact["head"].tolist() == approx["head"].tolist() == [0, 1]
    both = run_patched(llama, corrupt, clean, "blocks.0.attn.hook_v", heads=[0, 1])
    torch.testing.assert_close(
        both, run_patched(llama, corrupt, clean, "blocks.0.attn.hook_v"), atol=0, rtol=0
    )


def test_the_ready_made_logit_difference_reads_labels_as_a_metric_written_here(setting):
    model, clean, corrupt = setting
    labels = {"answer": torch.full((2,), 3), "foil": torch.full((2,), 7)}
    mine = patch(model, clean, corrupt, "blocks.0.hook_resid_pre", logit_diff)
    ready = patch(model, clean, corrupt, "blocks.0.hook_resid_pre", logit_difference, labels=labels)
    assert ready["delta"].to_numpy() == pytest.approx(mine["delta"].to_numpy(), abs=1e-5)
    approx = attribution_patch(
        model, clean, corrupt, logit_difference, "blocks.0.hook_resid_pre", labels=labels
    )
    assert approx.attrs["clean_metric"] == pytest.approx(mine.attrs["clean_metric"], abs=1e-5)


def test_attribution_leaves_parameter_grads_alone(setting):
    model, clean, corrupt = setting
    attribution_patch(model, clean, corrupt, logit_diff, "blocks.0.hook_resid_pre")
    assert all(p.grad is None for p in model.parameters())


def test_patching_errors(setting):
    model, clean, corrupt = setting
    with pytest.raises(
        ValueError, match=r"clean tokens have shape \(2, 8\) but corrupt tokens have shape \(2, 7\)"
    ):
        patch(model, clean, corrupt[:, :7], "blocks.0.hook_resid_pre", logit_diff)
    with pytest.raises(ValueError, match=r"returned shape \[\] on the clean run.*a mean over the batch"):
        patch(model, clean, corrupt, "blocks.0.hook_resid_pre", lambda logits, batch: logits[:, -1, 3].mean())
    with pytest.raises(ValueError, match=r"returned shape \[\] on the clean run.*a mean over the batch"):
        attribution_patch(
            model, clean, corrupt, lambda logits, batch: logits[:, -1, 3].mean(), "blocks.0.hook_resid_pre"
        )
    with pytest.raises(TypeError, match=r"cannot be called as metric\(logits, batch\).*write e\.g\."):
        patch(model, clean, corrupt, "blocks.0.hook_resid_pre", lambda logits: logits[:, -1, 3].mean())
    with pytest.raises(
        TypeError, match=r"the metric <lambda>\(logits\) cannot be called as metric\(logits, batch\)"
    ):
        verify_top_k(model, clean, corrupt, lambda logits: logits[:, -1, 3].mean(), pd.DataFrame())
    with pytest.raises(IndexError, match="position 8 is out of range"):
        patch(model, clean, corrupt, "blocks.0.hook_resid_pre", logit_diff, positions=[8])
    with pytest.raises(IndexError, match="head 4 is out of range"):
        patch(model, clean, corrupt, "blocks.0.attn.hook_z", logit_diff, by="head", heads=[4])
    with pytest.raises(ValueError, match="needs an activation with a head axis"):
        patch(model, clean, corrupt, "blocks.0.hook_resid_pre", logit_diff, by="head")
    with pytest.raises(ValueError, match="by='neuron'"):
        patch(model, clean, corrupt, "blocks.0.hook_resid_pre", logit_diff, by="neuron")
    with pytest.raises(KeyError, match="did you mean"):
        patch(model, clean, corrupt, "blocks.0.hook_resid_pr", logit_diff)
    cache = model.run_with_cache(clean[:1], names_filter="blocks.0.hook_resid_pre")[1]
    with pytest.raises(ValueError, match="source activation of 'blocks.0.hook_resid_pre' has shape"):
        run_patched(model, corrupt, cache, "blocks.0.hook_resid_pre")


def test_identical_runs_warn_and_give_nan(setting):
    model, clean, _ = setting
    with pytest.warns(UserWarning, match="normalised recovery is undefined"):
        frame = patch(model, clean, clean, "blocks.0.hook_resid_pre", logit_diff, positions=[0])
    assert pd.isna(frame["value"]).all() and (frame["delta"] == 0).all()


def test_normalised_effect_is_one_ratio_with_one_zero_test():
    import numpy as np
    import pandas as pd

    from interp.analysis import normalised_effect

    assert normalised_effect(1.5, 4.0, 1.0) == 0.5
    frame = normalised_effect(pd.Series([0.0, 3.0]), 4.0, 1.0)
    assert frame.tolist() == [0.0, 1.0]
    for clean, corrupt in ((2.0, 2.0), (1e6, 1e6 - 1e-7)):  # equal, and apart by less than the tolerance
        with pytest.warns(UserWarning, match="so the effect is undefined"):
            assert np.isnan(normalised_effect(1.0, clean, corrupt, what="the effect"))
    assert normalised_effect(1e-9, 1e-9, 0.0) == 1.0  # a small gap of small metrics is still a gap
    import doctest

    from interp.analysis import effect

    assert doctest.testmod(effect).failed == 0
