"""evaluate() and the feature pieces against naive computations written here."""

from __future__ import annotations

import html

import pandas as pd
import pytest
import torch

from interp.report import Report
from interp.sae.evaluate import evaluate
from interp.sae.feature_report import add_feature_section, feature_html, feature_stats, logit_effects
from tests.sae.models import random_sae, tiny_model, tokens

HOOK = "blocks.1.hook_resid_pre"


def _ce(logits, ids, pairs):
    total, n = 0.0, 0
    for b in range(ids.shape[0]):
        for p in range(ids.shape[1] - 1):
            if pairs[b, p]:
                total += -float(torch.log_softmax(logits[b, p].double(), -1)[ids[b, p + 1]])
                n += 1
    return total / n


@torch.no_grad()
def test_metrics_equal_a_naive_computation():
    model = tiny_model()
    ids = tokens(4, 9, seed=5)
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0  # right padding
    mask[2, :2] = 0  # left padding
    sae = random_sae(HOOK, d_sae=40, k=5)
    frame = evaluate(model, [sae], ids, mask, batch_size=3, dense_threshold=0.2)
    row = frame.iloc[0]
    real = mask.bool()
    x = model.run_with_cache(ids, mask, names_filter=HOOK)[1][HOOK][real].double()
    acts = sae.encode(x.float()).double()
    out = sae(x.float()).double()
    n = x.shape[0]
    assert row["n_tokens"] == n == int(mask.sum())
    torch.testing.assert_close(row["l0"], float((acts > 0).sum()) / n)
    torch.testing.assert_close(row["mse"], float(((out - x) ** 2).mean()), rtol=1e-5, atol=1e-7)
    sst = float(((x - x.mean(0)) ** 2).sum())
    torch.testing.assert_close(
        row["explained_variance"], 1 - float(((out - x) ** 2).sum()) / sst, rtol=1e-5, atol=1e-6
    )
    cos = sum(float(torch.dot(out[i], x[i]) / (out[i].norm() * x[i].norm())) for i in range(n)) / n
    torch.testing.assert_close(row["cosine"], cos, rtol=1e-5, atol=1e-6)
    freq = (acts > 0).double().mean(0)
    torch.testing.assert_close(row["dead_fraction"], float((freq == 0).double().mean()))
    torch.testing.assert_close(row["dense_fraction"], float((freq > 0.2).double().mean()))

    pairs = real[:, :-1] & real[:, 1:]
    clean = model(ids, mask)
    spliced = model.run_with_saes(ids, mask, saes=[sae])
    zero = model.run_with_hooks(ids, mask, fwd_hooks=[(HOOK, lambda a, h: torch.zeros_like(a))])
    mean_act = x.mean(0).float()
    mean = model.run_with_hooks(ids, mask, fwd_hooks=[(HOOK, lambda a, h: mean_act.expand_as(a).clone())])
    ce = {k: _ce(v, ids, pairs) for k, v in dict(clean=clean, sae=spliced, zero=zero, mean=mean).items()}
    for key, value in ce.items():
        torch.testing.assert_close(row[f"ce_{key}"], value, rtol=1e-5, atol=1e-5)
    for ablation in ("zero", "mean"):
        expected = (ce[ablation] - ce["sae"]) / (ce[ablation] - ce["clean"])
        torch.testing.assert_close(row[f"ce_recovered_{ablation}"], expected, rtol=1e-4, atol=1e-5)
    kl, count = 0.0, 0
    for b in range(ids.shape[0]):
        for p in range(ids.shape[1] - 1):
            if pairs[b, p]:
                lp, lq = clean[b, p].double().log_softmax(-1), spliced[b, p].double().log_softmax(-1)
                kl += float((lp.exp() * (lp - lq)).sum())
                count += 1
    torch.testing.assert_close(row["kl"], kl / count, rtol=1e-4, atol=1e-6)


def test_several_saes_one_row_each():
    model = tiny_model()
    saes = [random_sae(HOOK), random_sae("blocks.0.hook_mlp_out", seed=2)]
    frame = evaluate(model, saes, tokens())
    assert list(frame["hook"]) == [HOOK, "blocks.0.hook_mlp_out"] and isinstance(frame, pd.DataFrame)
    # each row is that dictionary's own evaluation (checked against a naive computation above), not a mix
    for i, sae in enumerate(saes):
        alone = evaluate(model, [sae], tokens()).iloc[0]
        for column in ("mse", "explained_variance", "l0", "ce_sae", "kl"):
            assert frame.iloc[i][column] == pytest.approx(alone[column], rel=1e-6, abs=1e-9), (i, column)
    assert frame.iloc[0]["mse"] != pytest.approx(frame.iloc[1]["mse"])


