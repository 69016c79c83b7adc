"""The SAELens face gives SAELens 6.54's numbers on the same SAEs and model.

Golden values come from ``golden/make_sae_lens_golden.py``: SAEs written by SAELens itself (``golden/saes/``:
standard, TopK, JumpReLU, ``hook_z``, ``layer_norm`` input normalisation, a transcoder, a pre-6.0 folder), run
by SAELens's ``SAE`` and ``HookedSAETransformer`` on the random GPT-2-shaped checkpoint: configs, activations,
reconstructions, spliced logits with and without the error term, cache keys and values, an edited run, greedy
generation with an SAE attached, and ``ActivationsStore`` rows and activations.
"""

from __future__ import annotations

import json
import sys

import pytest
import torch
from safetensors.torch import load_file
from torch.testing import assert_close

import interp
import interp.compat.sae_lens as sae_lens
from hooks import UnknownHookError
from tests.compat.models import CHECKPOINT, GOLDEN

G = load_file(GOLDEN / "sae_lens.safetensors")
R = json.loads((GOLDEN / "sae_lens.json").read_text())
SAES = GOLDEN / "saes"
NAMES = ["standard", "topk", "jumprelu", "hook_z", "layer_norm", "transcoder", "legacy"]
TOKENS = G["tokens"]
TOL = dict(atol=2e-5, rtol=1e-5)
# Hook points one library has and the other does not (see docs/sae-lens.md): SAELens adds an input hook to
# TransformerLens's MLPs; interp caches each head's result when everything is cached.
ONLY_SAELENS = {"blocks.0.mlp.hook_in", "blocks.1.mlp.hook_in"}
ONLY_INTERP = {"blocks.0.attn.hook_result", "blocks.1.attn.hook_result"}


@pytest.fixture(scope="module")
def model():
    return sae_lens.HookedSAETransformer.from_pretrained(CHECKPOINT)


def load(name: str) -> sae_lens.SAE:
    return sae_lens.SAE.load_from_disk(SAES / name)


@pytest.mark.parametrize("name", NAMES)
def test_config_in_saelens_layout(name):
    sae = load(name)
    ours, theirs = sae.cfg.to_dict(), R["cfg"][name]
    if name == "legacy":  # a pre-6.0 file records no version; SAELens reports its own there
        theirs["metadata"].pop("sae_lens_version")
    assert ours == theirs
    assert sae.cfg.architecture() == theirs["architecture"]
    assert (
        sae.cfg.metadata.hook_name == theirs["metadata"]["hook_name"] and sae.cfg.metadata.context_size == 8
    )
    assert sae.cfg.metadata.not_recorded is None  # SAELens's metadata answers None for what was never set
    assert sae_lens.SAE.from_dict(sae.cfg.to_dict()).cfg == sae.cfg


