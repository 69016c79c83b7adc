"""The embedding score: is an explanation nearer, in a sentence embedding, to where the feature fires?

Texts are embedded as sentence-transformers embeds them with all-MiniLM-L6-v2 (the packaged ``minilm-l6``): the
encoder's last hidden states averaged over the text's tokens ([CLS] and [SEP] included, padding left out),
then scaled to unit length, with texts cut to 256 word pieces (the model's ``max_seq_length``). The
explanation's cosine similarity to each activating and each non-activating example is a score, and the score of
an explanation is the AUC of those similarities (delphi's embedding scorer; chance 0.5), so no language model is
asked and nothing is sampled: the number is a pure function of the explanation and the examples.

delphi prefixes the explanation with an instruction meant for instruction-tuned embedding models; MiniLM is not
one, so the query here is the explanation alone by default (``query`` changes it).

As a :class:`~interp.sae.explanations.scorer.Scorer` it prepares no request for the language model: its judging
is the embedding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from interp.sae.explanations.chat import ChatReply, ChatRequest
from interp.sae.explanations.failure import Failure
from interp.sae.explanations.metrics import CHANCE, auc, auc_interval
from interp.sae.explanations.records import Example
from interp.sae.explanations.scorer import Scorer


class SentenceEmbedder:
    """Unit-length sentence embeddings from an encoder interp loads (``interp.load("minilm-l6")``).

    Args:
        model: an encoder whose forward returns hidden states ``[batch, pos, d_model]``.
        name: the model's name, as results record it.
        max_tokens: texts are cut to this many tokens, special tokens included.
        batch_size: texts per forward pass.
    """

    def __init__(
        self, model: Any, *, name: str = "minilm-l6", max_tokens: int = 256, batch_size: int = 64
    ) -> None:
        if model.cfg.lm_head != "none":
            raise ValueError(
                f"{name} is a language model (lm_head={model.cfg.lm_head!r}), not a sentence encoder; give one such "
                "as minilm-l6"
            )
        self.model = model
        self.name = name
        self.max_tokens = max_tokens
        self.batch_size = batch_size

    @torch.no_grad()
    def encode(self, texts: Sequence[str]) -> torch.Tensor:
        """``[len(texts), d_model]``, each row of unit length."""
        rows = []
        for start in range(0, len(texts), self.batch_size):
            ids, mask = self._tokens(texts[start : start + self.batch_size])
            hidden = self.model(ids, attention_mask=mask).float()  # [batch, pos, d_model]
            weights = mask.unsqueeze(-1).to(hidden.dtype)  # [batch, pos, 1]
            pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)  # [batch, d_model]
            rows.append(torch.nn.functional.normalize(pooled, dim=-1))
        return torch.cat(rows) if rows else torch.empty(0, self.model.cfg.d_model)

    def _tokens(self, texts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Ids and mask ``[batch, pos]``, right-padded; a text too long keeps its first tokens and its closing
        special token."""
        tokenizer = self.model.tokenizer
        rows = []
        for encoding in tokenizer.backend.encode_batch(list(texts), add_special_tokens=True):
            ids = encoding.ids
            if len(ids) > self.max_tokens:
                ids = (
                    ids[: self.max_tokens - 1] + ids[-1:]
                    if encoding.special_tokens_mask[-1]
                    else ids[: self.max_tokens]
                )
            rows.append(ids)
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), tokenizer.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = torch.tensor(row)
            mask[i, : len(row)] = 1
        device = getattr(self.model, "device", None)
        return (ids, mask) if device is None else (ids.to(device), mask.to(device))


@dataclass(frozen=True)
class EmbeddingTask:
    """What is embedded for one explanation: the query, then the activating and the non-activating texts."""

    query: str
    texts: tuple[str, ...]
    n_positive: int
    requests: tuple[ChatRequest, ...] = ()


@dataclass(frozen=True)
class EmbeddingScore:
    """The explanation's similarity to each example, and their AUC (``interval`` ``None`` where a class has
    fewer than two examples)."""

    auc: float
    interval: tuple[float, float] | None
    similarities: tuple[float, ...]
    activating: tuple[bool, ...]
    model: str
    query: str
    chance: float = CHANCE

    def to_json(self) -> dict[str, Any]:
        return {
            "auc": self.auc,
            "interval": None if self.interval is None else list(self.interval),
            "chance": self.chance,
            "n_positive": sum(self.activating),
            "n_negative": len(self.activating) - sum(self.activating),
            "model": self.model,
        }


class EmbeddingScorer(Scorer):
    """Scores explanations by embedding similarity.

    Args:
        embedder: the sentence encoder.
        query: how the explanation is written before it is embedded; ``{explanation}`` is replaced by it.
        seed: the bootstrap's seed.
    """

    name = "embedding"

    def __init__(self, embedder: SentenceEmbedder, query: str = "{explanation}", seed: int = 0) -> None:
        if "{explanation}" not in query:
            raise ValueError(f"query={query!r} has no '{{explanation}}' to put the explanation in")
        self.embedder = embedder
        self.query = query
        self.seed = seed

    def prepare(
        self, explanation: str, test: Sequence[Example], negatives: Sequence[Example], key: Any = 0
    ) -> EmbeddingTask:
        if not test or not negatives:
            raise ValueError(
                f"the embedding score needs both kinds of example; got {len(test)} and {len(negatives)}"
            )
        query = self.query.replace("{explanation}", explanation)
        return EmbeddingTask(query, tuple(e.text for e in [*test, *negatives]), len(test))

    def judge(
        self, prepared: EmbeddingTask, replies: Sequence[ChatReply | Failure], model: str | None
    ) -> EmbeddingScore:
        """Embed the query and the texts; ``replies`` and ``model`` are unused (no model is asked)."""
        vectors = self.embedder.encode([prepared.query, *prepared.texts])  # [1 + examples, d_model]
        similarity = (vectors[1:] @ vectors[0]).tolist()  # [examples]
        pos, neg = similarity[: prepared.n_positive], similarity[prepared.n_positive :]
        return EmbeddingScore(
            auc=auc(pos, neg),
            interval=auc_interval(pos, neg, seed=self.seed),
            similarities=tuple(similarity),
            activating=tuple([True] * len(pos) + [False] * len(neg)),
            model=self.embedder.name,
            query=prepared.query,
        )
