"""Neuronpedia's published client (``neuronpedia-inference-client`` 1.10), unchanged, against a live ``interp
serve`` on loopback: the packaged SmolLM2 with tiny random dictionaries (two SAEs on the stream as one source
set, an SAE on an attention layer's value mixture, a transcoder set at every layer), each read from its folder.
Every endpoint's values equal interp's library calls on the same prompt, and Neuronpedia's rankings, BOS
handling and rounding are written out here from its semantics. One server serves the whole module."""

from __future__ import annotations

import json

import neuronpedia_inference_client as npc
import pytest
import torch

from interp.analysis.decoder_similarity import decoder_similarity
from interp.analysis.feature_activations import direct_feature_attribution, feature_activations
from interp.analysis.steering import steer
from interp.analysis.steering_methods import cap, project
from interp.serve import serving
from tests.serve.helpers import MODEL_ID, client, dictionaries, raw, served_with
from tests.test_tokens import needs_smollm

pytestmark = [needs_smollm, pytest.mark.slow]

PROMPT = "The cat sat on the mat because it was tired"
OTHER = "Paris is the capital of"


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    import interp

    model = interp.load("smollm2-135m")
    served = served_with(model, dictionaries(model, tmp_path_factory.mktemp("dictionaries")))
    with serving(served) as url:
        yield served, client(url), url


def _bos_ids(model, text):
    """Neuronpedia's activation prompt: BOS first."""
    return model.to_tokens(text, prepend_bos=True).ids[0]


def _acts(served, source, ids):
    s = served.sources.get(source)
    return feature_activations(served.model, s.dictionary, ids, [s.layer])[s.layer]


def test_tokenize_as_the_checkpoint_does_or_with_bos_forced(live):
    served, api, _ = live
    model = served.model
    for prepend in (None, True, False):
        r = api.tokenize_post(npc.TokenizePostRequest(model=MODEL_ID, text=PROMPT, prepend_bos=prepend))
        ids = model.to_tokens(PROMPT, prepend_bos=prepend).ids[0].tolist()
        assert r.tokens == ids and r.token_strings == model.to_str_tokens(PROMPT, prepend_bos=prepend)
        assert r.prepend_bos == (ids[0] == model.tokenizer.bos_id)


def test_activation_single_of_a_feature_leaves_the_bos_out(live):
    served, api, _ = live
    r = api.activation_single_post(
        npc.ActivationSinglePostRequest(prompt=PROMPT, model=MODEL_ID, source="3-res", index="7")
    )
    ids = _bos_ids(served.model, PROMPT)
    values = _acts(served, "3-res", ids)[1:, 7].tolist()
    assert r.activation.values == values
    assert r.activation.max_value == max(values) and r.activation.max_value_index == values.index(max(values))
    assert r.tokens == served.model.to_str_tokens(PROMPT) and r.tokens_is_special == [False] * len(values)
    assert r.activation.dfa_values is None  # a stream SAE has no attention to split
    batch = api.activation_single_batch_post(
        npc.ActivationSingleBatchPostRequest(
            prompts=[PROMPT, OTHER], model=MODEL_ID, source="3-res", index="7"
        )
    )
    assert batch.results[0].activation == r.activation
    assert (
        batch.results[1].activation.values
        == _acts(served, "3-res", _bos_ids(served.model, OTHER))[1:, 7].tolist()
    )


def test_an_attention_sae_also_gives_direct_feature_attribution(live):
    served, api, _ = live
    ids = _bos_ids(served.model, PROMPT)
    acts = _acts(served, "2-att", ids)
    feature = int(acts[1:].max(0).values.argmax())  # a feature that fires after the BOS
    r = api.activation_single_post(
        npc.ActivationSinglePostRequest(prompt=PROMPT, model=MODEL_ID, source="2-att", index=str(feature))
    )
    t = r.activation.max_value_index
    assert r.activation.values == acts[1:, feature].tolist() and r.activation.max_value > 0
    source = served.sources.get("2-att")
    dfa = direct_feature_attribution(served.model, source.dictionary, ids, 2, feature, t + 1)[1:].tolist()
    assert r.activation.dfa_values == dfa and r.activation.dfa_target_index == t
    assert r.activation.dfa_max_value == max(dfa)


