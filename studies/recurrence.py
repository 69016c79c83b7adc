"""What attention buys over recurrence.

Hypothesis. A recurrent network carries information from position t to position t + d through d sequential
cell updates, so the gradient of a late loss with respect to an early input is a product of d Jacobians and
tends to vanish, and the computation cannot be parallelised over time. Attention connects any two positions
in one hop: the gradient to an early token does not shrink with distance, and a whole sequence is one
parallel pass.

Metric. A recall task: the first token (one of ``n_symbols``) is followed by d distractor tokens (from a
separate set) and a query token, and the model must output the first token at the query, for d in
{4, 16, 64, 256}. An LSTM and a one-layer transformer (``interp.HookedTransformer``, sinusoidal positions),
of similar size, train for the same number of steps with the same optimiser and seed. Reported: held-out
accuracy with a 95% Wilson interval (chance 1/n_symbols); the norm of the gradient of the loss with respect
to the first token's embedding, relative to that of the query's own embedding, at initialisation and after
training (computed in float64 so that tiny values do not underflow; for the transformer through a hook on
``hook_embed``); the path length between the first token and the query (sequential steps); and wall time
against sequence length of an LSTM cell stepped over the sequence, the fused LSTM, and one transformer pass.

Run time (``interp study recurrence --quiet``): 52 s of CPU time, 53 s wall on 2 CPU cores shared with another
job (load 3.3). Everything runs on one thread (``studies.threads``): these models are too small to split, and
on two shared cores the same run took 5.3 min of CPU time, spent in threads waiting for each other. With the
default 200 steps the transformer solves d = 4 and d = 64 (accuracy 1.00) and d = 16 (0.85), not d = 256
(0.44); the LSTM solves d = 4 only.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from functools import partial

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from interp import HookedTransformer, TransformerConfig
from interp.registry import study_parser
from interp.report import Report, figures
from studies.threads import single_thread

DESCRIPTION = (
    "Attention against recurrence: long-range recall, gradient to distant inputs, path length, time."
)


@dataclass(frozen=True)
class RecurrenceConfig:
    """Task, model and budget sizes; both models get the same steps, batch and learning rate."""

    distances: tuple[int, ...] = (4, 16, 64, 256)
    n_symbols: int = 8
    n_distractors: int = 8
    d_model: int = 32
    d_hidden: int = 64
    steps: int = 200
    batch: int = 32
    lr: float = 3e-3
    n_eval: int = 512
    grad_batch: int = 16
    timing_lengths: tuple[int, ...] = (16, 64, 256, 1024)
    timing_repeats: int = 3

    @property
    def d_vocab(self) -> int:
        """Symbols, distractors and the query token."""
        return self.n_symbols + self.n_distractors + 1


def make_batch(
    cfg: RecurrenceConfig, d: int, batch: int, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequences ``[batch, d + 2]``: a symbol, d distractors, the query token; targets ``[batch]``."""
    target = torch.randint(0, cfg.n_symbols, (batch,), generator=gen)
    distractors = torch.randint(cfg.n_symbols, cfg.n_symbols + cfg.n_distractors, (batch, d), generator=gen)
    query = torch.full((batch, 1), cfg.d_vocab - 1)
    return torch.cat([target[:, None], distractors, query], dim=1), target


class LSTMModel(nn.Module):
    """Embedding, one LSTM layer, a read-out of the last state; ``embed_hook`` sees the embeddings."""

    def __init__(self, cfg: RecurrenceConfig) -> None:
        super().__init__()
        self.embed = nn.Embedding(cfg.d_vocab, cfg.d_model)
        self.lstm = nn.LSTM(cfg.d_model, cfg.d_hidden, batch_first=True)
        self.out = nn.Linear(cfg.d_hidden, cfg.n_symbols)

    def forward(self, tokens: torch.Tensor, embed_hook=None) -> torch.Tensor:
        x = self.embed(tokens)  # [batch, pos, d_model]
        if embed_hook is not None:
            embed_hook(x)
        h, _ = self.lstm(x)  # [batch, pos, d_hidden]
        return self.out(h[:, -1])  # [batch, n_symbols]


