"""Attention alone has no notion of order.

Hypothesis. Without positional information and without a causal mask, self-attention, the MLP and the norms
all commute with a permutation of the tokens: permute the input and every output is permuted the same way,
exactly (up to float rounding). Positional schemes (learned, sinusoidal, rotary) break this symmetry; so does
a causal mask even with no positions at all, because a token sees a prefix whose length is its position.

Metric. On seeded random models (2 layers, d_model 64) for every positional scheme, causal and not: the
largest absolute difference between ``model(tokens[perm])`` and ``model(tokens)[perm]`` over random sequences
and permutations, relative to the logits' scale; and how well a ridge probe on the final stream recovers a
token's position (held-out R², chance 0). On the trained models: how much shuffling a sentence's words changes
each token's representation, layer by layer (1 - cosine between a token's vector in the original order and
in the shuffled order, mean over tokens with a 95% bootstrap interval), as they are and with positions removed
by hooks (MiniLM: every position's vector replaced by the mean over positions; SmolLM2: the rotary rotation
undone by handing ``hook_rot_q``/``hook_rot_k`` the unrotated queries and keys).

Run time (``interp study position --quiet``, both models): 19 s of CPU time, 18 s wall on 2 CPU cores shared
with another job (load 3.3). A sentence and its shuffles run as one batch, on one thread (``studies.threads``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from interp import HookedTransformer, TransformerConfig
from interp.registry import study_parser
from interp.report import Report, figures
from studies.packaged import add_models_argument, load_packaged, parse_models
from studies.threads import single_thread

DESCRIPTION = (
    "Attention alone is blind to order: permutation equivariance, positional schemes, causal leakage."
)
POSITIONALS = ("none", "learned", "sinusoidal", "rotary")
SENTENCES = (
    "The animal didn't cross the street because it was too tired.",
    "The dog chased the cat across the garden and over the fence.",
    "She gave her brother the book that he had asked for last week.",
    "Before the storm arrived, the farmers brought the cattle into the barn.",
    "The teacher who the students admired retired after forty years.",
    "A small boat drifted slowly toward the rocks near the harbour.",
    "He forgot his keys, so he climbed in through the kitchen window.",
    "Prices rose sharply after the factory closed and the workers left town.",
)


@dataclass(frozen=True)
class PositionConfig:
    """Sizes of the random models and of the trained-model measurement."""

    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_vocab: int = 100
    seq_len: int = 16
    n_sequences: int = 64
    probe_sequences: int = 256
    n_shuffles: int = 4
    n_boot: int = 1000
    models: tuple[str, ...] = ("smollm2-135m", "minilm-l6")


# -- random models -----------------------------------------------------------------------------------------


def random_model(cfg: PositionConfig, positional: str, causal: bool, seed: int) -> HookedTransformer:
    """A seeded random model of the study's size with the given positional scheme and mask."""
    tcfg = TransformerConfig(
        n_layers=cfg.n_layers,
        d_model=cfg.d_model,
        n_heads=cfg.n_heads,
        d_vocab=cfg.d_vocab,
        n_ctx=cfg.seq_len,
        positional=positional,
        causal=causal,
        seed=seed,
    )
    return HookedTransformer(tcfg).eval()


@torch.no_grad()
def equivariance_error(
    model: HookedTransformer, tokens: torch.Tensor, perms: torch.Tensor
) -> dict[str, float]:
    """Largest ``|model(tokens[perm]) - model(tokens)[perm]|`` over a batch, absolute and relative.

    Args:
        tokens: ``[batch, pos]`` token ids.
        perms: ``[batch, pos]``, a permutation of the positions per sequence.
    """
    out = model(tokens)  # [batch, pos, d_vocab]
    permuted_in = torch.gather(tokens, 1, perms)
    out_perm = model(permuted_in)
    expected = torch.gather(out, 1, perms[..., None].expand_as(out))
    err = (out_perm - expected).abs()  # [batch, pos, d_vocab]
    scale = float(out.abs().max())
    spread = float((out - out.mean(1, keepdim=True)).abs().max())  # how much outputs differ across positions
    return {
        "max_abs_error": float(err.max()),
        "relative_error": float(err.max()) / scale,
        "mean_abs_error": float(err.mean()),
        "error_over_spread": float(err.max()) / spread,
    }


