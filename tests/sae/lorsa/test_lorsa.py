"""Lorsa's computation against a naive one written here (a loop over heads, queries and keys, rotating each pair
of dimensions by hand), the exact properties of a pattern, padding, the SparseDictionary protocol's linear
pieces with the pattern held, and the refusals of bad input."""

from __future__ import annotations

import math

import pytest
import torch

from interp.dictionary import SparseDictionary, check_fits
from interp.sae.lorsa import Lorsa, LorsaConfig, LorsaLayer
from tests.sae.lorsa.factories import random_lorsa
from tests.tolerance import assert_within, float32_rounding


def _rotate(v: torch.Tensor, pos: int, rotary_dim: int, base: float) -> torch.Tensor:
    """Rotate the pairs ``(i, i + rotary_dim / 2)`` of ``v`` by ``pos * base ** (-2i / rotary_dim)``."""
    out = v.clone()
    half = rotary_dim // 2
    for i in range(half):
        theta = pos * base ** (-2 * i / rotary_dim)
        a, b = v[i], v[i + half]
        out[i] = a * math.cos(theta) - b * math.sin(theta)
        out[i + half] = b * math.cos(theta) + a * math.sin(theta)
    return out


def _rms(v: torch.Tensor, gain: torch.Tensor, eps: float) -> torch.Tensor:
    return v / torch.sqrt((v * v).mean() + eps) * gain


