"""Bad configurations and bad inputs each fail with a message that says what is wrong."""

import dataclasses

import pytest
import torch

from interp import HookedTransformer, TransformerConfig
from tests.model.variants import tiny_config


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(d_model=30, n_heads=4), "d_model=30 is not divisible by n_heads=4"),
        (dict(n_heads=4, n_kv_heads=3), "n_heads=4 is not a multiple of n_kv_heads=3"),
        (dict(norm="batchnorm"), r"norm='batchnorm'; expected one of \['layernorm', 'rmsnorm'\]"),
        (dict(positional="alibi"), "positional='alibi'"),
        (dict(n_layers=0), "n_layers must be a positive integer"),
        (dict(positional="rotary", rotary_dim=9), "rotary_dim=9 must be even"),
        (dict(eps=0.0), "eps must be positive"),
    ],
)
def test_bad_configs(overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny_config(**overrides)


def test_config_derives_defaults_and_is_frozen():
    cfg = TransformerConfig(n_layers=1, d_model=64, n_heads=8, d_vocab=10, n_ctx=4)
    assert (cfg.d_head, cfg.n_kv_heads, cfg.d_mlp, cfg.rotary_dim) == (8, 8, 256, 8)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.d_model = 3
    with pytest.raises(TypeError):
        TransformerConfig(1, 64, 8, 10, 4)  # keyword-only
    assert TransformerConfig(**cfg.to_dict()) == cfg


def test_seeded_init_is_reproducible():
    a, b = HookedTransformer(tiny_config(seed=3)), HookedTransformer(tiny_config(seed=3))
    c = HookedTransformer(tiny_config(seed=4))
    assert all(
        torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True)
    )
    assert not torch.equal(a.embed.W_E, c.embed.W_E)


@pytest.fixture
def model():
    return HookedTransformer(tiny_config())


def test_token_ids_out_of_range(model):
    with pytest.raises(ValueError, match="token id 61 is out of range for a vocabulary of d_vocab=61"):
        model(torch.tensor([[1, 61]]))
    with pytest.raises(ValueError, match="token id -1"):
        model(torch.tensor([[-1, 2]]))
    with pytest.raises(TypeError, match="integer tensor"):
        model(torch.tensor([[1.0, 2.0]]))


def test_sequence_longer_than_context(model):
    with pytest.raises(ValueError, match="17 tokens is longer than the model's context n_ctx=16"):
        model(torch.zeros(1, 17, dtype=torch.long))


def test_bad_masks(model):
    tokens = torch.tensor([[1, 2, 3]])
    with pytest.raises(
        ValueError, match=r"attention_mask has shape \(1, 2\); it must match tokens, \(1, 3\)"
    ):
        model(tokens, torch.tensor([[1, 1]]))
    with pytest.raises(ValueError, match="only 0"):
        model(tokens, torch.tensor([[1, 2, 1]]))


def test_text_without_tokenizer(model):
    with pytest.raises(ValueError, match="no tokenizer"):
        model("hello")


def test_stop_at_layer_returns_the_stream(model):
    tokens = torch.tensor([[1, 2, 3]])
    _, cache = model.run_with_cache(tokens, names_filter="blocks.1.hook_resid_pre")
    torch.testing.assert_close(model(tokens, stop_at_layer=1), cache["resid_pre", 1])


@pytest.mark.parametrize(
    "scaling, message",
    [
        (dict(kind="factors"), r"rotary scaling 'factors' needs \['factors'\]"),
        (dict(kind="factors", factors=[1.0, 0.0]), r"RotaryScaling.factors must be positive divisors"),
        (dict(kind="cubic", factor=2.0), r"RotaryScaling.kind='cubic'"),
    ],
)
def test_bad_rotary_scalings(scaling, message):
    with pytest.raises(ValueError, match=message):
        tiny_config(positional="rotary", rotary_scaling=scaling)


def test_explicit_rotary_factors_divide_each_frequency():
    from interp.model.positional import scaled_frequencies

    cfg = tiny_config(positional="rotary", rotary_scaling=dict(kind="factors", factors=[1.0, 2.0, 4.0, 8.0]))
    assert cfg.rotary_dim == 8 and cfg.rotary_scaling.factors == (1.0, 2.0, 4.0, 8.0)
    plain, _ = scaled_frequencies(cfg.rotary_base, 8, None, cfg.n_ctx)
    scaled, attention = scaled_frequencies(cfg.rotary_base, 8, cfg.rotary_scaling, cfg.n_ctx, seq_len=3)
    torch.testing.assert_close(scaled, plain / torch.tensor([1.0, 2.0, 4.0, 8.0]))
    assert attention == 1.0
    wrong = dict(kind="factors", factors=[1.0, 2.0])
    with pytest.raises(ValueError, match=r"factors have 2 entries; rotary_dim=8 needs 4"):
        HookedTransformer(tiny_config(positional="rotary", rotary_scaling=wrong))
    assert TransformerConfig(**cfg.to_dict()) == cfg  # JSON-ready, as the GGUF cache stores it
