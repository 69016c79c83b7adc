"""What ``interp serve`` answers about a model's own activations and text equals what ``transformers`` computes on
the same checkpoint: a tiny random Llama written to a folder, read by both."""

from __future__ import annotations

import neuronpedia_inference_client as npc
import pytest
import torch
import transformers

import interp
from interp.sae import SAESet
from interp.serve import Served, Sources, serving
from tests.load.builders import byte_level_bpe, save_folder
from tests.load.families import build
from tests.serve.helpers import client, random_sae

PROMPT = "The cat sat on the mat"


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    backend = byte_level_bpe()
    folder = save_folder(build("llama", backend.get_vocab_size()), backend, tmp_path_factory.mktemp("llama"))
    reference = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    model = interp.load(str(folder), dtype="float32")
    sae = random_sae(model.cfg.d_model, "blocks.0.hook_resid_post", 40, 7)
    served = Served(model, "tiny-llama", Sources([("res", SAESet(sae))]))
    with serving(served) as url:
        yield served, reference, sae, client(url)


def _hidden(reference, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
    with torch.no_grad():
        return reference(ids[None], output_hidden_states=True).hidden_states


def test_a_direction_read_at_the_stream_is_transformers_hidden_state(live):
    served, reference, _, api = live
    vector = torch.randn(served.model.cfg.d_model, generator=torch.Generator().manual_seed(0))
    r = api.activation_single_post(
        npc.ActivationSinglePostRequest(
            prompt=PROMPT, model="tiny-llama", vector=vector.tolist(), hook="blocks.0.hook_resid_post"
        )
    )
    ids = served.model.to_tokens(PROMPT).ids[0]
    expected = (
        _hidden(reference, ids)[1][0] @ vector
    )  # the stream leaving block 0 (the last one has the final norm)
    torch.testing.assert_close(torch.tensor(r.activation.values), expected, rtol=1e-4, atol=1e-4)


def test_a_features_activations_are_the_sae_on_transformers_hidden_state(live):
    served, reference, sae, api = live
    r = api.activation_all_post(
        npc.ActivationAllPostRequest(
            prompt=PROMPT,
            model="tiny-llama",
            source_set="res",
            selected_sources=[],
            sort_by_token_indexes=[],
            ignore_bos=False,
            num_results=40,
        )
    )
    ids = served.model.to_tokens(PROMPT, prepend_bos=True).ids[0]
    with torch.no_grad():
        acts = sae.encode(_hidden(reference, ids)[1][0])  # [pos, feature]
    assert len(r.activations) == 40
    for a in r.activations:
        torch.testing.assert_close(torch.tensor(a.values), acts[:, a.index], rtol=1e-4, atol=1e-4)


def test_the_default_completion_is_transformers_greedy_generation(live):
    served, reference, _, api = live
    r = api.steer_completion_post(
        npc.SteerCompletionRequest(
            prompt=PROMPT,
            model="tiny-llama",
            steer_method="SIMPLE_ADDITIVE",
            normalize_steering=False,
            types=["DEFAULT"],
            vectors=[],
            n_completion_tokens=6,
            temperature=0,
            strength_multiplier=1,
            freq_penalty=0,
            seed=0,
        )
    )
    ids = served.model.to_tokens(PROMPT, prepend_bos=True).ids[0]
    with torch.no_grad():
        out = reference.generate(ids[None], max_new_tokens=6, do_sample=False, eos_token_id=0, pad_token_id=1)
    new = out[0, len(ids) :].tolist()
    new = new[: new.index(0)] if 0 in new else new  # generation stops at the end-of-sequence token
    assert r.outputs[0].output == served.model.tokenizer.decode(new)
