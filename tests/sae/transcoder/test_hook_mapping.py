"""The config hook names map per family onto the interp hook that carries circuit-tracer's tensor.

``tests/sae/golden/families/*`` are tiny random Llama, Qwen3, Gemma 2 and Gemma 3 checkpoints with, for each
hook name circuit-tracer's mapping of that architecture defines, the tensor that mapping reads at every layer
(recorded through nnsight by ``make_golden.py``). A transcoder loaded for the model must see the same thing:
the same tensor where interp has the hook, and the same pre-activations where a norm's gain is folded in.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import interp
from interp.sae import TranscoderSet
from interp.sae.formats.tl_hooks import bind

FAMILIES = Path(__file__).resolve().parent.parent / "golden" / "families"
OUTPUTS = ("hook_mlp_out", "mlp.hook_out")


def _transcoder(input_hook: str, output_hook: str, d_model: int = 16) -> TranscoderSet:
    g = torch.Generator().manual_seed(0)
    return TranscoderSet(
        torch.randn(2, 24, d_model, generator=g),
        torch.randn(2, 24, d_model, generator=g),
        torch.randn(2, 24, generator=g),
        torch.randn(2, d_model, generator=g),
        W_skip=torch.randn(2, d_model, d_model, generator=g),
        input_site=input_hook,
        output_site=output_hook,
        metadata={"config_hooks": (input_hook, output_hook)},
    )


@pytest.mark.parametrize("family", ["llama", "qwen3", "gemma2", "gemma3"])
def test_the_tensor_fed_to_a_transcoder_is_what_circuit_tracer_reads(family):
    folder = FAMILIES / family
    model = interp.load(folder)
    golden = load_file(str(folder / "mapping.safetensors"))
    names = json.loads((folder / "hooks.json").read_text())
    inputs = [n for n in names if n not in OUTPUTS]
    output = next(n for n in OUTPUTS if n in names)
    checked = 0
    for name in inputs:
        raw = _transcoder(name, output)
        tc = bind(raw, model)
        hooks = [tc.input_hook(0), tc.input_hook(1), tc.output_hook(0), tc.output_hook(1)]
        _, cache = model.run_with_cache(golden["ids"], names_filter=hooks)
        for layer in (0, 1):
            theirs = golden[f"{name}/{layer}"]
            ours = cache[tc.input_hook(layer)]
            if name != "mlp.hook_in":
                torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(
                tc.pre_acts(ours, layer), raw.pre_acts(theirs, layer), rtol=1e-4, atol=1e-4
            )
            torch.testing.assert_close(tc.skip(ours, layer), raw.skip(theirs, layer), rtol=1e-4, atol=1e-4)
            for out in (n for n in OUTPUTS if n in names):
                torch.testing.assert_close(
                    cache[tc.output_hook(layer)], golden[f"{out}/{layer}"], rtol=1e-5, atol=1e-5
                )
            checked += 1
    assert checked == 2 * len(inputs)


def test_a_convention_the_family_cannot_express_is_refused():
    gemma = interp.load(FAMILIES / "gemma2")
    with pytest.raises(ValueError, match="mlp.hook_out' is the MLP's output before the post-MLP norm"):
        bind(_transcoder("ln2.hook_normalized", "mlp.hook_out"), gemma)
    raw = _transcoder("mlp.hook_in", "mlp.hook_out")
    with pytest.raises(
        ValueError, match="is 'blocks.0.mlp.hook_in', a TransformerLens hook .*load_transcoders"
    ):
        with gemma.transcoders(raw):
            pass
    tc = bind(raw, interp.load(FAMILIES / "llama"))
    assert (tc.input_site, tc.output_site) == ("ln2.hook_normalized", "hook_mlp_out")
    assert tc.metadata["folded_gain"] == "ln2" and "folded_gain" not in raw.metadata
