"""Golden values of SAELens 6 on the random GPT-2-shaped checkpoint (run in a venv that has it).

It writes random SAEs with SAELens itself (``SAE.from_dict``, then ``save_model``) into ``saes/``: a standard
SAE on ``blocks.0.hook_resid_pre``, a TopK SAE on ``blocks.1.hook_mlp_out``, a JumpReLU SAE on
``blocks.1.hook_resid_post``, a ``hook_z`` SAE on ``blocks.0.attn.hook_z``, a standard SAE with ``layer_norm``
input normalisation on ``blocks.1.hook_resid_pre``, a transcoder from ``blocks.0.ln2.hook_normalized`` to
``blocks.0.hook_mlp_out``, and a folder in the pre-6.0 layout (``hook_point``, flat metadata). Then, with
SAELens's ``SAE.load_from_disk`` and its ``HookedSAETransformer`` on the checkpoint (processed as
``from_pretrained`` processes it), it records in ``sae_lens.safetensors`` and ``sae_lens.json``:

- each SAE's ``cfg.to_dict()``, and ``encode``, ``decode``, ``forward`` (with and without the error term) of
  the hook's activations;
- the logits with each SAE spliced (``run_with_saes``, with and without the error term), with two at once,
  with a latent zeroed through a hook on ``hook_sae_acts_post`` (error term on), and the keys and SAE values of
  ``run_with_cache_with_saes``;
- greedy ``generate`` with an SAE attached by ``add_sae``;
- ``ActivationsStore.from_sae`` over a small ``datasets.Dataset``: three ``get_batch_tokens`` and the
  ``get_activations`` of each.

The model's tokenizer is loaded from a copy of ``tiny_gpt2/`` whose ``tokenizer_config.json`` names
``PreTrainedTokenizerFast`` (see ``make_patching_golden.py``). The versions are in the files' metadata::

    python -m venv VENV && VENV/bin/pip install torch==2.13.0
    VENV/bin/pip install transformer-lens==3.9.0 sae-lens==6.54.12
    HF_HUB_OFFLINE=1 VENV/bin/python tests/compat/golden/make_sae_lens_golden.py
"""

from __future__ import annotations

import json
import shutil
import tempfile
from importlib.metadata import version
from pathlib import Path

import datasets
import torch
from make_golden import HERE, TOKENS, checkpoint, tl_model, versions
from sae_lens import SAE, ActivationsStore, HookedSAETransformer
from safetensors.torch import save_file

SAES = HERE / "saes"
SAE_LENS = "6.54.12"  # the version the committed golden values come from
D, D_SAE = 32, 64
ZEROED = 3  # the latent a hook zeroes in the edited run
STORE_TEXTS = [
    "The cat sat on the mat. The dog sat on the mat.",
    "After John and Mary went to the store, Mary gave a bottle of milk to John.",
    "Hello World",
    "",
    "Claire went to the store then gave a bottle of milk to Mary. The quick brown fox jumped over the lazy dog.",
    "John and Mary went to the store.",
]


def specs() -> dict[str, dict]:
    """Name -> SAELens 6 config of each SAE written (the legacy one is written by hand in ``legacy``)."""

    def meta(hook: str, **more) -> dict:
        return {"hook_name": hook, "model_name": "tiny-gpt2", "context_size": 8, "prepend_bos": True, **more}

    base = {"d_in": D, "d_sae": D_SAE, "dtype": "float32", "device": "cpu", "apply_b_dec_to_input": True}
    base.update(normalize_activations="none", reshape_activations="none")
    return {
        "standard": {**base, "architecture": "standard", "metadata": meta("blocks.0.hook_resid_pre")},
        "topk": {
            **base,
            "architecture": "topk",
            "k": 5,
            "rescale_acts_by_decoder_norm": False,
            "metadata": meta("blocks.1.hook_mlp_out", dataset_path="local-texts"),
        },
        "jumprelu": {**base, "architecture": "jumprelu", "metadata": meta("blocks.1.hook_resid_post")},
        "hook_z": {
            **base,
            "architecture": "standard",
            "reshape_activations": "hook_z",
            "metadata": meta("blocks.0.attn.hook_z"),
        },
        "layer_norm": {
            **base,
            "architecture": "standard",
            "normalize_activations": "layer_norm",
            "metadata": meta("blocks.1.hook_resid_pre"),
        },
        "transcoder": {
            **base,
            "architecture": "transcoder",
            "d_out": D,
            "apply_b_dec_to_input": False,
            "metadata": meta("blocks.0.ln2.hook_normalized", hook_name_out="blocks.0.hook_mlp_out"),
        },
    }