def test_activation_all_of_an_attention_sae_splits_each_feature_over_positions(live):
    served, api, _ = live
    r = api.activation_all_post(
        npc.ActivationAllPostRequest(
            prompt=PROMPT,
            model=MODEL_ID,
            source_set="att",
            selected_sources=[],
            sort_by_token_indexes=[],
            ignore_bos=True,
            num_results=3,
        )
    )
    ids = _bos_ids(served.model, PROMPT)
    source = served.sources.get("2-att")
    for a in r.activations:
        dfa = direct_feature_attribution(served.model, source.dictionary, ids, 2, a.index, a.max_value_index)
        assert a.dfa_values == dfa.tolist() and a.dfa_target_index == a.max_value_index
        assert a.dfa_max_value == max(a.dfa_values)


def test_a_vector_at_a_hook_is_its_dot_product_and_sae_vector_gives_the_encoder(live):
    served, api, _ = live
    model = served.model
    vec = api.util_sae_vector_post(npc.UtilSaeVectorPostRequest(model=MODEL_ID, source="5-res", index=11))
    sae = served.sources.get("5-res").dictionary.sae(5)
    assert vec.hook_name == "blocks.5.hook_resid_post" and vec.vector == sae.W_enc[:, 11].tolist()
    r = api.activation_single_post(
        npc.ActivationSinglePostRequest(prompt=PROMPT, model=MODEL_ID, vector=vec.vector, hook=vec.hook_name)
    )
    ids = model.to_tokens(PROMPT).ids[0]  # the checkpoint's own convention: no BOS for SmolLM2
    _, cache = model.run_with_cache(ids[None], names_filter=vec.hook_name)
    expected = cache[vec.hook_name][0] @ torch.tensor(vec.vector)
    assert r.activation.values == expected.tolist()
    # the encoder row's dot product is the feature's pre-activation less its bias (b_dec is subtracted first)
    pre = sae.pre_acts(cache[vec.hook_name][0])[:, 11] - sae.b_enc[11] + sae.b_dec @ sae.W_enc[:, 11]
    torch.testing.assert_close(torch.tensor(r.activation.values), pre.detach(), rtol=1e-5, atol=1e-4)


def _ranked(served, sources, ids, n, ignore_bos, indexes):
    """Neuronpedia's activation/all, written out: per source by max (or sum at indexes), stably, then merged."""
    rows, by_dictionary = [], {}
    for (
        name
    ) in sources:  # one library call per dictionary, over every layer asked of it, as the route makes it
        s = served.sources.get(name)
        by_dictionary.setdefault(id(s.dictionary), (s.dictionary, []))[1].append(s.layer)
    acts = {
        (key, layer): a
        for key, (dictionary, layers) in by_dictionary.items()
        for layer, a in feature_activations(served.model, dictionary, ids, layers).items()
    }
    for name in sources:
        s = served.sources.get(name)
        a = acts[(id(s.dictionary), s.layer)].T.clone()  # [feature, pos]
        if ignore_bos:
            a[:, 0] = 0
        for f in range(a.shape[0]):
            key = float(a[f, indexes].sum()) if indexes else float(a[f].max())
            rows.append((key, name, f, a[f]))
    rows = sorted(rows, key=lambda r: -r[0])[:n]  # Python's sort is stable: source order, then feature order
    return [(name, f, row.tolist()) for _, name, f, row in rows]


@pytest.mark.parametrize("ignore_bos,indexes", [(True, []), (False, []), (True, [3, 4])])
def test_activation_all_ranks_a_source_sets_features(live, ignore_bos, indexes):
    served, api, _ = live
    r = api.activation_all_post(
        npc.ActivationAllPostRequest(
            prompt=PROMPT,
            model=MODEL_ID,
            source_set="res",
            selected_sources=[],
            sort_by_token_indexes=indexes,
            ignore_bos=ignore_bos,
            num_results=12,
        )
    )
    ids = _bos_ids(served.model, PROMPT)
    expected = _ranked(served, ["3-res", "5-res"], ids, 12, ignore_bos, indexes)
    assert [(a.source, a.index, a.values) for a in r.activations] == expected
    assert r.tokens == served.model.tokenizer.to_str_tokens(ids.tolist())
    for a in r.activations:
        assert a.max_value == max(a.values) and a.values[a.max_value_index] == a.max_value
        assert a.sum_values == (pytest.approx(sum(a.values[i] for i in indexes), rel=1e-6) if indexes else 0)


