"""Golden values from TransformerLens 3 for the compatibility tests (run in a venv that has it).

It writes a random GPT-2-shaped checkpoint with ``save_pretrained`` (``tiny_gpt2/``, which interp loads), loads
the same weights into TransformerLens's ``HookedTransformer`` twice (unprocessed, and with its default weight
processing: fold LayerNorm, centre writing weights, centre the unembedding, fold value biases) and saves what
the tests compare against in ``golden.safetensors`` plus the labels in ``labels.json``. Besides:

- ``demo.*``: the steps of ``tests/compat/test_demo_style.py`` (a loss, a patching sweep, head attributions,
  induction scores, the OV copying score, token positions) run by TransformerLens on the processed model.
- ``bridge.*``: every activation TransformerLens 3's ``TransformerBridge`` caches on the same checkpoint, by
  its own hook names (``labels.json`` lists them), and ``bridge_split.*`` those that exist only with split
  inputs, head results and the MLP input hook turned on.
- ``induction.*``: ``transformer_lens.evals.induction_loss`` after ``torch.manual_seed``, on a second
  checkpoint (``tiny_gpt2_20k/``) whose vocabulary holds the ids 100 to 19999 it draws.

The versions it ran with are in the file's metadata (``transformer_lens``, ``transformers``, ``torch``)::

    python -m venv VENV && VENV/bin/pip install torch==2.13.0 && VENV/bin/pip install transformer-lens==3.9.0
    HF_HUB_OFFLINE=1 VENV/bin/python tests/compat/golden/make_golden.py
"""

from __future__ import annotations

import json
from importlib.metadata import version
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
BRIDGE_TOKENS = TOKENS[:, :6]
TRANSFORMER_LENS = "3.9.0"  # the version the committed golden values come from
INDUCTION_VOCAB = 20000  # induction_loss draws ids 100..19999
INDUCTION_SEEDS = (0, 1)
CLEAN = "After John and Mary went to the store, Mary gave a bottle of milk to"
CORRUPTED = "After John and Mary went to the store, John gave a bottle of milk to"


