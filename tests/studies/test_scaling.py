"""The scaling study's key numbers on a small Monte Carlo."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
import torch

from studies.scaling.config import ScalingConfig
from studies.scaling.montecarlo import monte_carlo, softmax_stats
from studies.scaling.study import main


@pytest.fixture(scope="module")
def mc():
    cfg = ScalingConfig(d_ks=(4, 64, 1024), n_queries=500, n_boot=200, models=())
    return monte_carlo(cfg, seed=0).set_index(["d_k", "scaled"])


def test_variance_matches_d_k(mc):
    for d_k in (4, 64, 1024):
        ratio = mc.loc[(d_k, False), "var_ratio"]
        assert abs(ratio - 1) < 0.1, (d_k, ratio)
        assert mc.loc[(d_k, False), "var_qk_low"] < d_k < mc.loc[(d_k, False), "var_qk_high"]


def test_unscaled_saturates(mc):
    entropy = [mc.loc[(d, False), "entropy"] for d in (4, 64, 1024)]
    assert entropy[0] > entropy[1] > entropy[2]
    assert entropy[2] < 0.2
    assert mc.loc[(1024, False), "max_weight_median"] > 0.99
    assert mc.loc[(1024, False), "jacobian_norm_median"] < 1e-3


def test_scaled_is_stable(mc):
    entropy = [mc.loc[(d, True), "entropy"] for d in (4, 64, 1024)]
    assert max(entropy) - min(entropy) < 0.1
    assert all(2.8 < e < math.log(32) for e in entropy)
    jac = [mc.loc[(d, True), "jacobian_norm_median"] for d in (4, 64, 1024)]
    assert max(jac) / min(jac) < 1.2


def test_jacobian_norm_matches_autograd():
    scores = torch.randn(3, 8, dtype=torch.float64)
    keys = torch.randn(3, 8, 5, dtype=torch.float64)
    g = torch.randn(3, 8, dtype=torch.float64)
    stats = softmax_stats(scores, keys, 2.0, g)
    for i in range(3):
        jac = torch.autograd.functional.jacobian(lambda s: torch.softmax(s / 2.0, -1), scores[i]) * 2.0
        torch.testing.assert_close(float(jac.norm()), float(stats["jacobian_norm"][i]))
        q = torch.randn(5, dtype=torch.float64, requires_grad=True)
        (torch.softmax(keys[i] @ q / 2.0, -1) * g[i]).sum().backward()
        p = torch.softmax(keys[i] @ q.detach() / 2.0, -1)
        jg = p * (g[i] - (p * g[i]).sum())
        torch.testing.assert_close(q.grad, keys[i].T @ jg / 2.0)


def test_report_without_models(tmp_path):
    out = tmp_path / "scaling"
    assert main(["--out", str(out), "--models", "", "--n-queries", "200", "--quiet"]) == 0
    results = json.loads((out / "results.json").read_text())
    headline = results["headline"]["Var(q·k) / d_k at d_k = 1024"]
    table = pd.read_csv(out / "tables" / "monte_carlo.csv")
    row = table[(table.d_k == 1024) & ~table.scaled].iloc[0]
    # the card is the table's row (printed to 4 digits there), and q·k of unit normals has variance d_k
    assert headline["value"] == pytest.approx(row.var_ratio, abs=1e-4)
    assert headline["ci"] == pytest.approx([row.var_qk_low / 1024, row.var_qk_high / 1024], abs=1e-4)
    assert headline["ci"][0] < 1.0 < headline["ci"][1] and abs(headline["value"] - 1.0) < 0.15