def test_activation_all_of_selected_sources_and_in_batches(live):
    served, api, _ = live
    fields = dict(
        model=MODEL_ID,
        source_set="tc",
        selected_sources=["4-tc", "1-tc"],
        sort_by_token_indexes=[],
        ignore_bos=True,
    )
    single = api.activation_all_post(npc.ActivationAllPostRequest(prompt=OTHER, num_results=7, **fields))
    ids = _bos_ids(served.model, OTHER)
    assert [(a.source, a.index, a.values) for a in single.activations] == _ranked(
        served, ["4-tc", "1-tc"], ids, 7, True, []
    )
    batch = api.activation_all_batch_post(
        npc.ActivationAllBatchPostRequest(prompts=[PROMPT, OTHER], num_results=7, **fields)
    )
    assert batch.results[1].activations == single.activations and len(batch.results) == 2


def test_topk_by_token(live):
    served, api, _ = live
    r = api.activation_topk_by_token_post(
        npc.ActivationTopkByTokenPostRequest(
            prompt=PROMPT, model=MODEL_ID, source="7-tc", top_k=3, ignore_bos=True
        )
    )
    ids = _bos_ids(served.model, PROMPT)
    values, features = _acts(served, "7-tc", ids).topk(3, dim=1)
    assert [x.token_position for x in r.results] == list(
        range(1, len(ids))
    )  # positions in the prompt, BOS left out
    for x in r.results:
        p = x.token_position
        assert [f.feature_index for f in x.top_features] == features[p].tolist()
        assert [f.activation_value for f in x.top_features] == values[p].tolist()
        assert x.token == served.model.tokenizer.to_str_tokens(ids.tolist())[p] and not x.is_special
    batch = api.activation_topk_by_token_batch_post(
        npc.ActivationTopkByTokenBatchPostRequest(
            prompts=[PROMPT], model=MODEL_ID, source="7-tc", top_k=3, ignore_bos=True
        )
    )
    assert batch.results[0].results == r.results
    kept = api.activation_topk_by_token_post(
        npc.ActivationTopkByTokenPostRequest(prompt=PROMPT, model=MODEL_ID, source="7-tc", ignore_bos=False)
    )
    assert (
        kept.results[0].token_position == 0
        and kept.results[0].is_special
        and len(kept.results[0].top_features) == 5
    )


def test_activation_source_lists_every_active_feature(live):
    served, api, _ = live
    r = api.activation_source_post(
        npc.ActivationSourcePostRequest(prompts=[PROMPT, OTHER], model=MODEL_ID, source="3-res")
    )
    for result, text in zip(r.results, (PROMPT, OTHER), strict=True):
        acts = _acts(served, "3-res", _bos_ids(served.model, text))
        expected = {}
        for p, f in acts.nonzero().tolist():
            if p:  # position 0 is the BOS
                expected.setdefault(str(f), []).append([p, round(float(acts[p, f]), 3)])
        assert result.active_features == expected and expected


