"""Attribution to features and the error node, and exact patching of features, against direct computations."""

from __future__ import annotations

import torch

from interp.analysis import Batch, attribution_patch
from interp.sae import feature_attribution, patch_features
from interp.sae.evaluate import evaluate
from tests.sae.models import random_sae, tiny_model, tokens

HOOK = "blocks.0.hook_resid_post"


def metric(logits, batch):
    return logits[:, -1, 3] - logits[:, -1, 5]


def test_features_plus_error_add_up_to_the_stream_and_patching_matches_a_direct_edit():
    model = tiny_model()
    clean, corrupt = tokens(2, 6, seed=1), tokens(2, 6, seed=2)
    sae = random_sae(HOOK)
    frame = feature_attribution(model, sae, clean, corrupt, metric)
    assert list(frame["node"])[-1] == "error" and len(frame) == sae.d_sae + 1
    stream = attribution_patch(model, clean, corrupt, metric, HOOK, by="layer")
    torch.testing.assert_close(
        torch.tensor(frame["delta"].sum()), torch.tensor(stream["delta"].iloc[0]), atol=1e-4, rtol=1e-4
    )
    assert frame.attrs["clean_metric"] == float(metric(model(clean), Batch(clean)).mean().detach())

    top = [int(f) for f in frame.iloc[:-1]["delta"].abs().sort_values(ascending=False).index[:3]]
    values = patch_features(model, sae, clean, corrupt, metric, [[top[0]], top])
    _, cache = model.run_with_cache(torch.cat([clean, corrupt]), names_filter=HOOK)
    x_clean, x_corrupt = cache[HOOK].split(2)
    a_clean, a_corrupt = sae.encode(x_clean), sae.encode(x_corrupt)
    for features, value in zip([[top[0]], top], values, strict=True):
        patched = a_corrupt.clone()
        patched[..., features] = a_clean[..., features]
        target = x_corrupt + sae.decode(patched) - sae.decode(a_corrupt)  # the corrupt error kept
        direct = float(
            metric(
                model.run_with_hooks(corrupt, fwd_hooks=[(HOOK, lambda a, h, t=target: t)]), Batch(corrupt)
            )
            .mean()
            .detach()
        )
        torch.testing.assert_close(value, direct, atol=1e-5, rtol=1e-5)


@torch.no_grad()
def test_evaluate_a_transcoder_against_its_output_hook():
    model = tiny_model()
    ids = tokens(3, 7)
    tc = random_sae(
        "blocks.1.ln2.hook_normalized", architecture="standard", transcoder=True, apply_b_dec_to_input=False,
        hook_name_out="blocks.1.hook_mlp_out",
    )  # fmt: skip
    row = evaluate(model, tc, ids).iloc[0]
    _, cache = model.run_with_cache(
        ids, names_filter=["blocks.1.ln2.hook_normalized", "blocks.1.hook_mlp_out"]
    )
    x = cache["blocks.1.ln2.hook_normalized"].flatten(0, 1)
    y = cache["blocks.1.hook_mlp_out"].flatten(0, 1)
    assert row["hook"] == "blocks.1.hook_mlp_out"
    torch.testing.assert_close(row["mse"], float(((tc(x) - y) ** 2).mean()), rtol=1e-5, atol=1e-7)
