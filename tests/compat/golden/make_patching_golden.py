"""Golden values of TransformerLens 3's patching module and tokenizer (run in a venv that has it).

On the random GPT-2-shaped checkpoint of ``make_golden.py`` (``tiny_gpt2/``, processed as TransformerLens's
``from_pretrained`` does), it runs every ``transformer_lens.patching`` function on an IOI-style batch (clean
prompts and the same prompts with the names swapped, the metric the normalised mean logit difference) and a
``generic_activation_patch`` with an ``index_df`` and a setter of its own, and writes the results to
``patching.safetensors``. Then it records what TransformerLens's ``model.tokenizer`` answers on the same
checkpoint (special tokens, ``__call__`` with and without padding, ``decode``, ``batch_decode``,
``convert_ids_to_tokens``...) and ``utils.tokenize_and_concatenate`` on a small ``datasets.Dataset``, in
``tokenizer_golden.json``.

TransformerLens re-creates a checkpoint's tokenizer through ``AutoTokenizer``; for the word-level tokenizer
of ``tiny_gpt2/`` that gives ``GPT2Tokenizer`` with no merges, not the tokenizer in the folder. So the
tokenizer's values are taken on a copy of the folder whose ``tokenizer_config.json`` also says
``"tokenizer_class": "PreTrainedTokenizerFast"``, with which ``AutoTokenizer`` loads ``tokenizer.json`` as it
is (the tokenizer interp reads from the folder itself).

The versions it ran with are in the file's metadata::

    python -m venv VENV && VENV/bin/pip install torch==2.13.0 && VENV/bin/pip install transformer-lens==3.9.0
    HF_HUB_OFFLINE=1 VENV/bin/python tests/compat/golden/make_patching_golden.py
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import torch
from make_golden import HERE, checkpoint, encode, tl_model, versions
from safetensors.torch import save_file
from transformer_lens import patching, utils

PROMPTS = (
    "After John and Mary went to the store, Mary gave a bottle of milk to",
    "After John and Mary went to the store, John gave a bottle of milk to",
    "After Claire and John went to the store, John gave a bottle of milk to",
)
ANSWERS = ((" John", " Mary"), (" Mary", " John"), (" Claire", " John"))
EVERY = (
    "get_act_patch_block_every",
    "get_act_patch_attn_head_all_pos_every",
    "get_act_patch_attn_head_by_pos_every",
)
SWEEPS = (
    "get_act_patch_resid_pre",
    "get_act_patch_resid_mid",
    "get_act_patch_attn_out",
    "get_act_patch_mlp_out",
    "get_act_patch_attn_head_out_by_pos",
    "get_act_patch_attn_head_q_by_pos",
    "get_act_patch_attn_head_k_by_pos",
    "get_act_patch_attn_head_v_by_pos",
    "get_act_patch_attn_head_pattern_by_pos",
    "get_act_patch_attn_head_pattern_dest_src_pos",
    "get_act_patch_attn_head_out_all_pos",
    "get_act_patch_attn_head_q_all_pos",
    "get_act_patch_attn_head_k_all_pos",
    "get_act_patch_attn_head_v_all_pos",
    "get_act_patch_attn_head_pattern_all_pos",
    *EVERY,
)
INDEX_ROWS = [[0, 3], [1, 5], [1, 0], [0, 16]]
TEXTS = ["The cat sat on the mat.", "John and Mary went to the store", "Hello World", "a b c"]
DATASET_TEXTS = [
    "The cat sat on the mat. The dog sat on the mat.",
    "After John and Mary went to the store, Mary gave a bottle of milk to John.",
    "",
    "Hello World, the quick brown fox jumped over the lazy dog.",
    "Claire went to the store then gave a bottle of milk to Mary.",
]


def half_stream_setter(corrupted, index, clean):
    """A setter of a user's own: the first half of the stream at one position."""
    layer, pos = index
    corrupted[:, pos, : corrupted.shape[-1] // 2] = clean[:, pos, : corrupted.shape[-1] // 2]
    return corrupted


def patching_values() -> dict[str, torch.Tensor]:
    model = tl_model(checkpoint(), process=True)
    clean = torch.cat([encode(prompt) for prompt in PROMPTS])
    corrupted = clean[[1, 0, 1]]  # names swapped (the third row's corruption is the second prompt)
    answers = torch.tensor([[int(encode(word)[0, 1]) for word in pair] for pair in ANSWERS])

    def logit_diff(logits: torch.Tensor) -> torch.Tensor:
        last = logits[:, -1]
        return (last.gather(1, answers[:, :1]) - last.gather(1, answers[:, 1:])).mean()

    clean_logits, clean_cache = model.run_with_cache(clean)
    clean_diff, corrupted_diff = logit_diff(clean_logits), logit_diff(model(corrupted))

    def metric(logits: torch.Tensor) -> torch.Tensor:
        return (logit_diff(logits) - corrupted_diff) / (clean_diff - corrupted_diff)

    out = {"clean_tokens": clean, "corrupted_tokens": corrupted, "answers": answers}
    for name in SWEEPS:
        out[name] = getattr(patching, name)(model, corrupted, clean_cache, metric)
    import pandas as pd

    index_df = pd.DataFrame(INDEX_ROWS, columns=["layer", "pos"])
    values, returned = patching.generic_activation_patch(
        model,
        corrupted,
        clean_cache,
        metric,
        half_stream_setter,
        "resid_mid",
        index_df=index_df,
        return_index_df=True,
    )
    out["generic_index_df"] = values
    assert returned.values.tolist() == INDEX_ROWS
    values, frame = patching.generic_activation_patch(
        model,
        corrupted,
        clean_cache,
        metric,
        patching.layer_pos_patch_setter,
        "resid_post",
        index_axis_names=("layer", "pos"),
        return_index_df=True,
    )
    out["generic_resid_post"], out["generic_resid_post_index"] = values, torch.tensor(frame.values)
    return {k: v.detach().contiguous() for k, v in out.items()}


def tokenizer_values() -> dict:
    import datasets

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "tiny_gpt2"
        shutil.copytree(HERE / "tiny_gpt2", folder)
        config = json.loads((folder / "tokenizer_config.json").read_text())
        (folder / "tokenizer_config.json").write_text(
            json.dumps({**config, "tokenizer_class": "PreTrainedTokenizerFast"})
        )
        model = tl_model(checkpoint(), process=False, folder=folder)
        # A checkpoint whose tokenizer adds no BOS (as GPT-2's): TransformerLens prepends one by default anyway.
        (folder / "tokenizer_config.json").write_text(
            json.dumps({**config, "add_bos_token": False, "tokenizer_class": "PreTrainedTokenizerFast"})
        )
        no_bos = tl_model(checkpoint(), process=False, folder=folder)
    tok = model.tokenizer
    out = {
        "class": type(tok).__name__,
        "special": {
            name: getattr(tok, name)
            for name in (
                "bos_token",
                "eos_token",
                "pad_token",
                "bos_token_id",
                "eos_token_id",
                "pad_token_id",
            )
        },
        "padding_side": tok.padding_side,
        "len": len(tok),
        "call": {text: tok(text)["input_ids"] for text in TEXTS},
        "call_no_special": {text: tok(text, add_special_tokens=False)["input_ids"] for text in TEXTS},
        "encode": {text: tok.encode(text) for text in TEXTS},
        "tokenize": {text: tok.tokenize(text) for text in TEXTS},
        "to_tokens": {text: model.to_tokens(text)[0].tolist() for text in TEXTS},
        "to_str_tokens": {text: model.to_str_tokens(text) for text in TEXTS},
    }
    out["no_bos_checkpoint"] = {
        "default_prepend_bos": no_bos.cfg.default_prepend_bos,
        "call": {text: no_bos.tokenizer(text)["input_ids"] for text in TEXTS},
        "to_tokens": {text: no_bos.to_tokens(text)[0].tolist() for text in TEXTS},
        "to_tokens_no_bos": {text: no_bos.to_tokens(text, prepend_bos=False)[0].tolist() for text in TEXTS},
    }
    batch = tok(TEXTS, padding=True, return_tensors="pt")
    out["batch_right"] = {
        "input_ids": batch["input_ids"].tolist(),
        "attention_mask": batch["attention_mask"].tolist(),
    }
    tok.padding_side = "left"
    batch = tok(TEXTS, padding=True, return_tensors="pt")
    out["batch_left"] = {
        "input_ids": batch["input_ids"].tolist(),
        "attention_mask": batch["attention_mask"].tolist(),
    }
    tok.padding_side = "right"
    ids = out["batch_right"]["input_ids"]
    out["decode"] = [tok.decode(row) for row in ids]
    out["decode_skip"] = [tok.decode(row, skip_special_tokens=True) for row in ids]
    out["batch_decode"] = tok.batch_decode(ids)
    out["convert_ids_to_tokens"] = [tok.convert_ids_to_tokens(row) for row in ids]
    out["convert_tokens_to_ids"] = tok.convert_tokens_to_ids(["The", "\u0120cat", "<|endoftext|>"])
    dataset = datasets.Dataset.from_dict({"text": DATASET_TEXTS, "meta": list(range(len(DATASET_TEXTS)))})
    out["tokenize_and_concatenate"] = {
        f"{length}_{bos}": [
            row.tolist()
            for row in utils.tokenize_and_concatenate(
                dataset, tok, max_length=length, add_bos_token=bos, num_proc=None
            )["tokens"]
        ]
        for length in (5, 8)
        for bos in (True, False)
    }
    return out


def main(patches: bool = True) -> None:
    meta = versions()
    if patches:
        save_file(patching_values(), HERE / "patching.safetensors", metadata=meta)
    values = {"versions": meta, **tokenizer_values()}
    (HERE / "tokenizer_golden.json").write_text(json.dumps(values, indent=1) + "\n")


if __name__ == "__main__":
    import sys

    main(patches="--tokenizer-only" not in sys.argv)