@torch.no_grad()
def position_probe(model: HookedTransformer, tokens: torch.Tensor, ridge: float = 1e-2) -> float:
    """Held-out R² of a ridge regression from the final stream to each token's position (chance: about 0).

    The features are the stream and its elementwise squares: a causal mask without positions leaves order in
    how widely a token's prefix is averaged, a second-moment signal that a purely linear probe cannot see.
    The first half of the sequences fit the probe, the second half score it.
    """
    n_layers = model.cfg.n_layers
    _, cache = model.run_with_cache(tokens, names_filter=f"blocks.{n_layers - 1}.hook_resid_post")
    x = cache["resid_post", n_layers - 1].double()  # [batch, pos, d_model]
    x = torch.cat([x, x.pow(2)], dim=-1)  # [batch, pos, 2 * d_model]
    batch, n, d = x.shape
    y = torch.arange(n, dtype=torch.float64).expand(batch, n)
    half = batch // 2
    xtr, ytr = x[:half].reshape(-1, d), y[:half].reshape(-1)
    xte, yte = x[half:].reshape(-1, d), y[half:].reshape(-1)
    mu, sd = xtr.mean(0), xtr.std(0).clamp_min(1e-12)
    xtr, xte = (xtr - mu) / sd, (xte - mu) / sd
    ym = ytr.mean()
    gram = xtr.T @ xtr + ridge * len(xtr) * torch.eye(d, dtype=torch.float64)
    w = torch.linalg.solve(gram, xtr.T @ (ytr - ym))
    pred = xte @ w + ym
    return float(1 - ((pred - yte) ** 2).sum() / ((yte - yte.mean()) ** 2).sum())


@single_thread()
def random_models_table(cfg: PositionConfig, seed: int, quiet: bool = True) -> pd.DataFrame:
    """One row per (positional, causal): equivariance error and position-probe R²."""
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, cfg.d_vocab, (cfg.n_sequences, cfg.seq_len), generator=gen)
    perms = torch.stack([torch.randperm(cfg.seq_len, generator=gen) for _ in range(cfg.n_sequences)])
    probe_tokens = torch.randint(0, cfg.d_vocab, (cfg.probe_sequences, cfg.seq_len), generator=gen)
    rows = []
    settings = [(p, c) for c in (False, True) for p in POSITIONALS]
    for positional, causal in tqdm(settings, desc="random models", disable=quiet):
        model = random_model(cfg, positional, causal, seed)
        rows.append(
            {
                "positional": positional,
                "causal": causal,
                **equivariance_error(model, tokens, perms),
                "position_probe_r2": position_probe(model, probe_tokens),
            }
        )
    return pd.DataFrame(rows)


# -- trained models ----------------------------------------------------------------------------------------


def remove_positions_hooks(model: HookedTransformer) -> list:
    """Forward hooks that take position out of a model without touching its weights.

    Additive positions: every position's vector becomes the mean over the positions in use, so whatever is
    common to all positions (BERT folds its token-type vector in here) stays. Rotary: the rotated queries and
    keys are replaced by the unrotated ones.
    """
    if model.cfg.positional in ("learned", "sinusoidal"):

        def flatten(pos: torch.Tensor, hook) -> torch.Tensor:
            return pos.mean(dim=1, keepdim=True).expand_as(pos).contiguous()  # [batch, pos, d_model]

        return [("hook_pos_embed", flatten)]
    if model.cfg.positional == "rotary":
        saved: dict[str, torch.Tensor] = {}

        def keep(x: torch.Tensor, hook) -> None:
            saved[hook.name.rsplit("_", 1)[-1]] = x  # "q" or "k"

        def unrotate(x: torch.Tensor, hook) -> torch.Tensor:
            return saved[hook.name.rsplit("_", 1)[-1]]

        return [
            (lambda n: n.endswith(("attn.hook_q", "attn.hook_k")), keep),
            (lambda n: n.endswith(("hook_rot_q", "hook_rot_k")), unrotate),
        ]
    return []