def randomise(sae: SAE, seed: int) -> None:
    """Weights large enough that some latents fire and some do not."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in sae.named_parameters():
            noise = torch.randn(param.shape, generator=generator)
            if name == "threshold":
                param.copy_(0.3 + 0.2 * noise.abs())
            elif name == "b_enc":
                param.copy_(0.2 * noise - 0.1)
            elif param.ndim == 1:
                param.copy_(0.1 * noise)
            else:
                param.copy_(0.3 * noise)


def legacy(folder: Path, source: Path) -> None:
    """The standard SAE's weights under a pre-6.0 ``cfg.json`` (flat, ``hook_point``, a bool normalisation)."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(source / "sae_weights.safetensors", folder / "sae_weights.safetensors")
    flat = {
        "d_in": D,
        "d_sae": D_SAE,
        "dtype": "torch.float32",
        "device": "cpu",
        "model_name": "tiny-gpt2",
        "hook_point": "blocks.0.hook_resid_pre",
        "hook_point_layer": 0,
        "hook_point_head_index": None,
        "activation_fn_str": "relu",
        "apply_b_dec_to_input": True,
        "finetuning_scaling_factor": False,
        "context_size": 8,
        "dataset_path": "local-texts",
        "normalize_activations": False,
        "sae_lens_training_version": "2.1.3",
    }
    (folder / "cfg.json").write_text(json.dumps(flat, indent=1) + "\n")


def sae_model(folder: Path) -> HookedSAETransformer:
    config = json.loads((HERE / "tiny_gpt2" / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(
        json.dumps({**config, "tokenizer_class": "PreTrainedTokenizerFast"})
    )
    return tl_model(checkpoint(), process=True, folder=folder, cls=HookedSAETransformer)


def main() -> None:
    meta = {**versions(), "sae-lens": version("sae-lens")}
    if meta["sae-lens"] != SAE_LENS:
        raise SystemExit(f"sae-lens {meta['sae-lens']} is installed; the golden values pin {SAE_LENS}")
    shutil.rmtree(SAES, ignore_errors=True)
    for seed, (name, cfg) in enumerate(specs().items()):
        sae = SAE.from_dict(cfg)
        randomise(sae, seed)
        sae.save_model(SAES / name)
    legacy(SAES / "legacy", SAES / "standard")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "tiny_gpt2"
        shutil.copytree(HERE / "tiny_gpt2", folder)
        model = sae_model(folder)
    out: dict[str, torch.Tensor] = {"tokens": TOKENS}
    record: dict = {"versions": meta, "cfg": {}, "cache_keys": {}, "store_texts": STORE_TEXTS}
    _, clean_cache = model.run_with_cache(TOKENS)
    record["cache_keys"]["none"] = sorted(clean_cache.keys())
    saes = {name: SAE.load_from_disk(SAES / name) for name in [*specs(), "legacy"]}
    for name, sae in saes.items():
        record["cfg"][name] = json.loads(json.dumps(sae.cfg.to_dict(), default=str))
        x = clean_cache[sae.cfg.metadata.hook_name]
        acts = sae.encode(x)
        out[f"{name}.input"], out[f"{name}.encode"] = x, acts
        out[f"{name}.decode"] = sae.decode(acts)
        out[f"{name}.forward"] = sae(x)
        for error in (False, True):
            tag = f"{name}.error" if error else name
            out[f"{tag}.logits"] = model.run_with_saes(TOKENS, saes=[sae], use_error_term=error)
            _, cache = model.run_with_cache_with_saes(TOKENS, saes=[sae], use_error_term=error)
            record["cache_keys"][tag] = sorted(cache.keys())
            for key in cache.keys():
                if ".hook_sae_" in key:
                    out[f"{tag}.cache.{key}"] = cache[key]
    sae = saes["standard"]
    sae.use_error_term = True
    out["pair.logits"] = model.run_with_saes(TOKENS, saes=[sae, saes["topk"]])  # error term: each SAE's own

    def zero(acts, hook):
        acts[:, :, ZEROED] = 0.0
        return acts

    model.add_sae(saes["jumprelu"], use_error_term=True)
    out["edited.logits"] = model.run_with_hooks(
        TOKENS, fwd_hooks=[("blocks.1.hook_resid_post.hook_sae_acts_post", zero)]
    )
    model.reset_saes()
    model.add_sae(saes["standard"], use_error_term=False)
    out["generate.tokens"] = model.generate(TOKENS[:1, :4], max_new_tokens=5, do_sample=False, verbose=False)
    model.reset_saes()
    store = ActivationsStore.from_sae(
        model,
        saes["topk"],
        dataset=datasets.Dataset.from_dict({"text": STORE_TEXTS}),
        streaming=False,
        store_batch_size_prompts=2,
        n_batches_in_buffer=2,
        train_batch_size_tokens=8,
    )
    for i in range(3):
        tokens = store.get_batch_tokens()
        out[f"store.tokens.{i}"], out[f"store.activations.{i}"] = tokens, store.get_activations(tokens)
    out = {k: v.detach().clone().contiguous() for k, v in out.items()}  # cached values may share storage
    save_file(out, HERE / "sae_lens.safetensors", metadata=meta)
    (HERE / "sae_lens.json").write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
