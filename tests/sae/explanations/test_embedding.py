"""The embedding score with the packaged MiniLM: the embeddings against transformers' own BERT with
sentence-transformers' pooling, and the score on planted features."""

from __future__ import annotations

import functools

import pytest
import torch

import interp
from interp.load.packaged import packaged_path
from interp.sae.explanations import EmbeddingScorer, FeatureFiles, SentenceEmbedder
from tests.sae.explanations.planted import PLANTED, write_folder

TEXTS = [
    "numbers written in digits",
    "The train leaves at 5 pm and arrives at 9.",
    " red and blue\nand green",
    "word " * 300,  # longer than the 256 word pieces kept
]


@functools.cache
def embedder() -> SentenceEmbedder:
    return SentenceEmbedder(interp.load("minilm-l6"), batch_size=3)


def test_embeddings_match_transformers_bert_mean_pooled_and_normalized():
    """The reference: transformers' BertModel on the same folder, the tokenizer cutting at 256, the last hidden
    state averaged over the attention mask and scaled to unit length, as sentence-transformers' modules.json for
    this model (Transformer, Pooling mean, Normalize) says."""
    transformers = pytest.importorskip("transformers")
    folder = packaged_path("minilm-l6")
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    bert = transformers.AutoModel.from_pretrained(folder).eval()
    batch = tokenizer(TEXTS, padding=True, truncation=True, max_length=256, return_tensors="pt")
    with torch.no_grad():
        hidden = bert(**batch).last_hidden_state  # [batch, pos, d_model]
    mask = batch["attention_mask"].unsqueeze(-1).float()
    expected = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1)
    got = embedder().encode(TEXTS)
    # float32 forward passes of two implementations of the same six layers: agreement to ~1e-6 per component
    torch.testing.assert_close(got, expected, atol=2e-6, rtol=0)
    torch.testing.assert_close(got.norm(dim=-1), torch.ones(len(TEXTS)))


def test_a_language_model_is_refused_as_encoder():
    from tests.sae.models import tiny_model

    with pytest.raises(
        ValueError, match="is a language model .*, not a sentence encoder; give one such as minilm-l6"
    ):
        SentenceEmbedder(tiny_model(), name="tiny")


@pytest.mark.slow
def test_planted_true_explanations_embed_nearer_than_shuffled(tmp_path):
    folder = FeatureFiles.open(write_folder(tmp_path, n_examples=80))
    scorer = EmbeddingScorer(embedder())
    for i, planted in enumerate(PLANTED):
        record = folder.record(planted.id)
        _, test = record.split(10, 30, seed=0)
        test = [e.window(32) for e in test]
        negatives = record.negatives(30, 32, seed=0)
        true = scorer.score(planted.explanation, test, negatives)
        shuffled = scorer.score(PLANTED[(i + 1) % 3].explanation, test, negatives)
        print(planted.kind, true.auc, true.interval, shuffled.auc, shuffled.interval)
        assert true.interval[0] > 0.5, (planted.kind, true)
        assert shuffled.interval[0] < 0.5 < shuffled.interval[1], (planted.kind, shuffled)