def naive(layer: LorsaLayer, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(z, acts, out)`` for ``x [batch, pos, d_model]``, one head, query and key at a time."""
    cfg = layer.cfg
    W = {
        name: getattr(layer, name).detach()
        for name in ("W_Q", "W_K", "b_Q", "b_K", "W_V", "b_V", "W_O", "b_O")
    }
    batch, n_pos, _ = x.shape
    z = torch.zeros(batch, n_pos, cfg.n_heads, dtype=x.dtype)
    for b in range(batch):
        for h in range(cfg.n_heads):
            g = h // (cfg.n_heads // cfg.n_qk_heads)
            for q in range(n_pos):
                scores = []
                for k in range(q + 1):  # causal: keys up to the query
                    qv = x[b, q] @ W["W_Q"][g] + W["b_Q"][g]
                    kv = x[b, k] @ W["W_K"][g] + W["b_K"][g]
                    if cfg.qk_norm == "rmsnorm":
                        qv = _rms(qv, layer.q_norm[g].detach(), cfg.eps)
                        kv = _rms(kv, layer.k_norm[g].detach(), cfg.eps)
                    if cfg.positional == "rotary":
                        qv = _rotate(qv, q, cfg.rotary_dim, cfg.rotary_base)
                        kv = _rotate(kv, k, cfg.rotary_dim, cfg.rotary_base)
                    scores.append(float(qv @ kv) / cfg.attn_scale)
                weights = torch.tensor(scores, dtype=x.dtype).softmax(0)
                values = torch.stack([x[b, k] @ W["W_V"][h] + W["b_V"][h] for k in range(q + 1)])
                z[b, q, h] = weights @ values
    acts = torch.zeros_like(z)
    norm = W["W_O"].norm(dim=-1) if cfg.gate_by_decoder_norm else torch.ones(cfg.n_heads, dtype=x.dtype)
    for b in range(batch):
        for q in range(n_pos):
            gate = (z[b, q] * norm).clamp(min=0)  # ReLU, then the k largest
            chosen = sorted(range(cfg.n_heads), key=lambda h: -float(gate[h]))[: cfg.k]
            for h in chosen:
                if gate[h] > 0:
                    acts[b, q, h] = z[b, q, h]
    return z, acts, acts @ W["W_O"] + W["b_O"]


SETTINGS = {
    "rotary_gated": dict(gate_by_decoder_norm=True),
    "rotary_partial_qknorm": dict(rotary_dim=2, qk_norm="rmsnorm", eps=1e-5),
    "no_positions_one_group": dict(positional="none", k=3),
}


@pytest.mark.parametrize("name", list(SETTINGS))
def test_lorsa_equals_a_loop_over_heads(name):
    lorsa = random_lorsa((3,), seed=7, **SETTINGS[name])
    if name == "no_positions_one_group":
        lorsa = random_lorsa((3,), seed=7, n_qk_heads=1, **SETTINGS[name])
    x = torch.randn(2, 6, 8, generator=torch.Generator().manual_seed(8))
    layer = lorsa.layer(3)
    z64, acts64, out64 = naive(layer.double(), x.double())
    z32, acts32, out32 = naive(layer.float(), x)
    with torch.no_grad():
        pre, acts = lorsa.encode(x, 3)
        out = lorsa.reconstruct({3: x})[3]
    assert torch.equal(acts != 0, acts64 != 0) and bool((acts64 != 0).any())
    assert int((acts != 0).sum(-1).max()) == layer.cfg.k
    # within twice what float32 does to the naive loop itself (tests/tolerance.py)
    assert_within(pre, z64, 2 * float32_rounding(z32, z64), f"{name} z")
    assert_within(acts, acts64, 2 * float32_rounding(acts32, acts64), f"{name} acts")
    assert_within(out, out64, 2 * float32_rounding(out32, out64), f"{name} out")


def test_the_pattern_is_causal_and_its_rows_sum_to_one_and_the_fused_path_agrees():
    lorsa = random_lorsa((0,), seed=3, qk_norm="rmsnorm")
    layer = lorsa.layer(0)
    x = torch.randn(3, 9, 8, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        pattern = lorsa.pattern(x, 0)  # [batch, qk_head, query, key]
        explicit = layer.pre_acts(x, explicit=True)
        fused = layer.pre_acts(x)
        v = layer.values(x)
    assert pattern.shape == (3, 2, 9, 9)
    assert bool((pattern.triu(1) == 0).all())
    torch.testing.assert_close(pattern.sum(-1), torch.ones(3, 2, 9), rtol=0, atol=1e-6)
    # each value mixture is sum_key pattern * v, terms |pattern| |v|: bounded per query by max |v|
    bound = 4 * torch.finfo(torch.float32).eps * v.abs().amax(1, keepdim=True) * 9
    assert_within(fused, explicit, bound, "fused against explicit")


def test_a_padded_sequence_gives_what_it_gives_alone():
    """Padding on the left shifts nothing (positions count real tokens, padding keys are never seen); on the
    right it is never seen by a causal query. Both agree with the sequence alone within float32's rounding of
    it (the float64 run is the reference, tests/tolerance.py)."""
    lorsa = random_lorsa((0,), seed=5)
    x = torch.randn(1, 6, 8, generator=torch.Generator().manual_seed(6))
    junk = torch.randn(1, 3, 8) * 50
    valid = torch.tensor([[False] * 3 + [True] * 6])
    with torch.no_grad():
        alone, exact = lorsa.encode(x, 0)[0], lorsa.double().encode(x.double(), 0)[0]
        lorsa.float()
        left = lorsa.encode(torch.cat([junk, x], dim=1), 0, valid)[0][:, 3:]
        right = lorsa.encode(torch.cat([x, junk], dim=1), 0, valid.flip(-1))[0][:, :6]
    bound = 2 * float32_rounding(alone, exact)
    assert_within(left, exact, bound, "left padding")
    assert_within(right, exact, bound, "right padding")
    with pytest.raises(ValueError, match=r"valid has shape \(1, 6\); it must be \[batch, pos\] = \(1, 9\)"):
        lorsa.encode(torch.cat([junk, x], dim=1), 0, valid[:, :6])


def test_with_the_pattern_held_a_head_reads_its_encoder_row_and_writes_its_decoder_row():
    lorsa = random_lorsa((2,), seed=9)
    assert isinstance(lorsa, SparseDictionary)
    x = torch.randn(1, 5, 8, generator=torch.Generator().manual_seed(10), dtype=torch.float64)
    lorsa = lorsa.double()
    features = torch.arange(6)
    with torch.no_grad():
        pre, acts = lorsa.encode(x, 2)
        pattern = lorsa.pattern(x, 2)[0, lorsa.qk_head(2, features)]  # [head, query, key]
        reads = x[0] @ lorsa.encoder(2, features).T + lorsa.layer(2).b_V  # [key, head]
        held = torch.einsum("hqk,kh->qh", pattern, reads)
        written = acts[0] @ lorsa.decoder(2)[:, 0] + lorsa.decoder_bias(2)
    torch.testing.assert_close(held, pre[0], rtol=0, atol=1e-12)
    torch.testing.assert_close(written, lorsa.reconstruct({2: x})[2][0], rtol=0, atol=1e-12)
    assert lorsa.qk_head(2, torch.tensor([0, 2, 3, 5])).tolist() == [0, 0, 1, 1]
    assert (lorsa.output_layers(2), lorsa.skip(x, 2), lorsa.decoder(2, torch.tensor([1])).shape) == (
        [2],
        None,
        (1, 1, 8),
    )


def test_inputs_must_be_whole_sequences_and_layers_must_exist():
    lorsa = random_lorsa((1,), seed=0)
    with pytest.raises(ValueError, match=r"whole sequences \[batch, pos, d_model=8\]; got shape \(5, 8\)"):
        lorsa.encode(torch.randn(5, 8), 1)
    with pytest.raises(KeyError, match=r"no heads at layer 0; its layers are \[1\]"):
        lorsa.encode(torch.randn(1, 5, 8), 0)
    with pytest.raises(KeyError, match=r"layers \[4\] have no Lorsa"):
        lorsa.reconstruct({4: torch.randn(1, 2, 8)})


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (dict(n_heads=7), "n_heads=7 is not a multiple of n_qk_heads=2"),
        (dict(rotary_dim=3), "rotary_dim=3 must be even"),
        (dict(k=None), "a topk Lorsa needs k >= 1 active heads per token, got k=None"),
        (dict(k=9), "k=9 active heads per token, but the layer has n_heads=6"),
        (dict(activation="relu", k=2), "k=2 is for topk and batchtopk"),
        (dict(activation="gelu"), "activation='gelu'"),
        (dict(positional="learned"), "positional='learned'"),
        (dict(attn_scale=-1.0), "attn_scale=-1.0"),
    ],
)
def test_a_bad_config_is_refused_in_one_line(fields, message):
    base = dict(d_model=8, n_heads=6, n_qk_heads=2, d_qk_head=4, k=2)
    with pytest.raises(ValueError) as err:
        LorsaConfig(**{**base, **fields})
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_lorsa_fits_a_model_through_its_hooks(tmp_path):
    from interp.config import TransformerConfig
    from interp.model import HookedTransformer

    cfg = TransformerConfig(n_layers=2, d_model=8, n_heads=2, d_vocab=11, n_ctx=16, positional="rotary")
    model = HookedTransformer(cfg)
    check_fits(model, random_lorsa((0, 1), seed=1))
    with pytest.raises(ValueError, match="layers up to 2, the model has n_layers=2"):
        check_fits(model, random_lorsa((2,), seed=1))
    wide = Lorsa({0: random_lorsa((0,), d_model=16, seed=1).layer(0)})
    with pytest.raises(ValueError, match="d_in=16 at 'blocks.0.ln1.hook_normalized'"):
        check_fits(model, wide)