def test_topk_by_decoder_cossim(live):
    served, api, _ = live
    source = served.sources.get("3-res")
    r = api.util_sae_topk_by_decoder_cossim_post(
        npc.UtilSaeTopkByDecoderCossimPostRequest(
            feature=npc.NPFeature(model=MODEL_ID, source="3-res", index=9),
            model=MODEL_ID,
            source="3-res",
            num_results=6,
        )
    )
    values, features = decoder_similarity(source.dictionary, 3, source.dictionary.decoder(3)[9, 0], 6)
    assert [x.feature.index for x in r.topk_decoder_cossim_features] == features.tolist()
    assert [x.cosine_similarity for x in r.topk_decoder_cossim_features] == values.tolist()
    assert r.topk_decoder_cossim_features[0].feature.index == 9
    direction = torch.randn(576, generator=torch.Generator().manual_seed(0))
    by_vector = api.util_sae_topk_by_decoder_cossim_post(
        npc.UtilSaeTopkByDecoderCossimPostRequest(
            vector=direction.tolist(), model=MODEL_ID, source="5-res", num_results=4
        )
    )
    values, features = decoder_similarity(served.sources.get("5-res").dictionary, 5, direction, 4)
    assert [x.feature.index for x in by_vector.topk_decoder_cossim_features] == features.tolist()


STEER = dict(model=MODEL_ID, n_completion_tokens=6, strength_multiplier=2.0, freq_penalty=0.0, seed=3)


def _feature_hooks(served, source, index, strength, make, normalize=False):
    s = served.sources.get(source)
    rows = s.dictionary.decoder(s.layer, torch.tensor([index]))[0].float()
    if normalize:
        rows = rows / rows.norm()
    hooks = []
    for row, out in zip(rows, s.dictionary.output_layers(s.layer), strict=True):
        hook = s.dictionary.output_hook(out)
        hooks.append((hook, make(row, strength)))
    return hooks


@pytest.mark.parametrize(
    "method,make", [("SIMPLE_ADDITIVE", steer), ("ORTHOGONAL_DECOMP", project), ("PROJECTION_CAP", cap)]
)
def test_steer_completion_equals_generation_with_the_same_edit(live, method, make):
    served, api, _ = live
    model = served.model
    feature = npc.NPSteerFeature(
        model=MODEL_ID, source="3-res", index=7, strength=40.0 if method != "PROJECTION_CAP" else -20.0
    )
    r = api.steer_completion_post(
        npc.SteerCompletionRequest(
            prompt=PROMPT,
            steer_method=method,
            normalize_steering=method == "SIMPLE_ADDITIVE",
            types=["STEERED", "DEFAULT"],
            features=[feature],
            temperature=0,
            **STEER,
        )
    )
    ids = _bos_ids(model, PROMPT)
    hooks = _feature_hooks(
        served, "3-res", 7, 2.0 * feature.strength, make, normalize=method == "SIMPLE_ADDITIVE"
    )
    steered = model.generate(ids, 6, fwd_hooks=hooks).text[0]
    default = model.generate(ids, 6).text[0]
    assert [(o.type.value, o.output) for o in r.outputs] == [("STEERED", steered), ("DEFAULT", default)]
    assert steered != default


def test_steering_with_a_vector_sampling_and_logprobs(live):
    served, api, _ = live
    model = served.model
    vector = torch.randn(576, generator=torch.Generator().manual_seed(1))
    r = api.steer_completion_post(
        npc.SteerCompletionRequest(
            prompt=OTHER,
            steer_method="SIMPLE_ADDITIVE",
            normalize_steering=False,
            types=["DEFAULT", "STEERED"],
            vectors=[
                npc.NPSteerVector(
                    steering_vector=vector.tolist(), strength=3.0, hook="blocks.6.hook_resid_pre"
                )
            ],
            temperature=0.8,
            n_logprobs=3,
            **{**STEER, "freq_penalty": 0.5},
        )
    )
    ids = _bos_ids(model, OTHER)
    sampling = dict(do_sample=True, temperature=0.8, seed=3, frequency_penalty=0.5, return_logits=True)
    default = model.generate(ids, 6, **sampling)
    steered = model.generate(ids, 6, fwd_hooks=[("blocks.6.hook_resid_pre", steer(vector, 6.0))], **sampling)
    assert [o.output for o in r.outputs] == [default.text[0], steered.text[0]]
    for output, generation in zip(r.outputs, (default, steered), strict=True):
        logp = torch.log_softmax(generation.logits[0].float(), dim=-1)
        assert [lp.token for lp in output.logprobs] == [
            model.tokenizer.decode([t]) for t in generation.new_tokens[0]
        ]
        for step, (lp, token) in enumerate(zip(output.logprobs, generation.new_tokens[0], strict=True)):
            assert lp.logprob == float(logp[step, token])
            assert [t.logprob for t in lp.top_logprobs] == logp[step].topk(3).values.tolist()


