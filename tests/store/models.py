"""A tiny random model with a word-level tokenizer, and data for the store tests."""

from __future__ import annotations

from tokenizers import Tokenizer as Backend
from tokenizers import models, pre_tokenizers

from interp import HookedTransformer, TransformerConfig
from interp.tokens import Tokenizer

WORDS = "the a cat dog sat on mat rug because it was too tired and big small street crossed".split()
HOOKS = ["hook_embed", "blocks.0.hook_resid_post", "blocks.1.attn.hook_z", "blocks.1.mlp.hook_post"]


def tiny_tokenizer(padding_side: str = "right") -> Tokenizer:
    """Whitespace-split words; id 0 is ``<pad>``, 1 is ``<bos>``, 2 is ``<unk>``."""
    vocab = {"<pad>": 0, "<bos>": 1, "<unk>": 2} | {w: i + 3 for i, w in enumerate(WORDS)}
    backend = Backend(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return Tokenizer(backend, bos_id=1, pad_id=0, padding_side=padding_side, n_ctx=32, name="tiny-words")


def tiny_model(seed: int = 0, padding_side: str = "right", **overrides) -> HookedTransformer:
    cfg = dict(n_layers=2, d_model=16, n_heads=2, d_vocab=len(WORDS) + 3, n_ctx=32, seed=seed, name="tiny")
    model = HookedTransformer(TransformerConfig(**(cfg | overrides))).eval()
    model.tokenizer = tiny_tokenizer(padding_side)
    return model


def sentences(n: int, seed: int = 0) -> list[str]:
    """``n`` sentences of 1 to 12 words, reproducible."""
    import random

    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))) for _ in range(n)]


def write_gpt2_folder(folder, seed: int = 0, n_layers: int = 2, d_model: int = 16, n_heads: int = 2):
    """A random GPT-2 checkpoint in Hugging Face layout (config.json, model.safetensors, tokenizer.json)
    that ``interp.load`` reads, written without ``transformers``."""
    import json
    from pathlib import Path

    import torch
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    d, vocab, n_ctx = d_model, len(WORDS) + 3, 32
    config = {
        "model_type": "gpt2",
        "n_embd": d,
        "n_layer": n_layers,
        "n_head": n_heads,
        "n_positions": n_ctx,
        "vocab_size": vocab,
        "activation_function": "gelu_new",
        "_name_or_path": "tiny-gpt2",
    }
    (folder / "config.json").write_text(json.dumps(config))
    shapes = {"wte.weight": (vocab, d), "wpe.weight": (n_ctx, d), "ln_f.weight": (d,), "ln_f.bias": (d,)}
    for i in range(n_layers):
        for norm in ("ln_1", "ln_2"):
            shapes |= {f"h.{i}.{norm}.weight": (d,), f"h.{i}.{norm}.bias": (d,)}
        for name, (n_in, n_out) in {"attn.c_attn": (d, 3 * d), "attn.c_proj": (d, d),
                                    "mlp.c_fc": (d, 4 * d), "mlp.c_proj": (4 * d, d)}.items():  # fmt: skip
            shapes |= {f"h.{i}.{name}.weight": (n_in, n_out), f"h.{i}.{name}.bias": (n_out,)}
    g = torch.Generator().manual_seed(seed)
    tensors = {}
    for name, shape in shapes.items():
        tensors[name] = torch.randn(shape, generator=g) * (0.3 if len(shape) == 2 else 0.1)
        if "ln_" in name and name.endswith("weight"):
            tensors[name] += 1.0
    save_file(tensors, folder / "model.safetensors")
    tiny_tokenizer().backend.save(str(folder / "tokenizer.json"))
    return folder
