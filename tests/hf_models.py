"""Tiny random `transformers` models shared by the tests that compare against them (attach, from_hf).

The narrow ``narrow-*`` configs of the tests' one factory (:mod:`tests.load.families`), with
``transformers``' own initialisation and the caller's random state (these builders do not seed).
"""

from __future__ import annotations

from tests.load.families import NARROW, build

VOCAB = 64
D, HEADS, LAYERS = NARROW["d_model"], NARROW["n_heads"], NARROW["n_layers"]


def gpt2(impl: str = "sdpa"):
    return build("narrow-gpt2", VOCAB, impl, widen=False, seed=None)


def bert(impl: str = "sdpa"):
    return build("narrow-bert", VOCAB, impl, widen=False, seed=None)


def llama(impl: str = "sdpa"):
    return build("narrow-llama", VOCAB, impl, widen=False, seed=None)
