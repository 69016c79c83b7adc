"""Explaining and scoring every feature of a dashboards folder, resumably, one JSON Lines row per feature.

Features go in chunks: the chunk's explanations are asked for in one call to the backend (so a local model
generates them as one batch and an endpoint has them all in flight), then every scorer prompt of the chunk in
one more call, then the embedding score; each finished feature's row is appended to the output and flushed
before the next chunk starts. A row records the explanation, the model that wrote it and the hash of its prompt,
and each score with its chance level, interval, prompts' hashes and the model that answered.

A rerun reads the rows already written and skips every feature whose row is complete for the same settings and
model; the rest are asked again through the answer cache, which already holds every answer the earlier run
received, so nothing is asked twice. What goes wrong for one feature (an unreadable feature file, an explainer
that returns nothing usable, a request that failed after its retries, too few examples) is written in its row as
one line under ``error``, and the run goes on; such rows are retried on the next run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from interp.atomic import write_atomic
from interp.sae.explanations.chat import Backend, ChatFailure
from interp.sae.explanations.classifier import ClassifierScorer, DetectionScorer, FuzzingScorer
from interp.sae.explanations.embedding import EmbeddingScorer
from interp.sae.explanations.explainer import Explainer
from interp.sae.explanations.folder import FeatureFileError, FeatureFiles
from interp.sae.explanations.records import Example, FeatureId, FeatureRecord

SCORERS = ("detection", "fuzzing", "embedding")


@dataclass(frozen=True, kw_only=True)
class Settings:
    """What decides a row's numbers (a row made with other settings is made again).

    Attributes:
        scorers: which scores to compute, of :data:`SCORERS`.
        n_explain: activating examples shown to the explainer.
        n_test: activating examples scored, with as many non-activating ones.
        context: tokens per example shown (delphi's 32).
        min_context: the shortest examples scored, where the feature files hold no runs of ``context`` tokens
            where the feature is zero (see :meth:`~interp.sae.explanations.records.FeatureRecord.scoring_length`).
        per_prompt: examples per scorer prompt (delphi's 5).
        threshold: fraction of an example's largest activation from which a token is marked.
        probabilities: ask the scorer model for its likeliest tokens, for the AUC.
        seed: the split of the examples, their order in prompts, the wrongly marked tokens, the bootstraps.
    """

    scorers: tuple[str, ...] = SCORERS
    n_explain: int = 20
    n_test: int = 20
    context: int = 32
    min_context: int = 8
    per_prompt: int = 5
    threshold: float = 0.3
    probabilities: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        unknown = [s for s in self.scorers if s not in SCORERS]
        if unknown or not self.scorers:
            raise ValueError(f"scorers {', '.join(unknown) or 'none'}: choose from {', '.join(SCORERS)}")
        for name in ("n_explain", "n_test", "context", "min_context", "per_prompt"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)}; give 1 or more")
        if self.min_context > self.context:
            raise ValueError(
                f"min_context={self.min_context} is more than context={self.context}; give at most it"
            )
        if not 0 < self.threshold <= 1:
            raise ValueError(f"threshold={self.threshold}; give a fraction in (0, 1]")

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "scorers": list(self.scorers)}


@dataclass
class Summary:
    """What a run did: rows written (complete or with an error), rows already there, requests sent."""

    written: int = 0
    failed: int = 0
    skipped: int = 0
    asked: int = 0
    errors: list[str] = field(default_factory=list)


@dataclass
class _Feature:
    """One feature on its way through a chunk."""

    id: FeatureId
    row: dict[str, Any]
    explain: list[Example] = field(default_factory=list)
    test: list[Example] = field(default_factory=list)
    negatives: list[Example] = field(default_factory=list)


def read_rows(path: Path) -> dict[int, dict[str, Any]]:
    """The rows of an output file by ``featureIndex`` (the last row of a feature wins; a line cut short by a
    stopped run is skipped)."""
    rows: dict[int, dict[str, Any]] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
                rows[int(row["featureIndex"])] = row
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                continue
    return rows


def autointerp(
    folder: FeatureFiles,
    backend: Backend,
    out: str | Path,
    *,
    features: Iterable[FeatureId] | None = None,
    settings: Settings | None = None,
    embedding: EmbeddingScorer | None = None,
    chunk: int = 16,
    progress: bool = False,
    on_row: Callable[[dict[str, Any]], Any] | None = None,
) -> Summary:
    """Explain and score the features of ``folder``, appending one row per feature to ``out``.

    Args:
        folder: the dashboards folder (:meth:`FeatureFiles.open`).
        backend: the model that explains and scores (wrap it in a
            :class:`~interp.sae.explanations.cache.CachedBackend` so that a rerun asks nothing twice).
        out: the JSON Lines file; rows already in it for the same settings and model are kept.
        features: which features (all in the folder by default).
        settings: see :class:`Settings`.
        embedding: the embedding scorer, needed when ``settings.scorers`` has ``"embedding"``.
        chunk: features explained and scored together.
        progress: a progress bar over features.
        on_row: called with each row once it is written.

    Returns:
        A :class:`Summary`; at the end the file holds one row per feature (rewritten without the rows that later
        rows replaced).
    """
    settings = settings or Settings()
    if "embedding" in settings.scorers and embedding is None:
        raise ValueError("the embedding score needs an EmbeddingScorer (embedding=...)")
    out = Path(out)
    wanted = folder.select(features)
    done = read_rows(out)
    todo = [f for f in wanted if not _complete(done.get(f.index), settings, backend.name)]
    summary = Summary(skipped=len(wanted) - len(todo))
    asked_before = getattr(backend, "asked", 0)
    bar = _progress(len(todo), progress)
    for start in range(0, len(todo), chunk):
        for row in _run_chunk(folder, todo[start : start + chunk], backend, settings, embedding):
            _append(out, row)
            summary.written += 1
            if row.get("error"):
                summary.failed += 1
                summary.errors.append(f"{row['feature']}: {row['error']}")
            if on_row is not None:
                on_row(row)
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    summary.asked = getattr(backend, "asked", 0) - asked_before
    if out.is_file():
        _compact(out)
    return summary


def _run_chunk(
    folder: FeatureFiles,
    ids: Sequence[FeatureId],
    backend: Backend,
    settings: Settings,
    embedding: EmbeddingScorer | None,
) -> list[dict[str, Any]]:
    features = [_prepare(folder, fid, settings) for fid in ids]
    _explain([f for f in features if not f.row.get("error")], backend, settings)
    explained = [f for f in features if not f.row.get("error")]
    classifiers: list[ClassifierScorer] = []
    if "detection" in settings.scorers:
        classifiers.append(
            DetectionScorer(settings.per_prompt, settings.threshold, settings.probabilities, settings.seed)
        )
    if "fuzzing" in settings.scorers:
        classifiers.append(
            FuzzingScorer(settings.per_prompt, settings.threshold, settings.probabilities, settings.seed)
        )
    for scorer in classifiers:
        _classify(scorer, explained, backend)
    if embedding is not None and "embedding" in settings.scorers:
        for f in explained:
            if not f.test or not f.negatives:
                f.row["scores"]["embedding"] = {"error": _no_examples(f)}
                continue
            f.row["scores"]["embedding"] = embedding.score(
                f.row["explanation"], f.test, f.negatives
            ).to_json()
    for f in explained:
        failed = [f"{name}: {s['error']}" for name, s in f.row["scores"].items() if "error" in s]
        if failed:
            f.row["error"] = "; ".join(failed)
    return [f.row for f in features]


def _prepare(folder: FeatureFiles, fid: FeatureId, settings: Settings) -> _Feature:
    row: dict[str, Any] = {
        "feature": str(fid),
        "layer": fid.layer,
        "index": fid.feature,
        "featureIndex": fid.index,
        "scan": folder.scan,
        "settings": settings.to_json(),
    }
    feature = _Feature(fid, row)
    try:
        record = folder.record(fid)
    except FeatureFileError as err:
        row["error"] = str(err)
        return feature
    row["density"] = record.density
    feature.explain, feature.test, feature.negatives, length = examples_of(record, settings)
    row["examples"] = {
        "explain": len(feature.explain),
        "test": len(feature.test),
        "non_activating": len(feature.negatives),
        "tokens": length,
    }
    if not feature.explain:
        row["error"] = _too_few(record, settings)
    return feature


def examples_of(
    record: FeatureRecord, settings: Settings
) -> tuple[list[Example], list[Example], list[Example], int | None]:
    """A feature's examples as :func:`autointerp` uses them: those shown to the explainer, the activating and
    the non-activating ones scored, and the scored examples' length in tokens (``None`` where the file holds no
    run of ``settings.min_context`` tokens where the feature is zero, and so no non-activating example).

    Scoring another explanation on the same examples (a shuffled-explanation baseline) starts here."""
    explain, test = record.split(settings.n_explain, settings.n_test, settings.seed)
    shown = [e.window(settings.context) for e in explain]
    length = record.scoring_length(len(test), settings.context, settings.min_context)
    if length is None:
        return shown, [e.window(settings.context) for e in test], [], None
    scored = [e.window(length) for e in test]
    return shown, scored, record.negatives(len(scored), length, settings.seed), length


def _too_few(record: FeatureRecord, settings: Settings) -> str:
    n = len(record.activating)
    return (
        f"{record.source}: {n} activating example{'s' * (n != 1)}, none left for the explainer after "
        f"{settings.n_test} held out for scoring; write more examples per feature or lower --n-test"
    )


def _explain(features: Sequence[_Feature], backend: Backend, settings: Settings) -> None:
    explainer = Explainer(threshold=settings.threshold)
    requests = [explainer.request(f.explain) for f in features]
    replies = backend.complete(requests) if requests else []
    for f, request, reply in zip(features, requests, replies, strict=True):
        f.row["scores"] = {}
        if isinstance(reply, ChatFailure):
            f.row["error"] = f"the explainer's request failed: {reply.reason}"
            continue
        f.row["explainer"] = {
            "model": backend.name,
            "answered_by": reply.model,
            "prompt": request.key(backend.name),
            "answer": reply.text,
        }
        explanation = explainer.parse(reply.text)
        if explanation is None:
            f.row["error"] = f"the explainer's answer holds no explanation: {reply.text[:80]!r}"
            continue
        f.row["explanation"] = explanation


def _classify(scorer: ClassifierScorer, features: Sequence[_Feature], backend: Backend) -> None:
    ready = []
    for f in features:
        if not f.test or not f.negatives:
            f.row["scores"][scorer.name] = {"error": _no_examples(f)}
        else:
            ready.append((f, scorer.prepare(f.row["explanation"], f.test, f.negatives, key=f.id.index)))
    requests = [r for _, p in ready for r in p.requests]
    replies = backend.complete(requests) if requests else []
    at = 0
    for f, prepared in ready:
        answers = replies[at : at + len(prepared.requests)]
        at += len(prepared.requests)
        result = scorer.judge(prepared, answers, backend.name).to_json()
        if result["n_positive"] + result["n_negative"] == 0:
            result["error"] = f"no answer could be read ({'; '.join(result['failures'][:2])})"
        f.row["scores"][scorer.name] = result


def _no_examples(f: _Feature) -> str:
    if not f.test:
        return "no activating example is left for scoring after those shown to the explainer"
    return (
        f"no non-activating example: no run of {f.row['settings']['min_context']} tokens where the feature is "
        "zero in its feature file; write examples with more context, or a quantile of examples where it does not fire"
    )


def _complete(row: dict[str, Any] | None, settings: Settings, model: str) -> bool:
    if row is None or row.get("error") or row.get("settings") != settings.to_json():
        return False
    if row.get("explainer", {}).get("model") != model:
        return False
    return all(name in row.get("scores", {}) for name in settings.scorers)


def _append(path: Path, row: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(row, ensure_ascii=False) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _compact(path: Path) -> None:
    """Rewrite ``path`` with one row per feature (the last), atomically."""
    rows = read_rows(path)
    text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows.values())
    write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def _progress(total: int, show: bool) -> Any:
    if not show or total == 0:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="features", unit="feature")