def test_feature_stats_and_logit_effects_against_naive():
    model = tiny_model()
    ids = tokens(3, 10, seed=2)
    sae = random_sae(HOOK, d_sae=40, k=5)
    acts = sae.encode(model.run_with_cache(ids, names_filter=HOOK)[1][HOOK])  # [b, p, d_sae]
    feature = int(acts.ne(0).flatten(0, 1).sum(0).argmax())
    stats = feature_stats(model, sae, ids, [feature, 0], k=3, window=2, batch_size=2)
    a = acts[..., feature].flatten()
    top = a.topk(3)
    rows = stats.contexts[stats.contexts["feature"] == feature]
    torch.testing.assert_close(
        torch.tensor(rows["activation"].tolist()), top.values.detach(), rtol=1e-5, atol=1e-6
    )
    assert list(rows["item"]) == [int(i) // 10 for i in top.indices] and list(rows["position"]) == [
        int(i) % 10 for i in top.indices
    ]
    assert stats.density(feature) == int((a > 0).sum()) / a.numel()
    effects = logit_effects(model, sae, [feature], k=4)
    row = sae.W_dec[feature]  # through the final LayerNorm taken as linear: centred, times its gain
    direct = ((row - row.mean()) * model.ln_final.gain) @ model.unembed.weight
    promoted = effects[effects["direction"] == "promoted"]
    torch.testing.assert_close(torch.tensor(promoted["logit"].tolist()), direct.topk(4).values.detach())
    suppressed = effects[effects["direction"] == "suppressed"]
    torch.testing.assert_close(torch.tensor(suppressed["logit"].tolist()), -(-direct).topk(4).values.detach())


def test_feature_html_is_escaped_and_bounded(tmp_path):
    model = tiny_model()
    sae = random_sae(HOOK, d_sae=40, k=5)
    stats = feature_stats(model, sae, tokens(2, 8), list(range(30)), k=20)
    stats.contexts.loc[:, "token"] = "<script>alert(1)</script>"
    stats.contexts.loc[:, "left"] = "a & b " * 100
    fragment = feature_html(stats, None, max_features=5, max_contexts=3)
    assert "<script>" not in fragment and html.escape("<script>") in fragment
    assert fragment.count('class="sae-feature"') == 5 and fragment.count('class="ctx"') <= 15
    assert "25 more features" in fragment and len(fragment) < 20000
    report = Report(tmp_path / "r", "features", seed=0)
    add_feature_section(
        report, "feat", "Features", stats, logit_effects(model, sae, [0, 1], k=3), histograms=2
    )
    report.add_results({"n": 1})
    out = report.write()
    page = (out / "index.html").read_text()
    assert "sae-feature" in page and "<script>alert(1)" not in page
    assert (out / "figures" / "feat_hist_0.png").is_file() and (
        out / "tables" / "feat_contexts.csv"
    ).is_file()


@torch.no_grad()
def test_skip_first_leaves_the_first_token_alone():
    model = tiny_model()
    ids = tokens(3, 8, seed=4)
    sae = random_sae(HOOK, d_sae=40, k=5)
    row = evaluate(model, sae, ids, skip_first=1).iloc[0]
    x = model.run_with_cache(ids, names_filter=HOOK)[1][HOOK]
    rest = x[:, 1:].reshape(-1, x.shape[-1])
    assert row["n_tokens"] == rest.shape[0]
    torch.testing.assert_close(row["mse"], float(((sae(rest) - rest) ** 2).mean()), rtol=1e-5, atol=1e-7)
    out = torch.cat([x[:, :1], sae(x[:, 1:])], dim=1)
    spliced = model.run_with_hooks(ids, fwd_hooks=[(HOOK, lambda a, h: out)])
    pairs = torch.ones(3, 7, dtype=torch.bool)
    torch.testing.assert_close(row["ce_sae"], _ce(spliced, ids, pairs), rtol=1e-5, atol=1e-5)


def test_feature_contexts_are_the_same_under_left_padding():
    model = tiny_model()
    ids = tokens(2, 8, seed=3)
    sae = random_sae(HOOK, d_sae=40, k=5)
    left = torch.cat([torch.zeros(2, 3, dtype=torch.long), ids], dim=1)
    mask = torch.cat([torch.zeros(2, 3, dtype=torch.long), torch.ones_like(ids)], dim=1)
    a = feature_stats(model, sae, ids, [1, 2], k=3, window=2).contexts
    b = feature_stats(model, sae, left, [1, 2], attention_mask=mask, k=3, window=2).contexts
    cols = ["feature", "item", "position", "token", "left", "right"]
    assert a[cols].equals(b[cols])
    torch.testing.assert_close(
        torch.tensor(a["activation"].tolist()), torch.tensor(b["activation"].tolist()), atol=1e-4, rtol=1e-4
    )
