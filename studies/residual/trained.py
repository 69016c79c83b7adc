"""A trained model: its writes against the stream, the logit lens and the direct logit attribution."""

from __future__ import annotations

import pandas as pd
import torch
import torch.nn.functional as F

from interp import HookedTransformer
from studies.threads import single_thread

SENTENCES = (
    "The animal didn't cross the street because it was too",
    "The capital of France is",
    "She opened the door and walked into the",
    "One, two, three, four, five,",
    "The opposite of hot is",
    "Water freezes at zero degrees",
    "He put the milk back in the",
    "The sun rises in the",
)


@single_thread()
@torch.inference_mode()
def write_norms(model: HookedTransformer, texts) -> pd.DataFrame:
    """Per layer: mean norms of the stream and of the writes, their ratios, and cos(stream before, after).

    The texts run as one right-padded batch; only real tokens enter the means.
    """
    ids, mask = model.tokenizer.to_tokens(list(texts), padding_side="right")
    _, cache = model.run_with_cache(
        ids.to(model.device),
        attention_mask=mask.to(model.device),
        names_filter=lambda n: n.endswith(("resid_pre", "resid_post", "_out")),
    )
    real = mask[:, 1:].bool().to(model.device)  # [batch, pos - 1]: every real position but the first
    rows = []
    for layer in range(model.cfg.n_layers):
        pre, post = (
            cache["resid_pre", layer].float(),
            cache["resid_post", layer].float(),
        )  # [batch, pos, d_model]
        attn, mlp = cache["attn_out", layer].float(), cache["mlp_out", layer].float()
        stream = pre[:, 1:][real].norm(dim=-1)  # [tokens]
        attn_norm, mlp_norm = attn[:, 1:][real].norm(dim=-1), mlp[:, 1:][real].norm(dim=-1)
        rows.append(
            {
                "layer": layer,
                "stream_norm": float(stream.mean()),
                "attn_out_norm": float(attn_norm.mean()),
                "mlp_out_norm": float(mlp_norm.mean()),
                "attn_over_stream": float((attn_norm / stream).mean()),
                "mlp_over_stream": float((mlp_norm / stream).mean()),
                "cos_before_after": float(
                    F.cosine_similarity(pre[:, 1:][real], post[:, 1:][real], dim=-1).mean()
                ),
                "stream_norm_position0": float(pre[:, 0].norm(dim=-1).mean()),
            }
        )
    return pd.DataFrame(rows)


@single_thread()
@torch.inference_mode()
def lens_and_attribution(model: HookedTransformer, texts) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """Logit lens of the final top token per layer, and its direct logit attribution, per sentence.

    The texts run as one right-padded batch, each read at its last real token.

    Returns:
        ``lens`` (columns ``sentence, stream, rank, prob``), ``dla`` (``component, layer, head, value``,
        averaged over sentences, plus ``share`` of the summed logit), and the final top tokens.
    """
    from interp.analysis import direct_logit_attribution, dla_names, logit_lens

    ids, mask = model.tokenizer.to_tokens(list(texts), padding_side="right")
    last = (mask.sum(1) - 1).to(model.device)  # [batch]
    names = sorted(
        set(dla_names(model))
        | {f"blocks.{n}.hook_resid_pre" for n in range(model.cfg.n_layers)}
        | {f"blocks.{model.cfg.n_layers - 1}.hook_resid_post"}
    )
    logits, cache = model.run_with_cache(
        ids.to(model.device), attention_mask=mask.to(model.device), names_filter=names
    )
    rows = torch.arange(len(last), device=model.device)
    top = logits[rows, last].argmax(-1)  # [batch]
    tops = model.tokenizer.decode(top[:, None].cpu())
    labels, lens = logit_lens(model, cache, last)  # [stream, batch, d_vocab]
    target = lens[:, rows, top]  # [stream, batch]
    probs = lens.float().softmax(-1)[:, rows, top]
    ranks = (lens > target[..., None]).sum(-1)  # how many tokens beat the final top token
    lens_rows = [
        {"sentence": i, "stream": label, "depth": s, "rank": int(ranks[s, i]), "prob": float(probs[s, i])}
        for i in range(len(texts))
        for s, label in enumerate(labels)
    ]
    dla = direct_logit_attribution(model, cache, top, last)  # mean over sentences
    dla["share"] = dla.value / dla.value.sum()
    return pd.DataFrame(lens_rows), dla, tops