def make_transformer(cfg: RecurrenceConfig, n_ctx: int, seed: int) -> HookedTransformer:
    """A one-layer, two-head transformer of width ``d_model`` with sinusoidal positions."""
    tcfg = TransformerConfig(
        n_layers=1,
        d_model=cfg.d_model,
        n_heads=2,
        d_vocab=cfg.d_vocab,
        n_ctx=n_ctx,
        positional="sinusoidal",
        seed=seed,
    )
    return HookedTransformer(tcfg)


def transformer_logits(model: HookedTransformer, tokens: torch.Tensor, embed_hook=None) -> torch.Tensor:
    """Logits at the query (last) position, ``[batch, d_vocab]``."""
    hooks = [] if embed_hook is None else [("hook_embed", lambda x, hook: embed_hook(x))]
    logits = model.run_with_hooks(tokens, fwd_hooks=hooks)  # [batch, pos, d_vocab]
    return logits[:, -1]  # [batch, d_vocab]


def logits_of(model: nn.Module, tokens: torch.Tensor, n_symbols: int, embed_hook=None) -> torch.Tensor:
    """Symbol logits ``[batch, n_symbols]`` of either model; the transformer's are cut to the symbols."""
    if isinstance(model, HookedTransformer):
        return transformer_logits(model, tokens, embed_hook)[:, :n_symbols]
    return model(tokens, embed_hook)


