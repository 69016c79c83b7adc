"""Explanations of features, written by a language model and scored as the field scores them.

For each feature of a dashboards folder (circuit-tracer's feature files), an explainer model is shown some of
its activating examples, with the tokens where it fires marked, and asked for a short explanation; the
explanation is then scored on examples it was not written from, by delphi's definitions: **detection** (told
the explanation, does a scorer model pick the activating examples among non-activating ones?), **fuzzing**
(does it tell correctly marked activating tokens from wrongly marked ones?) and the **embedding** score (is the
explanation nearer, in a sentence embedding, to the activating examples?). Every score carries its chance
level (0.5) and an interval.

The language model is a backend: a model interp loads, run through interp's own batched generation
(:class:`LocalBackend`), or any OpenAI-compatible endpoint with several requests in flight
(:class:`EndpointBackend`). Either goes behind a :class:`CachedBackend`, so that a rerun asks nothing twice.

Every scorer follows one :class:`Scorer` protocol (prepare the prompts, then judge the answers), and the
scorers are found by name in :data:`SCORERS`. Whatever fails for one feature (a request, a file, an answer, a
score with nothing to be computed from) is one :class:`Failure`, written in that feature's row.

Files: ``records.py`` (features and examples), ``folder.py`` (reading the feature files), ``prompts/`` and
``prompts.py``, ``failure.py``, ``chat.py`` (requests and replies), ``cache.py``, ``local.py``,
``endpoint.py``, ``explainer.py``, ``scorer.py`` (the protocol), ``classifier.py`` (detection and fuzzing),
``embedding.py``, ``metrics.py``, ``registry.py`` (the scorers by name), ``settings.py`` and ``run.py`` (the
whole folder, resumable). The explanations become the labels of graphs' feature nodes through
:func:`interp.circuits.features.labels.add_labels`, which the ``interp autointerp`` command calls.

Example:
    >>> import interp  # doctest: +SKIP
    >>> from interp.sae.explanations import CachedBackend, LocalBackend, ResponseCache, chat_template_of
    >>> model = interp.load("smollm2-135m")  # doctest: +SKIP
    >>> template = chat_template_of("smollm2-135m")  # doctest: +SKIP
    >>> local = LocalBackend(model, name="smollm2-135m", chat_template=template)  # doctest: +SKIP
    >>> backend = CachedBackend(local, ResponseCache("answers.jsonl"))  # doctest: +SKIP
"""

from interp.sae.explanations.cache import CachedBackend, ResponseCache
from interp.sae.explanations.chat import ChatReply, ChatRequest
from interp.sae.explanations.classifier import DetectionScorer, FuzzingScorer
from interp.sae.explanations.embedding import EmbeddingScorer, SentenceEmbedder
from interp.sae.explanations.endpoint import EndpointBackend
from interp.sae.explanations.explainer import Explainer
from interp.sae.explanations.failure import Failure
from interp.sae.explanations.folder import FeatureFileError, FeatureFiles, read_feature_file
from interp.sae.explanations.local import LocalBackend, chat_template_of
from interp.sae.explanations.metrics import ClassifierMetrics, auc
from interp.sae.explanations.records import Example, FeatureId, FeatureRecord
from interp.sae.explanations.registry import SCORERS, make_scorers
from interp.sae.explanations.run import Summary, autointerp, examples_of, read_rows
from interp.sae.explanations.scorer import Scorer
from interp.sae.explanations.settings import Settings

__all__ = [
    "SCORERS",
    "CachedBackend",
    "ChatReply",
    "ChatRequest",
    "ClassifierMetrics",
    "FeatureFiles",
    "DetectionScorer",
    "EmbeddingScorer",
    "EndpointBackend",
    "Example",
    "Explainer",
    "Failure",
    "FeatureFileError",
    "FeatureId",
    "FeatureRecord",
    "FuzzingScorer",
    "LocalBackend",
    "ResponseCache",
    "Scorer",
    "SentenceEmbedder",
    "Settings",
    "Summary",
    "auc",
    "autointerp",
    "examples_of",
    "make_scorers",
    "chat_template_of",
    "read_feature_file",
    "read_rows",
]
