"""Tiny random `transformers` models shared by the tests that compare against them (attach, from_hf)."""

from __future__ import annotations

import pytest

transformers = pytest.importorskip("transformers")

VOCAB, D, HEADS, LAYERS = 64, 32, 4, 2


def gpt2(impl: str = "sdpa"):
    cfg = transformers.GPT2Config(
        n_layer=LAYERS,
        n_embd=D,
        n_head=HEADS,
        vocab_size=VOCAB,
        n_positions=32,
        bos_token_id=0,
        eos_token_id=0,
    )
    return transformers.GPT2LMHeadModel._from_config(cfg, attn_implementation=impl)


def bert(impl: str = "sdpa"):
    cfg = transformers.BertConfig(
        num_hidden_layers=LAYERS,
        hidden_size=D,
        num_attention_heads=HEADS,
        intermediate_size=4 * D,
        vocab_size=VOCAB,
        max_position_embeddings=32,
        pad_token_id=0,
    )
    return transformers.BertForMaskedLM._from_config(cfg, attn_implementation=impl)


def llama(impl: str = "sdpa"):
    cfg = transformers.LlamaConfig(
        num_hidden_layers=LAYERS,
        hidden_size=D,
        num_attention_heads=HEADS,
        num_key_value_heads=2,
        intermediate_size=2 * D,
        vocab_size=VOCAB,
        max_position_embeddings=32,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
    )
    return transformers.LlamaForCausalLM._from_config(cfg, attn_implementation=impl)