def test_streamed_completion_frames_end_at_the_answer(live):
    served, api, url = live
    request = npc.SteerCompletionRequest(
        prompt=PROMPT,
        steer_method="SIMPLE_ADDITIVE",
        normalize_steering=False,
        types=["STEERED", "DEFAULT"],
        features=[npc.NPSteerFeature(model=MODEL_ID, source="5-tc", index=3, strength=20.0)],
        temperature=0,
        stream=True,
        **STEER,
    )
    response = api.steer_completion_post_without_preload_content(request)
    assert response.status == 200 and response.headers["content-type"].startswith("text/event-stream")
    body = response.read().decode()
    frames = [
        npc.SteerCompletionPost200Response.from_json(f[len("data: ") :]) for f in body.split("\n\n") if f
    ]
    assert len(frames) > 2  # frames as the text is made, not one at the end
    request.stream = False
    whole = api.steer_completion_post(request)
    assert frames[-1] == whole
    steered = [f.outputs[0].output for f in frames]
    assert all(
        b.startswith(a) for a, b in zip(steered, steered[1:], strict=False)
    )  # each frame extends the last
    ids = _bos_ids(served.model, PROMPT)
    hooks = _feature_hooks(served, "5-tc", 3, 40.0, steer)
    assert whole.outputs[0].output == served.model.generate(ids, 6, fwd_hooks=hooks).text[0]


def test_chat_completion_through_the_chat_template(live):
    served, api, _ = live
    model = served.model
    chat = [{"role": "user", "content": "Name a colour."}]
    for special in (True, False):
        r = api.steer_completion_chat_post(
            npc.SteerCompletionChatPostRequest(
                prompt=[npc.NPSteerChatMessage(**m) for m in chat],
                steer_method="SIMPLE_ADDITIVE",
                normalize_steering=False,
                types=["STEERED", "DEFAULT"],
                features=[npc.NPSteerFeature(model=MODEL_ID, source="3-res", index=7, strength=30.0)],
                temperature=0,
                steer_special_tokens=special,
                **STEER,
            )
        )
        tokens = model.tokenizer.chat_tokens(chat)
        ids = tokens.ids[0]
        keep = "all" if special else [i for i, s in enumerate(tokens.special[0].tolist()) if not s] + ["new"]
        hooks = [
            (h, steer(fn.vector, fn.scale, keep)) for h, fn in _feature_hooks(served, "3-res", 7, 60.0, steer)
        ]
        steered = model.generate(ids, 6, fwd_hooks=hooks).text[0]
        default = model.generate(ids, 6).text[0]
        raw_prompt = model.tokenizer.decode(ids.tolist())
        assert r.input.raw == raw_prompt and [m.to_dict() for m in r.input.chat_template] == chat
        assert [(o.type.value, o.raw) for o in r.outputs] == [
            ("STEERED", raw_prompt + steered),
            ("DEFAULT", raw_prompt + default),
        ]
        assert r.outputs[0].chat_template[-1].to_dict() == {"role": "assistant", "content": steered.strip()}


def test_the_wire_format_is_neuronpedias(live):
    """The keys the client reads, in the JSON itself (optional fields left out, not null)."""
    served, _, url = live
    status, body = raw(
        url,
        "POST",
        "/v1/steer/completion",
        json.dumps(
            {
                "prompt": "Hi",
                "model": MODEL_ID,
                "steer_method": "SIMPLE_ADDITIVE",
                "normalize_steering": False,
                "types": ["DEFAULT"],
                "vectors": [],
                "n_completion_tokens": 2,
                "temperature": 0,
                "strength_multiplier": 1,
                "freq_penalty": 0,
                "seed": 1,
            }
        ).encode(),
    )
    assert status == 200 and list(body) == ["outputs"] and list(body["outputs"][0]) == ["type", "output"]
