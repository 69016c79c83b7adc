"""``attribute(..., max_memory_gb=...)``: the reads per pass fit the budget, the graph does not change, the peak
measured in a fresh process stays within the budget, and a budget too small is refused up front in one line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import interp
from interp.circuits.features import direct_effects
from interp.circuits.features.memory_budget import GB, MemoryBudgetError, plan
from interp.cli import main
from interp.sae import save_transcoders
from tests.circuits.models import tiny
from tests.circuits.transcoders import tiny_transcoders

ROOT = Path(__file__).resolve().parents[2]
LLAMA = Path(__file__).parent / "golden" / "llama"


@pytest.fixture
def passes(monkeypatch):
    """The reads of every backward pass, in order."""
    seen, rows = [], direct_effects._rows

    def counted(run, sources, transcoders, layers, positions, vectors):
        seen.append(len(vectors))
        return rows(run, sources, transcoders, layers, positions, vectors)

    monkeypatch.setattr(direct_effects, "_rows", counted)
    return seen


def _budget_for(model, tc, tokens, graph, n_active, cap, reads):
    """The budget (GiB) at which the plan allows exactly ``reads`` reads per pass."""
    writes = n_active  # per-layer transcoders: one decoder write per feature
    p = plan(model, tc, len(tokens), n_active=n_active, n_decoder_writes=writes, n_logits=graph.n_logits,
             max_feature_nodes=cap, batch_size=256, max_memory_gb=None)  # fmt: skip
    return (p.frozen + p.sources + p.storage + reads * p.per_read) / GB


@pytest.mark.parametrize("cap", [None, 12])
def test_a_budget_lowers_the_reads_per_pass_and_keeps_the_graph(passes, cap):
    model = tiny("llama-gqa", n_ctx=24)
    tc = tiny_transcoders(model.cfg, d_transcoder=24)
    tokens = torch.tensor([0, 5, 9, 12, 3, 7, 1, 2, 19, 4, 11, 6])
    n_active = len(direct_effects.attribute(model, tc, tokens, progress=False).features)
    passes.clear()
    default = direct_effects.attribute(
        model, tc, tokens, max_feature_nodes=cap, update_interval=1, progress=False
    )
    assert max(passes) > 3
    passes.clear()
    budget = _budget_for(model, tc, tokens, default, n_active, cap, reads=3)
    graph = direct_effects.attribute(
        model, tc, tokens, max_feature_nodes=cap, update_interval=1, max_memory_gb=budget, progress=False
    )
    assert max(passes) == 3  # the budget chose the passes
    assert torch.equal(graph.features, default.features)  # the same features kept, in the same order
    # Each read's row is computed independently of the others in its pass, but a matrix product over a
    # different number of rows may add in another order: float32 rounding, bounded by the default graph's own
    # distance from the float64 graph (both are float32 roundings of it).
    exact = direct_effects.attribute(
        model.double(), tc.to(dtype=torch.float64), tokens, max_feature_nodes=cap, update_interval=1,
        progress=False,
    )  # fmt: skip
    assert torch.equal(exact.features, default.features)
    rounding = (default.adjacency.double() - exact.adjacency).abs().max()
    assert (graph.adjacency - default.adjacency).abs().max() <= 2 * rounding + 1e-12
    assert not torch.equal(graph.adjacency, torch.zeros_like(graph.adjacency))


def test_the_budget_never_raises_the_batch(passes):
    model = tiny("llama-gqa", n_ctx=24)
    tc = tiny_transcoders(model.cfg, d_transcoder=24)
    tokens = torch.tensor([0, 5, 9, 12, 3, 7, 1, 2])
    graph = direct_effects.attribute(model, tc, tokens, batch_size=5, max_memory_gb=8.0, progress=False)
    assert max(passes) == 5 and graph.n_features > 5


def test_a_budget_too_small_is_refused_before_the_forward_pass(monkeypatch):
    model = tiny("llama-gqa", n_ctx=24)
    tc = tiny_transcoders(model.cfg, d_transcoder=24)

    def no_forward(*args, **kwargs):
        raise AssertionError("the forward pass ran")

    monkeypatch.setattr(direct_effects, "frozen_run", no_forward)
    with pytest.raises(
        MemoryBudgetError, match=r"max_memory_gb=1e-06 is too small: .* needs at least"
    ) as err:
        direct_effects.attribute(
            model, tc, torch.tensor([0, 5, 9, 12, 3]), max_memory_gb=1e-6, progress=False
        )
    assert len(str(err.value).splitlines()) == 1


def test_the_least_budget_named_is_the_least_that_works(monkeypatch):
    """Refused after the forward pass (the active features are counted) but before any backward pass, with the
    adjacency named as what dominates; the budget the message names is then accepted."""
    model = tiny("llama-gqa", n_ctx=64)
    tc = tiny_transcoders(model.cfg, d_transcoder=400)  # many active features: the adjacency dominates
    tokens = torch.arange(60) % 20
    tokens[0] = 0
    rows = direct_effects._rows

    def no_backward(*args, **kwargs):
        raise AssertionError("a backward pass ran")

    monkeypatch.setattr(direct_effects, "_rows", no_backward)
    with pytest.raises(MemoryBudgetError) as err:
        direct_effects.attribute(model, tc, tokens, max_memory_gb=0.05, progress=False)
    message = str(err.value)
    assert "mostly the adjacency of" in message and "--max-feature-nodes" in message
    need = float(re.search(r"needs at least ([0-9.e+-]+) GiB", message).group(1))
    assert need > 0.05
    monkeypatch.setattr(direct_effects, "_rows", rows)
    graph = direct_effects.attribute(model, tc, tokens, max_memory_gb=need * 1.001, progress=False)
    n = graph.adjacency.shape[0]
    assert n * n * 4 / GB > 0.5 * need  # the adjacency is most of it, as the message says
    with pytest.raises(MemoryBudgetError):
        direct_effects.attribute(model, tc, tokens, max_memory_gb=need * 0.99, progress=False)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), True, "2"])
def test_bad_budgets_are_refused(bad):
    model = tiny("llama-gqa")
    tc = tiny_transcoders(model.cfg)
    with pytest.raises(ValueError, match="max_memory_gb must be a positive number of GiB"):
        direct_effects.attribute(model, tc, torch.tensor([0, 5, 9]), max_memory_gb=bad, progress=False)


def test_the_peak_stays_within_the_budget_in_a_fresh_process():
    """Measured: the resident peak above the resident set before the call, in a process of its own, with a
    budget the default 256 reads per pass would exceed about 2.5-fold."""
    budget = 0.05
    done = subprocess.run(
        [sys.executable, "-m", "tests.circuits.attribution_memory_probe", str(budget)],
        capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        check=True, timeout=300,
    )  # fmt: skip
    got = json.loads(done.stdout.strip().splitlines()[-1])
    limit = got["budget"]
    assert got["default"]["peak"] > 2 * limit  # without the budget this case exceeds it
    assert got["budgeted"]["reads_per_pass"] < got["default"]["reads_per_pass"] == 256
    assert got["budgeted"]["peak"] <= limit
    assert got["budgeted"]["n_nodes"] == got["default"]["n_nodes"]


@pytest.fixture(scope="module")
def tc_folder(tmp_path_factory):
    model = interp.load(str(LLAMA))
    folder = tmp_path_factory.mktemp("tc")
    save_transcoders(tiny_transcoders(model.cfg, d_transcoder=16, seed=7), folder)
    return folder


def test_the_cli_passes_the_budget_and_refuses_in_one_line(tmp_path, tc_folder, capsys, monkeypatch):
    base = ["attribute", str(LLAMA), "--transcoders", str(tc_folder), "--prompt", "w17 w33 w5 w48", "--quiet"]
    assert main([*base, "--out", str(tmp_path / "a"), "--max-memory-gb", "0"]) == 2
    assert "expected a positive number of GiB" in capsys.readouterr().err
    assert main([*base, "--out", str(tmp_path / "b"), "--max-memory-gb", "1e-6"]) == 2
    err = capsys.readouterr().err.strip()
    assert "max_memory_gb=1e-06 is too small" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "b" / "graph.safetensors").exists()
    seen = []
    attribute = direct_effects.attribute

    def spy(*args, **kwargs):
        seen.append(kwargs["max_memory_gb"])
        return attribute(*args, **kwargs)

    monkeypatch.setattr("interp.circuits.features.attribute", spy)
    assert main([*base, "--out", str(tmp_path / "c"), "--max-memory-gb", "0.5"]) == 0
    assert seen == [0.5] and (tmp_path / "c" / "graph.safetensors").exists()