@pytest.mark.parametrize("name", NAMES)
def test_encode_decode_forward_equal_saelens(name, model):
    sae = load(name)
    x = G[f"{name}.input"]
    _, cache = model.run_with_cache(TOKENS)
    assert_close(cache[sae.cfg.metadata.hook_name], x, **TOL)  # the model's activation SAELens read
    acts = sae.encode(x)
    assert_close(acts, G[f"{name}.encode"], **TOL)
    assert_close(sae.decode(acts), G[f"{name}.decode"], **TOL)  # without the input, as SAELens decodes
    assert_close(sae(x), G[f"{name}.forward"], **TOL)
    sae.use_error_term = True  # the output is then the input, with edits to latents showing through
    assert_close(sae(x), x.to(torch.float32), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("error", [False, True], ids=["no_error_term", "error_term"])
@pytest.mark.parametrize("name", NAMES)
def test_spliced_logits_cache_keys_and_values_equal_saelens(name, error, model):
    sae = load(name)
    tag = f"{name}.error" if error else name
    assert_close(model.run_with_saes(TOKENS, saes=[sae], use_error_term=error), G[f"{tag}.logits"], **TOL)
    _, cache = model.run_with_cache_with_saes(TOKENS, saes=[sae], use_error_term=error)
    theirs = set(R["cache_keys"][tag])
    assert set(cache.keys()) - ONLY_INTERP == theirs - ONLY_SAELENS
    assert sae.cfg.hook_name_out not in cache  # the hook the SAE replaces, as in SAELens
    for key in sorted(k for k in theirs if ".hook_sae_" in k):
        assert_close(cache[key], G[f"{tag}.cache.{key}"], **TOL, msg=key)
    assert model.acts_to_saes == {}  # the call attached them for itself only


def test_two_saes_each_with_its_own_error_term(model):
    standard, topk = load("standard"), load("topk")
    standard.use_error_term = True
    assert_close(model.run_with_saes(TOKENS, saes=[standard, topk]), G["pair.logits"], **TOL)


def test_an_edited_latent_shows_through_the_error_term(model):
    model.add_sae(load("jumprelu"), use_error_term=True)
    try:

        def zero(acts, hook):
            acts[:, :, 3] = 0.0
            return acts

        edited = model.run_with_hooks(
            TOKENS, fwd_hooks=[("blocks.1.hook_resid_post.hook_sae_acts_post", zero)]
        )
        assert_close(edited, G["edited.logits"], **TOL)
        assert not torch.allclose(edited, model(TOKENS))
    finally:
        model.reset_saes()
    assert_close(model(TOKENS), sae_lens.HookedSAETransformer.from_pretrained(CHECKPOINT)(TOKENS), **TOL)


def test_generate_with_an_attached_sae(model):
    model.add_sae(load("standard"))
    try:
        assert model.acts_to_saes.keys() == {"blocks.0.hook_resid_pre"}
        out = model.generate(TOKENS[:1, :4], max_new_tokens=5, do_sample=False, verbose=False)
        assert torch.equal(out, G["generate.tokens"])
    finally:
        model.reset_saes()
    assert model.acts_to_saes == {}


def test_saes_context_restores_what_was_attached(model):
    standard, other = load("standard"), load("legacy")  # both read blocks.0.hook_resid_pre
    model.add_sae(standard)
    try:
        with model.saes([other, load("topk")]):
            assert model.acts_to_saes == {
                "blocks.0.hook_resid_pre": other,
                "blocks.1.hook_mlp_out": model.acts_to_saes["blocks.1.hook_mlp_out"],
            }
        assert model.acts_to_saes == {"blocks.0.hook_resid_pre": standard}
        assert_close(model(TOKENS), G["standard.logits"], **TOL)
        with pytest.raises(ValueError, match=r"no SAE is attached at \['blocks.1.hook_mlp_out'\]"):
            model.reset_saes("blocks.1.hook_mlp_out")
    finally:
        model.reset_saes()


def test_an_sae_for_a_hook_the_model_lacks_is_refused(model):
    sae = sae_lens.SAE.from_dict(
        {**R["cfg"]["standard"], "metadata": {"hook_name": "blocks.0.hook_resid_pree"}}
    )
    with pytest.raises(UnknownHookError, match="did you mean .blocks.0.hook_resid_pre."):
        model.add_sae(sae)
    assert model.acts_to_saes == {} and not [name for name in model.hook_dict if ".hook_sae_" in name]
    with pytest.raises(ValueError, match="exclude_special_tokens is not supported by interp's splice"):
        model.run_with_saes(TOKENS, saes=[load("standard")], exclude_special_tokens=True)
    assert model.acts_to_saes == {}


def test_activations_store_rows_and_activations_equal_saelens(model, tmp_path):
    datasets = pytest.importorskip("datasets")
    texts = R["store_texts"]  # the texts SAELens's store read
    (tmp_path / "texts.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts if t))
    sources = {
        "dataset": datasets.Dataset.from_dict({"text": texts}),
        "list": texts,
        "file": str(tmp_path / "texts.jsonl"),
    }
    for source in sources.values():
        store = sae_lens.ActivationsStore.from_sae(
            model,
            load("topk"),
            dataset=source,
            store_batch_size_prompts=2,
            n_batches_in_buffer=2,
            train_batch_size_tokens=8,
        )
        for i in range(3):
            tokens = store.get_batch_tokens()
            assert torch.equal(tokens, G[f"store.tokens.{i}"])
            assert_close(store.get_activations(tokens), G[f"store.activations.{i}"], **TOL)
    fresh = [
        sae_lens.ActivationsStore.from_sae(
            model,
            load("topk"),
            dataset=texts,
            store_batch_size_prompts=2,
            n_batches_in_buffer=2,
            train_batch_size_tokens=8,
        )
        for _ in range(2)
    ]
    batch = fresh[0].next_batch()  # drawn from the first two batches, shuffled
    seen = torch.cat([fresh[1].get_activations(fresh[1].get_batch_tokens()).flatten(0, 1) for _ in range(2)])
    assert batch.shape == (8, 32)
    where = [int(torch.isclose(seen, row, atol=1e-6).all(-1).nonzero()[0]) for row in batch]
    assert len(set(where)) == 8  # eight different activations, each one of the buffer's


def test_activations_store_refuses_what_is_not_here(model):
    with pytest.raises(
        FileNotFoundError, match="'NeelNanda/pile-10k' is not a file or folder on this machine"
    ):
        sae_lens.ActivationsStore.from_sae(model, load("topk"), dataset="NeelNanda/pile-10k")
    with pytest.raises(ValueError, match="the SAE's metadata has no dataset"):
        sae_lens.ActivationsStore.from_sae(model, load("standard"))


def test_from_pretrained_finds_a_local_release_or_says_why_not(tmp_path):
    sae = sae_lens.SAE.from_pretrained(release=str(SAES), sae_id="standard")
    assert sae.cfg.metadata.hook_name == "blocks.0.hook_resid_pre"
    one = sae_lens.SAE.from_pretrained(str(SAES / "jumprelu"), "blocks.1.hook_resid_post")
    assert torch.equal(one.threshold, load("jumprelu").threshold)
    sae, cfg_dict, sparsity = sae_lens.SAE.from_pretrained_with_cfg_and_sparsity(str(SAES), "topk")
    assert cfg_dict == R["cfg"]["topk"] and sparsity is None
    with pytest.raises(FileNotFoundError, match="'gpt2-small-res-jb' is not a folder on this machine"):
        sae_lens.SAE.from_pretrained("gpt2-small-res-jb", "blocks.8.hook_resid_pre")
    with pytest.raises(
        FileNotFoundError, match="has no SAE 'blocks.8.hook_resid_pre'; its SAE folders are: hook_z"
    ):
        sae_lens.SAE.from_pretrained(str(SAES), "blocks.8.hook_resid_pre")


def test_save_model_keeps_saelens_layout_and_metadata(tmp_path):
    sae = load("legacy")
    weights, cfg = sae.save_model(tmp_path / "copy")
    assert weights.name == "sae_weights.safetensors" and cfg.name == "cfg.json"
    again = sae_lens.SAE.load_from_disk(tmp_path / "copy")
    assert again.cfg.metadata.dataset_path == "local-texts" and again.cfg.metadata.context_size == 8
    for name, param in sae.named_parameters():
        assert torch.equal(param, getattr(again, name))


def test_the_face_is_interps_sae_and_splices_with_model_saes(model):
    plain = interp.sae.load(SAES / "hook_z")
    face = sae_lens.SAE.from_interp(plain)
    assert face is plain and isinstance(face, interp.sae.SAE)
    with model.saes([face], use_error_term=False):  # interp's own splice takes it
        assert_close(model(TOKENS), G["hook_z.logits"], **TOL)
    face.to(torch.float64)
    assert face.cfg.dtype == "float64" and face.cfg.device == "cpu"


def test_install_registers_sae_lens_and_transformer_lens(monkeypatch):
    import importlib

    for name in [n for n in sys.modules if n.split(".")[0] in ("sae_lens", "transformer_lens")]:
        monkeypatch.delitem(sys.modules, name)
    sae_lens.install()
    from sae_lens import SAE, ActivationsStore, HookedSAETransformer  # noqa: F401

    assert SAE is sae_lens.SAE and HookedSAETransformer is sae_lens.HookedSAETransformer
    assert importlib.import_module("sae_lens.training.activations_store").ActivationsStore is ActivationsStore
    assert importlib.import_module("transformer_lens.utils").tokenize_and_concatenate is not None
