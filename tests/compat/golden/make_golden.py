"""Golden values from TransformerLens 3 for the compatibility tests (run in a venv that has it).

It writes a random GPT-2-shaped checkpoint with ``save_pretrained`` (``tiny_gpt2/``, which interp loads), loads
the same weights into TransformerLens's ``HookedTransformer`` twice (unprocessed, and with its default weight
processing: fold LayerNorm, centre writing weights, centre the unembedding, fold value biases) and saves what
the tests compare against in ``golden.safetensors`` plus the labels in ``labels.json``.

    python -m venv VENV && VENV/bin/pip install torch==2.13.0 transformer-lens==3.9.0
    VENV/bin/python tests/compat/golden/make_golden.py
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import transformers
from safetensors.torch import save_file
from transformer_lens import FactoredMatrix, HookedTransformer, HookedTransformerConfig
from transformer_lens.pretrained.weight_conversions import convert_gpt2_weights

HERE = Path(__file__).parent
LAYERS, D, HEADS, VOCAB, CTX = 2, 32, 4, 64, 32
TOKENS = torch.tensor([[5, 17, 3, 42, 8, 17, 3, 42, 9, 11], [7, 1, 63, 2, 30, 31, 12, 5, 6, 4]])
CORRECT, INCORRECT = 42, 17


def checkpoint() -> transformers.GPT2LMHeadModel:
    """GPT-2 with random weights large enough to matter, and random LayerNorm gains and biases."""
    cfg = transformers.GPT2Config(
        n_layer=LAYERS,
        n_embd=D,
        n_head=HEADS,
        vocab_size=VOCAB,
        n_positions=CTX,
        bos_token_id=0,
        eos_token_id=0,
    )
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator)
            if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
                param.copy_(1.0 + 0.3 * noise)
            elif param.ndim == 1:
                param.copy_(0.1 * noise)
            else:
                param.copy_(0.15 * noise)
    return model


STARTS = "The After Hello Claire John Mary".split()
WORDS = (
    "cat sat on the mat John Mary and went to store gave a bottle of milk dog quick brown fox jumped over lazy"
    " World Claire shops then"
).split()


def tokenizer(folder: Path) -> None:
    """A word-level tokenizer over the GPT-2 byte alphabet: id 0 is ``<|endoftext|>`` (BOS, EOS, unknown), then
    words that start a text, words after a space (``" cat"``), punctuation and single letters."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    pieces = ["<|endoftext|>", *STARTS, *("\u0120" + word for word in WORDS), ".", ","]
    pieces += list("abcdefghijklmnopqrstuvwxyz")[: VOCAB - len(pieces)]
    backend = Tokenizer(models.WordLevel({p: i for i, p in enumerate(pieces)}, unk_token="<|endoftext|>"))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    backend.decoder = decoders.ByteLevel()
    backend.save(str(folder / "tokenizer.json"))
    settings = {"add_bos_token": True, "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"}
    (folder / "tokenizer_config.json").write_text(json.dumps(settings, indent=1) + "\n")


def tl_model(hf: transformers.GPT2LMHeadModel, process: bool) -> HookedTransformer:
    cfg = HookedTransformerConfig(
        n_layers=LAYERS,
        d_model=D,
        n_heads=HEADS,
        d_head=D // HEADS,
        d_mlp=4 * D,
        d_vocab=VOCAB,
        n_ctx=CTX,
        act_fn="gelu_new",
        normalization_type="LN",
        eps=hf.config.layer_norm_epsilon,
        original_architecture="GPT2LMHeadModel",
        default_prepend_bos=False,
        device="cpu",
    )
    model = HookedTransformer(cfg)
    model.load_and_process_state_dict(
        convert_gpt2_weights(hf, cfg),
        fold_ln=process,
        center_writing_weights=process,
        center_unembed=process,
        fold_value_biases=process,
    )
    return model.eval()


def main() -> None:
    hf = checkpoint()
    hf.save_pretrained(HERE / "tiny_gpt2")
    tokenizer(HERE / "tiny_gpt2")
    out: dict[str, torch.Tensor] = {"tokens": TOKENS}
    labels: dict[str, list[str]] = {}
    raw = tl_model(hf, process=False)
    out["raw.logits"] = raw(TOKENS)
    out["raw.loss"] = raw(TOKENS, return_type="loss")
    out["raw.loss_per_token"] = raw(TOKENS, return_type="loss", loss_per_token=True)
    model = tl_model(hf, process=True)
    logits, cache = model.run_with_cache(TOKENS)
    out["proc.logits"] = logits
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_in", "b_in", "W_out", "b_out"):
        out[f"proc.{name}"] = getattr(model, name)
    for name in ("W_E", "W_pos", "W_U", "b_U"):
        out[f"proc.{name}"] = getattr(model, name)
    stacks = {
        "accumulated": lambda: cache.accumulated_resid(incl_mid=True, apply_ln=True, return_labels=True),
        "accumulated_l1": lambda: cache.accumulated_resid(layer=1, apply_ln=True, return_labels=True),
        "accumulated_raw": lambda: cache.accumulated_resid(incl_mid=True, return_labels=True),
        "decompose": lambda: cache.decompose_resid(apply_ln=True, return_labels=True),
        "decompose_raw": lambda: cache.decompose_resid(return_labels=True),
        "decompose_l1_mlp": lambda: cache.decompose_resid(
            layer=1, mlp_input=True, apply_ln=True, return_labels=True
        ),
        "heads": lambda: cache.stack_head_results(incl_remainder=True, apply_ln=True, return_labels=True),
        "heads_raw_l1": lambda: cache.stack_head_results(layer=1, return_labels=True),
    }
    for key, make in stacks.items():
        out[f"proc.{key}"], labels[key] = make()
    decomposed = cache.decompose_resid(return_labels=False)
    heads = cache.stack_head_results()
    out["proc.logit_attrs_diff"] = cache.logit_attrs(decomposed, CORRECT, INCORRECT)
    out["proc.logit_attrs_heads_diff"] = cache.logit_attrs(heads[:, :, -1], CORRECT, INCORRECT, pos_slice=-1)
    out["proc.logit_attrs_token"] = cache.logit_attrs(decomposed, CORRECT)
    out["proc.OV.AB"] = model.OV.AB
    out["proc.QK.AB"] = model.QK.AB
    out["proc.OV.S"] = model.OV.S
    out["proc.QK.norm"] = model.QK.norm()
    generator = torch.Generator().manual_seed(2)
    a, b, c = (torch.randn(shape, generator=generator) for shape in ((5, 2), (2, 5), (5, 7)))
    factored = FactoredMatrix(a, b)
    out.update({"fm.A": a, "fm.B": b, "fm.C": c, "fm.AB": factored.AB, "fm.norm": factored.norm()})
    out.update({"fm.S": factored.S, "fm.U": factored.U, "fm.Vh": factored.Vh})
    out["fm.eigenvalues.real"] = factored.eigenvalues.real
    out["fm.eigenvalues.imag"] = factored.eigenvalues.imag
    out["fm.ABC"] = (factored @ c).AB
    out["fm.ABC.S"] = (factored @ c).S
    out["fm.corner"] = factored.get_corner(3)
    out = {k: v.detach().contiguous() for k, v in out.items()}
    save_file(out, HERE / "golden.safetensors")
    (HERE / "labels.json").write_text(json.dumps(labels, indent=1) + "\n")


if __name__ == "__main__":
    main()
