"""SAEDashboard 0.8's side of ``benchmarks/dashboards.py``: run in that library's own environment (it imports
nothing of interp). Builds a TransformerLens model from the benchmark's GPT-2 checkpoint (TransformerLens's own
weight conversion), reads the SAELens-format SAE with ``sae_lens``, and times ``SaeVisRunner.run`` over every
feature on the same token ids, then writing its feature-centric page."""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from importlib import metadata
from pathlib import Path

import torch


def sae_tokens(n_tokens: int, seq_len: int) -> torch.Tensor:
    """The token ids both sides read (``n_tokens // seq_len`` items of ``seq_len``, the special token first):
    defined here, where SAEDashboard's side runs without interp, and imported by ``benchmarks/dashboards.py``."""
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(3, 8192, (n_tokens // seq_len, seq_len), generator=g)
    ids[:, 0] = 0  # the special token first
    return ids


def saedashboard_worker(args: argparse.Namespace) -> None:
    import warnings

    import transformers
    from sae_dashboard.data_writing_fns import save_feature_centric_vis
    from sae_dashboard.sae_vis_data import SaeVisConfig
    from sae_dashboard.sae_vis_runner import SaeVisRunner
    from sae_lens import SAE, HookedSAETransformer
    from transformer_lens import HookedTransformerConfig
    from transformer_lens.pretrained.weight_conversions import convert_gpt2_weights

    warnings.filterwarnings("ignore")  # the pinned libraries' deprecation notices, thousands of them
    torch.set_num_threads(args.threads)
    folder = Path(args.folder)
    hf = transformers.GPT2LMHeadModel.from_pretrained(folder / "model")
    c = hf.config
    cfg = HookedTransformerConfig(
        n_layers=c.n_layer, d_model=c.n_embd, n_ctx=c.n_positions, d_head=c.n_embd // c.n_head, n_heads=c.n_head,
        d_mlp=4 * c.n_embd, d_vocab=c.vocab_size, act_fn="gelu_new", normalization_type="LN",
        positional_embedding_type="standard", eps=c.layer_norm_epsilon, default_prepend_bos=False,
    )  # fmt: skip
    model = HookedSAETransformer(cfg, tokenizer=transformers.AutoTokenizer.from_pretrained(folder / "model"))
    model.load_state_dict(convert_gpt2_weights(hf, cfg), strict=False)
    model.eval()
    sae = SAE.load_from_disk(folder / "sae", device="cpu")
    ids = sae_tokens(args.n_tokens, args.seq_len)

    def run(tokens: torch.Tensor):
        config = SaeVisConfig(
            hook_point=sae.cfg.metadata.hook_name, features=list(range(sae.cfg.d_sae)),
            minibatch_size_features=256, minibatch_size_tokens=args.batch_size, device="cpu", dtype="float32",
        )  # fmt: skip
        return SaeVisRunner(config).run(encoder=sae, model=model, tokens=tokens)

    with torch.no_grad():  # the same activations as interp's (a check that both read the same model and SAE)
        hook = sae.cfg.metadata.hook_name
        active = sum(int((sae.encode(model.run_with_cache(ids[i : i + 8], names_filter=hook)[1][hook]) > 0).sum())
                     for i in range(0, len(ids), 8))  # fmt: skip
    run(ids[:2])  # untimed: one-time costs
    start = time.perf_counter()
    data = run(ids)
    ran = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        save_feature_centric_vis(sae_vis_data=data, filename=str(Path(tmp) / "features.html"))
        saved = time.perf_counter() - start
    versions = {
        p: metadata.version(p)
        for p in ("sae-dashboard", "sae-lens", "transformer-lens", "transformers", "torch")
    }
    result = {"seconds": ran + saved, "run_seconds": ran, "save_seconds": saved, "versions": versions,
              "n_tokens": int(ids.numel()), "n_features": int(sae.cfg.d_sae), "active_pairs": active}  # fmt: skip
    print(json.dumps(result))