def checkpoint(
    layers: int = LAYERS, d: int = D, heads: int = HEADS, vocab: int = VOCAB
) -> transformers.GPT2LMHeadModel:
    """GPT-2 with random weights large enough to matter, and random LayerNorm gains and biases."""
    cfg = transformers.GPT2Config(
        n_layer=layers,
        n_embd=d,
        n_head=heads,
        vocab_size=vocab,
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


def tl_model(
    hf: transformers.GPT2LMHeadModel, process: bool, folder: Path | None = None, cls: type = HookedTransformer
) -> HookedTransformer:
    """TransformerLens's model (``cls``: ``HookedTransformer`` or a subclass) on ``hf``'s weights; with
    ``folder``, also its tokenizer, which starts every text with BOS (as interp's does for this checkpoint)."""
    c = hf.config
    cfg = HookedTransformerConfig(
        n_layers=c.n_layer,
        d_model=c.n_embd,
        n_heads=c.n_head,
        d_head=c.n_embd // c.n_head,
        d_mlp=4 * c.n_embd,
        d_vocab=c.vocab_size,
        n_ctx=c.n_positions,
        act_fn="gelu_new",
        normalization_type="LN",
        eps=c.layer_norm_epsilon,
        original_architecture="GPT2LMHeadModel",
        default_prepend_bos=folder is not None,
        device="cpu",
    )
    tokenizer = None
    if folder is not None:
        tokenizer = transformers.PreTrainedTokenizerFast.from_pretrained(str(folder))
    model = cls(cfg, tokenizer=tokenizer)
    model.load_and_process_state_dict(
        convert_gpt2_weights(hf, cfg),
        fold_ln=process,
        center_writing_weights=process,
        center_unembed=process,
        fold_value_biases=process,
    )
    return model.eval()


def encode(text: str) -> torch.Tensor:
    """``[1, pos]``: BOS, then ``text`` by the checkpoint's tokenizer (the ``tokenizers`` library reading
    ``tokenizer.json``; TransformerLens re-creates tokenizers through ``AutoTokenizer``, which does not
    reproduce this word-level one)."""
    from tokenizers import Tokenizer

    ids = Tokenizer.from_file(str(HERE / "tiny_gpt2" / "tokenizer.json")).encode(text).ids
    return torch.tensor([[0, *ids]])


def demo(hf: transformers.GPT2LMHeadModel) -> dict[str, torch.Tensor]:
    """The values ``tests/compat/test_demo_style.py`` computes, computed by TransformerLens."""
    model = tl_model(hf, process=True)
    out: dict[str, torch.Tensor] = {}
    out["demo.loss_tokens"] = encode("The cat sat on the mat.")
    out["demo.loss"] = model(out["demo.loss_tokens"], return_type="loss")
    clean, corrupted = encode(CLEAN), encode(CORRUPTED)
    john, mary = (int(encode(word)[0, 1]) for word in (" John", " Mary"))

    def logit_diff(logits: torch.Tensor) -> torch.Tensor:
        return logits[0, -1, john] - logits[0, -1, mary]

    clean_logits, cache = model.run_with_cache(clean)
    clean_diff, corrupted_diff = logit_diff(clean_logits), logit_diff(model(corrupted))
    results = torch.zeros(LAYERS, clean.shape[1])  # [layer, position]
    for layer in range(LAYERS):
        for position in range(clean.shape[1]):

            def patch(resid, hook, position=position):
                resid[:, position] = cache[hook.name][:, position]
                return resid

            patched = model.run_with_hooks(corrupted, fwd_hooks=[(f"blocks.{layer}.hook_resid_pre", patch)])
            results[layer, position] = (logit_diff(patched) - corrupted_diff) / (clean_diff - corrupted_diff)
    out.update({"demo.clean_tokens": clean, "demo.corrupted_tokens": corrupted})
    out.update({"demo.clean_logit_diff": clean_diff, "demo.patching": results})
    heads = cache.stack_head_results(layer=-1, pos_slice=-1)
    out["demo.per_head_attrs"] = cache.logit_attrs(heads, john, mary, pos_slice=-1)
    parts = cache.decompose_resid(layer=-1, pos_slice=-1)
    out["demo.sublayer_attrs"] = cache.logit_attrs(parts, john, mary, pos_slice=-1)
    seq_len = 6
    repeated = torch.randint(1, 60, (2, seq_len), generator=torch.Generator().manual_seed(5)).repeat(1, 2)
    scores = torch.zeros(LAYERS, HEADS)

    def induction_score(pattern, hook):
        scores[hook.layer()] = pattern.diagonal(dim1=-2, dim2=-1, offset=1 - seq_len).mean((0, -1))

    model.run_with_hooks(
        repeated, return_type=None, fwd_hooks=[(lambda name: name.endswith("pattern"), induction_score)]
    )
    out.update({"demo.repeated_tokens": repeated, "demo.induction_scores": scores})
    out["demo.repeated_loss_per_token"] = model.loss_fn(model(repeated), repeated, per_token=True)
    eigenvalues = model.OV.eigenvalues
    out["demo.ov_copying"] = eigenvalues.sum(-1).real / eigenvalues.abs().sum(-1)
    full_ov = model.embed.W_E @ model.OV @ model.unembed.W_U
    out["demo.full_ov_corner"] = full_ov[1, 2].get_corner(3)
    return out


def bridge(folder: Path) -> tuple[dict[str, torch.Tensor], dict[str, list[str]]]:
    """Every activation TransformerLens 3's bridge caches on ``BRIDGE_TOKENS``, by its own names: as booted, then with
    split inputs, head results and the MLP input hook on (the names that exist only then)."""
    from transformer_lens.model_bridge import TransformerBridge

    model = TransformerBridge.boot_transformers(str(folder), device="cpu")
    _, cache = model.run_with_cache(BRIDGE_TOKENS)
    plain = sorted(cache.keys())
    out = {f"bridge.{name}": cache[name].clone() for name in plain}  # aliases share storage
    model.set_use_attn_result(True)
    model.set_use_split_qkv_input(True)
    model.set_use_hook_mlp_in(True)
    _, cache = model.run_with_cache(BRIDGE_TOKENS)
    split = sorted(set(cache.keys()) - set(plain))
    out.update({f"bridge_split.{name}": cache[name].clone() for name in split})
    never = sorted(set(model.hook_dict) - set(plain) - set(split))
    return out, {"bridge": plain, "bridge_split": split, "bridge_not_fired": never}


def induction(folder: Path) -> dict[str, torch.Tensor]:
    """``induction_loss`` on a checkpoint with a vocabulary of 20000, per seed and BOS setting."""
    from transformer_lens.evals import induction_loss

    hf = checkpoint(layers=1, d=4, heads=1, vocab=INDUCTION_VOCAB)
    hf.save_pretrained(folder)
    tokenizer(folder)
    model = tl_model(hf, process=False, folder=folder)
    out: dict[str, torch.Tensor] = {}
    for seed in INDUCTION_SEEDS:
        for bos, name in ((None, "default"), (True, "bos"), (False, "no_bos")):
            torch.manual_seed(seed)
            out[f"induction.{name}.{seed}"] = induction_loss(
                model, batch_size=3, subseq_len=8, prepend_bos=bos, device="cpu"
            )
    return out


def versions() -> dict[str, str]:
    """The versions to record; refuses any TransformerLens but the pinned one."""
    found = version("transformer-lens")
    if found != TRANSFORMER_LENS:
        raise SystemExit(f"transformer-lens {found} is installed; the golden values pin {TRANSFORMER_LENS}")
    return {name: version(name) for name in ("transformer-lens", "transformers", "torch")}


def main() -> None:
    meta = versions()
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
    out.update(demo(hf))
    tensors, names = bridge(HERE / "tiny_gpt2")
    out.update(tensors)
    labels.update(names)
    out.update(induction(HERE / "tiny_gpt2_20k"))
    out = {k: v.detach().contiguous() for k, v in out.items()}
    save_file(out, HERE / "golden.safetensors", metadata=meta)
    (HERE / "labels.json").write_text(json.dumps(labels, indent=1) + "\n")


if __name__ == "__main__":
    main()