def shuffle_positions(special: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """A permutation ``[pos]`` that shuffles the ordinary tokens and leaves special tokens in place."""
    n = len(special)
    perm = torch.arange(n)
    movable = torch.nonzero(~special).flatten()
    perm[movable] = movable[torch.randperm(len(movable), generator=gen)]
    return perm


@torch.inference_mode()
def shuffle_change(
    model: HookedTransformer, texts: Sequence[str], n_shuffles: int, seed: int, fwd_hooks: list = ()
) -> np.ndarray:
    """1 - cos between each token's stream vector before and after shuffling, ``[layer + 1, n_tokens]``.

    Row 0 is the embedding stream (``blocks.0.hook_resid_pre``), row L + 1 the output of block L. A sentence
    and its shuffles run as one batch: they have the same length, so no padding enters.
    """
    gen = torch.Generator().manual_seed(seed)
    names = ["blocks.0.hook_resid_pre"] + [f"blocks.{i}.hook_resid_post" for i in range(model.cfg.n_layers)]
    columns = []
    for text in texts:
        enc = model.tokenizer.to_tokens(text)
        ids, special = enc.ids.to(model.device), enc.special[0]  # [1, pos], [pos]
        perms = [shuffle_positions(special, gen).to(model.device) for _ in range(n_shuffles)]
        batch = torch.cat([ids] + [ids[:, perm] for perm in perms])  # [1 + n_shuffles, pos]
        _, cache = model.run_with_cache(batch, names_filter=names, fwd_hooks=fwd_hooks)
        ordinary = ~special.to(model.device)
        for i, perm in enumerate(perms, start=1):
            layers = []
            for name in names:
                h = cache[name][0, perm].double()  # original vectors of the tokens now at each position
                h_shuf = cache[name][i].double()  # [pos, d_model]
                cos = torch.nn.functional.cosine_similarity(h, h_shuf, dim=-1)
                layers.append((1 - cos)[ordinary])
            columns.append(torch.stack(layers))  # [layer + 1, tokens]
    return torch.cat(columns, dim=1).cpu().numpy()


def bootstrap_mean(x: np.ndarray, n_boot: int, seed: int) -> tuple[float, float, float]:
    """Mean of ``x`` and its 95% percentile bootstrap interval."""
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(n_boot, len(x)))].mean(1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(x.mean()), float(low), float(high)


@single_thread()
def trained_table(model, name: str, cfg: PositionConfig, seed: int) -> pd.DataFrame:
    """Per layer: mean 1 - cos under shuffling, as trained and with positions removed, with intervals."""
    rows = []
    for variant, hooks in (("as trained", []), ("positions removed", remove_positions_hooks(model))):
        change = shuffle_change(model, SENTENCES, cfg.n_shuffles, seed, fwd_hooks=hooks)
        for layer, values in enumerate(change):
            mean, low, high = bootstrap_mean(values, cfg.n_boot, seed + layer)
            rows.append(
                {
                    "model": name,
                    "variant": variant,
                    "stream": "embed" if layer == 0 else f"after block {layer - 1}",
                    "depth": layer,
                    "one_minus_cos": mean,
                    "low": low,
                    "high": high,
                    "max": float(values.max()),
                    "tokens": len(values),
                }
            )
    return pd.DataFrame(rows)


# -- the report --------------------------------------------------------------------------------------------


def build_report(args, cfg: PositionConfig, table: pd.DataFrame, trained: dict, skipped: dict) -> Report:
    """Assemble the report from the measured tables."""
    report = Report(
        args.out,
        "Attention alone has no notion of order",
        subtitle="Permute the tokens of a position-free, unmasked transformer: its outputs permute alike.",
        seed=args.seed,
        config=asdict(cfg),
        model=", ".join(trained) or None,
        device=args.device or "cpu",
        dtype=args.dtype or "float32",
    )
    t = table.set_index(["positional", "causal"])
    free = t.loc[("none", False)]
    others = table[~((table.positional == "none") & ~table.causal)]
    report.add_section(
        "Hypothesis and metric",
        "Self-attention scores every query against every key by content alone, and the MLP and the norms act "
        "on each position separately, so a transformer with no positional information and no causal mask is "
        "permutation-equivariant: f(P x) = P f(x). Positions (added or rotary) and the causal mask each "
        "break "
        "the symmetry.\n\n"
        f"Random models: {cfg.n_layers} layers, d_model {cfg.d_model}, {cfg.n_heads} heads, seed "
        f"{args.seed}; "
        f"{cfg.n_sequences} random sequences of {cfg.seq_len} tokens, each with its own random permutation. "
        "Error: the largest |f(P x) - P f(x)| over all logits, also relative to the largest logit. Position "
        f"probe: ridge regression from the final stream and its squares to the position index, fitted on "
        f"{cfg.probe_sequences // 2} sequences and scored (R²) on {cfg.probe_sequences // 2} others; a "
        "representation without order information scores about 0.",
    )
    report.add_section(
        "Random models",
        "Without positions and without a mask the model is equivariant to float precision: the largest "
        "error "
        f"is {free.max_abs_error:.2g} ({free.relative_error:.2g} of the largest logit), and the position "
        "probe "
        f"scores R² = {free.position_probe_r2:.3f}. Every other setting breaks the symmetry: the smallest "
        f"error among them is {others.max_abs_error.min():.2g}, "
        f"{others.max_abs_error.min() / max(free.max_abs_error, 1e-30):.0f} times larger. Without "
        "positions but "
        f"with the causal mask, order leaks through the mask: the error is "
        f"{t.loc[('none', True)].max_abs_error:.2g} and the probe recovers position with R² = "
        f"{t.loc[('none', True)].position_probe_r2:.2f}, because each token averages over a prefix whose "
        "length "
        "is its position (a second-moment signal: a linear probe on the stream alone scores about 0). "
        "Rotary positions are the weakest: bidirectional, the error is "
        f"{t.loc[('rotary', False)].max_abs_error:.2g} and absolute position is not decodable (R² "
        f"{t.loc[('rotary', False)].position_probe_r2:.2f}), because rotary embeddings write nothing into "
        "the "
        "stream and act only through the scores, which are tiny at random initialisation; they encode "
        "relative offsets, which a trained model learns to use.",
    )
    report.add_table("random_models", table, caption="Equivariance error and position probe per setting.")
    labels = [
        f"{p}, {'causal' if c else 'bidirectional'}"
        for p, c in zip(table.positional, table.causal, strict=True)
    ]
    fig = figures.line_plot(
        np.arange(len(table)),
        {"log10 max |f(Px) - P f(x)|": np.log10(table.max_abs_error.clip(lower=1e-30))},
        title="Equivariance error per setting (log10)",
        xlabel="setting: " + "; ".join(f"{i}={lab}" for i, lab in enumerate(labels[:4])),
        ylabel="log10 error",
    )
    report.add_figure(
        "equivariance",
        fig,
        caption="Settings in the order of the table: "
        + "; ".join(f"{i}: {lab}" for i, lab in enumerate(labels)),
    )
    report.add_headline(
        "equivariance error, no positions, bidirectional",
        float(free.max_abs_error),
        note=f"relative {free.relative_error:.2g}; float32 rounding",
    )
    report.add_headline(
        "smallest error with positions or a mask", float(others.max_abs_error.min()), note="same inputs"
    )
    report.add_headline(
        "position probe R², no positions, causal",
        float(t.loc[("none", True)].position_probe_r2),
        note=f"bidirectional: {free.position_probe_r2:.3f} (chance 0)",
    )

    report.add_section(
        "Trained models",
        f"{len(SENTENCES)} sentences, each shuffled {cfg.n_shuffles} times (special tokens stay in place). "
        "For "
        "every ordinary token: 1 - cos between its stream vector in the original sentence and in the "
        "shuffled "
        "one, per layer; 0 means the token's representation ignores order. Intervals: 95% bootstrap over "
        "tokens.",
    )
    results_trained = {}
    for name, frame in trained.items():
        as_is = frame[frame.variant == "as trained"].set_index("depth")
        removed = frame[frame.variant == "positions removed"].set_index("depth")
        last = as_is.index.max()
        scheme = "rotary" if name.startswith("smollm") else "learned"
        mask = "causal" if name.startswith("smollm") else "bidirectional"
        report.add_text(
            f"**{name}** ({scheme} positions, {mask}). After the last block, shuffling moves a token's "
            "vector by "
            f"1 - cos = {as_is.one_minus_cos[last]:.3f} (95% CI {as_is.low[last]:.3f} to "
            f"{as_is.high[last]:.3f})"
            f"; in the embeddings it is {as_is.one_minus_cos[0]:.2g}. With positions removed by hooks it is "
            f"{removed.one_minus_cos[last]:.3g} (largest {removed['max'][last]:.2g})"
            + (
                ": the trained encoder becomes permutation-equivariant, so its positional table is its only "
                "source of order."
                if mask == "bidirectional"
                else ": the causal mask still tells the model about order, as in the random models."
            )
        )
        report.add_figure(
            f"{name.replace('-', '_')}_shuffle",
            figures.line_plot(
                as_is.index.to_numpy(),
                {
                    "as trained": as_is.one_minus_cos.to_numpy(),
                    "positions removed": removed.one_minus_cos.to_numpy(),
                },
                ci={
                    "as trained": (as_is.low.to_numpy(), as_is.high.to_numpy()),
                    "positions removed": (removed.low.to_numpy(), removed.high.to_numpy()),
                },
                title=f"{name}: change of a token's vector when its sentence is shuffled",
                xlabel="depth (0 = embeddings, L = after block L - 1)",
                ylabel="1 - cos",
            ),
        )
        report.add_table(f"{name.replace('-', '_')}_shuffle", frame, caption=f"{name}, per layer.")
        report.add_headline(
            f"{name}: 1 - cos after shuffling, last layer",
            float(as_is.one_minus_cos[last]),
            ci=(float(as_is.low[last]), float(as_is.high[last])),
            note=f"positions removed: {removed.one_minus_cos[last]:.2g}",
        )
        results_trained[name] = {
            "last_layer": float(as_is.one_minus_cos[last]),
            "last_layer_positions_removed": float(removed.one_minus_cos[last]),
        }
    for name, reason in skipped.items():
        report.add_text(f"Skipped **{name}**: {reason}.")
    report.add_section(
        "Conclusion",
        "The claim holds exactly: without positions and without a mask, attention is blind to order to float "
        "precision. Learned, sinusoidal and rotary positions each break the symmetry, and so does the causal "
        "mask alone, from which position can be decoded.",
    )
    report.add_results(
        {"random_models": table.to_dict(orient="records"), "trained": results_trained, "skipped": skipped}
    )
    return report


def main(argv: list[str] | None = None) -> int:
    """Run the study: ``interp study position [--models a,b] [--out DIR] [--seed N] [--quiet]``."""
    parser = study_parser("position", DESCRIPTION, default_model=None)
    add_models_argument(parser, PositionConfig.models)
    args = parser.parse_args(argv)
    cfg = PositionConfig(models=parse_models(args.models))
    start = time.perf_counter()
    table = random_models_table(cfg, args.seed, quiet=args.quiet)
    trained, skipped = {}, {}
    for name in tqdm(cfg.models, desc="trained models", disable=args.quiet):
        model, reason = load_packaged(name, args.device, args.dtype)
        if model is None:
            skipped[name] = reason
            continue
        trained[name] = trained_table(model, name, cfg, args.seed)
        del model
    path = build_report(args, cfg, table, trained, skipped).write()
    if not args.quiet:
        print(f"wrote {path} in {time.perf_counter() - start:.1f} s")
    return 0