def train(model: nn.Module, cfg: RecurrenceConfig, d: int, seed: int) -> list[float]:
    """Adam for ``cfg.steps`` steps on fresh batches; returns the loss per step."""
    gen = torch.Generator().manual_seed(seed * 7919 + d)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    losses = []
    model.train()
    for _ in range(cfg.steps):
        tokens, target = make_batch(cfg, d, cfg.batch, gen)
        loss = F.cross_entropy(logits_of(model, tokens, cfg.n_symbols), target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@torch.inference_mode()
def accuracy(model: nn.Module, cfg: RecurrenceConfig, d: int, seed: int) -> tuple[float, float, float]:
    """Held-out accuracy and its 95% Wilson interval."""
    model.eval()
    gen = torch.Generator().manual_seed(seed * 7919 + d + 1_000_003)
    tokens, target = make_batch(cfg, d, cfg.n_eval, gen)
    correct = int((logits_of(model, tokens, cfg.n_symbols).argmax(-1) == target).sum())
    return (correct / cfg.n_eval, *wilson(correct, cfg.n_eval))


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion k / n."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def embedding_gradients(model: nn.Module, cfg: RecurrenceConfig, d: int, seed: int) -> dict[str, float]:
    """Gradient of the loss with respect to the first token's and the query's embeddings (float64).

    Returns the mean norms over a batch and ``ratio`` = first / query, which is 1 when the distant input
    reaches the loss as strongly as the adjacent one.
    """
    gen = torch.Generator().manual_seed(seed * 7919 + d + 2_000_003)
    tokens, target = make_batch(cfg, d, cfg.grad_batch, gen)
    model = model.double().eval()
    captured: list[torch.Tensor] = []

    def keep(x: torch.Tensor) -> None:
        x.retain_grad()
        captured.append(x)

    loss = F.cross_entropy(logits_of(model, tokens, cfg.n_symbols, keep), target)
    model.zero_grad()
    loss.backward()
    grad = captured[0].grad  # [batch, pos, d_model]
    first, last = grad[:, 0].norm(dim=-1).mean(), grad[:, -1].norm(dim=-1).mean()
    model.float()
    return {"grad_first": float(first), "grad_query": float(last), "ratio": float(first / last)}


def run_distance(cfg: RecurrenceConfig, d: int, seed: int) -> list[dict]:
    """Train both models at distance ``d``; accuracy and gradients at initialisation and after training."""
    rows = []
    for kind in ("lstm", "transformer"):
        with single_thread():
            torch.manual_seed(seed)
            model = LSTMModel(cfg) if kind == "lstm" else make_transformer(cfg, d + 2, seed)
            init = embedding_gradients(model, cfg, d, seed)
            start = time.perf_counter()
            losses = train(model, cfg, d, seed)
            train_s = time.perf_counter() - start
            acc, low, high = accuracy(model, cfg, d, seed)
            trained = embedding_gradients(model, cfg, d, seed)
        rows.append(
            {
                "model": kind,
                "d": d,
                "accuracy": acc,
                "accuracy_low": low,
                "accuracy_high": high,
                "final_loss": float(np.mean(losses[-10:])),
                "grad_ratio_init": init["ratio"],
                "grad_first_init": init["grad_first"],
                "grad_ratio_trained": trained["ratio"],
                "grad_first_trained": trained["grad_first"],
                "path_length": d + 1 if kind == "lstm" else 1,
                "parameters": sum(p.numel() for p in model.parameters()),
                "train_s": train_s,
            }
        )
    return rows


def step_cells(cell: nn.LSTMCell, x: torch.Tensor) -> torch.Tensor:
    """Run an LSTM cell over ``x [batch, pos, d]`` one step at a time; each step needs the previous state."""
    h = c = torch.zeros(x.shape[0], cell.hidden_size)
    for t in range(x.shape[1]):
        h, c = cell(x[:, t], (h, c))
    return h


@torch.inference_mode()
@single_thread()
def timing(cfg: RecurrenceConfig, seed: int) -> pd.DataFrame:
    """Forward wall time (median of repeats, ms) against sequence length, batch 8, width ``d_hidden``.

    One thread, so that every method gets the same compute and a shared machine's other jobs do not
    decide the comparison through thread scheduling.
    """
    torch.manual_seed(seed)
    rows = []
    cell = nn.LSTMCell(cfg.d_hidden, cfg.d_hidden)
    fused = nn.LSTM(cfg.d_hidden, cfg.d_hidden, batch_first=True)
    for n in cfg.timing_lengths:
        x = torch.randn(8, n, cfg.d_hidden)
        tcfg = TransformerConfig(
            n_layers=1, d_model=cfg.d_hidden, n_heads=4, d_vocab=cfg.d_vocab, n_ctx=n, seed=seed
        )
        block_model = HookedTransformer(tcfg).eval()
        tokens = torch.randint(0, cfg.d_vocab, (8, n))

        for name, fn, steps in (
            ("LSTM cell loop", partial(step_cells, cell, x), n),
            ("fused LSTM", partial(fused, x), n),
            ("transformer, one pass", partial(block_model, tokens), 1),
        ):
            fn()  # warm-up
            times = []
            for _ in range(cfg.timing_repeats):
                start = time.perf_counter()
                fn()
                times.append(time.perf_counter() - start)
            rows.append(
                {
                    "method": name,
                    "seq_len": n,
                    "ms": 1000 * float(np.median(times)),
                    "sequential_steps": steps,
                }
            )
    return pd.DataFrame(rows)


def build_report(args, cfg: RecurrenceConfig, table: pd.DataFrame, times: pd.DataFrame) -> Report:
    """Assemble the report from the measured tables."""
    report = Report(
        args.out,
        "What attention buys over recurrence",
        subtitle="Recall a token d steps back: accuracy, gradient to the distant input, path length, time.",
        seed=args.seed,
        config={**asdict(cfg), "d_vocab": cfg.d_vocab},
        device="cpu",
        dtype="float32",
    )
    chance = 1 / cfg.n_symbols
    lstm = table[table.model == "lstm"].set_index("d")
    tf = table[table.model == "transformer"].set_index("d")
    d_max, d_min = max(cfg.distances), min(cfg.distances)
    report.add_section(
        "Hypothesis and metric",
        "A recurrent network connects two positions d apart through d sequential state updates; attention "
        "connects them in one hop. So the gradient from a loss to a distant input should shrink with d for "
        "the "
        "recurrent network and not for attention, long-range recall should be harder for it under the same "
        "budget, and its computation is sequential in the sequence length.\n\n"
        f"Task: a symbol (one of {cfg.n_symbols}), d distractors (from {cfg.n_distractors} other tokens), a "
        f"query token; the answer is the first symbol (chance {chance:.3f}). Both models train {cfg.steps} "
        "steps "
        f"of batch {cfg.batch} with Adam (lr {cfg.lr}), seed {args.seed}: an LSTM (embedding {cfg.d_model}, "
        f"hidden {cfg.d_hidden}, {int(lstm.parameters.iloc[0])} parameters at d = {d_min}) and a one-layer "
        f"two-head transformer (d_model {cfg.d_model}, sinusoidal positions, "
        f"{int(tf.parameters.iloc[0])} parameters). Accuracy on {cfg.n_eval} held-out sequences with a 95% "
        "Wilson interval. Gradient ratio: mean norm of d loss / d embedding at the first token divided by "
        "that at "
        "the query token, in float64.",
    )
    report.add_section(
        "Accuracy against distance",
        f"At d = {d_min} the LSTM reaches {lstm.accuracy[d_min]:.2f} and the transformer "
        f"{tf.accuracy[d_min]:.2f}; at d = {d_max}, {lstm.accuracy[d_max]:.2f} and {tf.accuracy[d_max]:.2f} "
        f"(chance {chance:.3f}).",
    )
    report.add_figure(
        "accuracy",
        figures.line_plot(
            np.log2(np.array(cfg.distances)),
            {"LSTM": lstm.accuracy.to_numpy(), "transformer": tf.accuracy.to_numpy()},
            ci={
                "LSTM": (lstm.accuracy_low.to_numpy(), lstm.accuracy_high.to_numpy()),
                "transformer": (tf.accuracy_low.to_numpy(), tf.accuracy_high.to_numpy()),
            },
            title=f"Recall accuracy after {cfg.steps} steps",
            xlabel="log2 d",
            ylabel="accuracy",
            baseline=chance,
            baseline_label="chance",
        ),
    )
    report.add_section(
        "Gradient to the distant input",
        f"At initialisation the LSTM passes {lstm.grad_ratio_init[d_min]:.2g} of the query's gradient to the "
        f"first token at d = {d_min} and {lstm.grad_ratio_init[d_max]:.2g} at d = {d_max}: it decays "
        "exponentially with distance. The transformer passes "
        f"{tf.grad_ratio_init[d_min]:.2g} and {tf.grad_ratio_init[d_max]:.2g}; its uniform attention at "
        "initialisation spreads the gradient over all d + 2 keys, so it shrinks like 1/d, not exponentially. "
        f"After training: LSTM {lstm.grad_ratio_trained[d_max]:.2g}, transformer "
        f"{tf.grad_ratio_trained[d_max]:.2g} at d = {d_max}.",
    )
    ys = {
        "LSTM, init": np.log10(lstm.grad_ratio_init.clip(lower=1e-300)).to_numpy(),
        "transformer, init": np.log10(tf.grad_ratio_init.clip(lower=1e-300)).to_numpy(),
        "LSTM, trained": np.log10(lstm.grad_ratio_trained.clip(lower=1e-300)).to_numpy(),
        "transformer, trained": np.log10(tf.grad_ratio_trained.clip(lower=1e-300)).to_numpy(),
    }
    report.add_figure(
        "gradient",
        figures.line_plot(
            np.log2(np.array(cfg.distances)),
            ys,
            title="Gradient at the first token relative to the query (log10)",
            xlabel="log2 d",
            ylabel="log10 ratio",
        ),
    )
    report.add_table("distances", table, caption="Both models at every distance.")
    report.add_section(
        "Path length and wall time",
        "Between the first token and the query the LSTM's signal passes d + 1 sequential cell updates; the "
        "transformer's passes one attention hop (per layer; here one layer). The same shows in time: the "
        "LSTM "
        "cell must be stepped once per token, while the transformer handles the sequence in one pass of "
        "matrix products (its cost grows with length through the query-key product, but not as sequential "
        "steps). Forward times, batch 8, width "
        f"{cfg.d_hidden}, one thread, median of {cfg.timing_repeats} runs; they depend on the machine and its load.",
    )
    pivot = times.pivot(index="seq_len", columns="method", values="ms")
    report.add_figure(
        "timing",
        figures.line_plot(
            np.log2(pivot.index.to_numpy()),
            {m: np.log10(pivot[m].to_numpy()) for m in pivot.columns},
            title="Forward wall time (log10 ms)",
            xlabel="log2 sequence length",
            ylabel="log10 ms",
        ),
    )
    report.add_table("timing", times, caption="Forward time per method and length.")
    n_max = max(cfg.timing_lengths)
    report.add_headline(
        f"LSTM accuracy, d = {d_max}",
        float(lstm.accuracy[d_max]),
        ci=(float(lstm.accuracy_low[d_max]), float(lstm.accuracy_high[d_max])),
        note=f"chance {chance:.3f}; 95% Wilson",
    )
    report.add_headline(
        f"transformer accuracy, d = {d_max}",
        float(tf.accuracy[d_max]),
        ci=(float(tf.accuracy_low[d_max]), float(tf.accuracy_high[d_max])),
        note=f"chance {chance:.3f}; 95% Wilson",
    )
    report.add_headline(
        f"gradient ratio at init, LSTM, d = {d_max}",
        float(lstm.grad_ratio_init[d_max]),
        note="first token / query token",
    )
    report.add_headline(
        f"gradient ratio at init, transformer, d = {d_max}",
        float(tf.grad_ratio_init[d_max]),
        note="first token / query token",
    )
    report.add_headline(
        f"LSTM cell loop / transformer pass, time at length {n_max}",
        float(pivot["LSTM cell loop"][n_max] / pivot["transformer, one pass"][n_max]),
        note="machine-dependent",
    )
    verdict = []
    if tf.grad_ratio_init[d_max] > 1e3 * lstm.grad_ratio_init[d_max]:
        verdict.append(
            "the gradient claim holds: the LSTM's gradient to a distant input vanishes exponentially "
            "while attention's shrinks only like 1/d"
        )
    if tf.accuracy[d_max] > lstm.accuracy[d_max] + 0.1:
        verdict.append(
            "under an equal budget the transformer recalls across long distances where the LSTM fails"
        )
    elif tf.accuracy[d_max] < 0.5:
        verdict.append(
            f"but with this small budget the transformer does not solve d = {d_max} either: its "
            "uniform initial attention dilutes the signal by 1/d, so one hop is necessary but not "
            "sufficient for fast learning"
        )
    report.add_section(
        "Conclusion", ("; ".join(verdict) or "the measurements are mixed; see the tables") + "."
    )
    report.add_results(
        {"distances": table.to_dict(orient="records"), "timing": times.to_dict(orient="records")}
    )
    return report


def main(argv: list[str] | None = None) -> int:
    """Run the study: ``interp study recurrence [--steps N] [--out DIR] [--seed N] [--quiet]``."""
    parser = study_parser("recurrence", DESCRIPTION, default_model=None)
    parser.add_argument("--steps", type=int, default=RecurrenceConfig.steps, help="training steps per model")
    parser.add_argument("--distances", default=",".join(map(str, RecurrenceConfig.distances)))
    args = parser.parse_args(argv)
    if args.device not in (None, "cpu"):
        raise ValueError(
            f"the recurrence study runs on the CPU (its timings compare CPU loops); got {args.device!r}"
        )
    cfg = RecurrenceConfig(steps=args.steps, distances=tuple(int(d) for d in args.distances.split(",")))
    start = time.perf_counter()
    rows = []
    for d in tqdm(cfg.distances, desc="distance", disable=args.quiet):
        rows.extend(run_distance(cfg, d, args.seed))
    table = pd.DataFrame(rows)
    times = timing(cfg, args.seed)
    path = build_report(args, cfg, table, times).write()
    if not args.quiet:
        print(f"wrote {path} in {time.perf_counter() - start:.1f} s")
    return 0
