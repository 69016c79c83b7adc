"""Explaining and scoring every feature of a dashboards folder, resumably, one JSON Lines row per feature.

Features go in chunks: the chunk's explanations are asked for in one call to the backend (so a local model
generates them as one batch and an endpoint has them all in flight), then every scorer's prompts for the chunk
in one more call (the scorers, :mod:`~interp.sae.explanations.registry`, all prepare and judge alike; the
embedding score asks nothing); each finished feature's row is appended to the output and flushed before the
next chunk starts. A row records the explanation, the model that wrote it and the hash of its prompt, and each
score with its chance level, interval, prompts' hashes and the model that answered.

A rerun reads the rows already written and skips every feature whose row is complete for the same settings and
model; the rest are asked again through the answer cache, which holds every answer the earlier run received
(each is cached the moment it arrives), so nothing is asked twice. What goes wrong for one feature (an
unreadable feature file, an explainer that returns nothing usable, a request that failed after its retries or
was answered with something that is not an answer, too few examples, a score with no readable answer to be
computed from) is a :class:`~interp.sae.explanations.failure.Failure`, written in its row as one line under
``error``, and the run goes on; such rows are retried on the next run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interp.atomic import write_atomic
from interp.sae.explanations.chat import Backend
from interp.sae.explanations.embedding import EmbeddingScorer
from interp.sae.explanations.explainer import Explainer
from interp.sae.explanations.failure import Failure
from interp.sae.explanations.folder import FeatureFileError, FeatureFiles
from interp.sae.explanations.records import Example, FeatureId, FeatureRecord
from interp.sae.explanations.registry import make_scorers
from interp.sae.explanations.scorer import Score, Scorer
from interp.sae.explanations.settings import Settings


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
    """One feature on its way through a chunk; :meth:`row` is what is written for it."""

    id: FeatureId
    scan: str
    settings: Settings
    record: FeatureRecord | None = None
    explain: list[Example] = field(default_factory=list)
    test: list[Example] = field(default_factory=list)
    negatives: list[Example] = field(default_factory=list)
    length: int | None = None
    explainer: dict[str, Any] | None = None
    explanation: str | None = None
    failure: Failure | None = None
    scores: dict[str, Score | Failure] | None = None

    def row(self) -> dict[str, Any]:
        row: dict[str, Any] = {
            "feature": str(self.id),
            "layer": self.id.layer,
            "index": self.id.feature,
            "featureIndex": self.id.index,
            "scan": self.scan,
            "settings": self.settings.to_json(),
        }
        if self.record is not None:
            row["density"] = self.record.density
            row["examples"] = {
                "explain": len(self.explain),
                "test": len(self.test),
                "non_activating": len(self.negatives),
                "tokens": self.length,
            }
        if self.explainer is not None:
            row["explainer"] = self.explainer
        if self.explanation is not None:
            row["explanation"] = self.explanation
        if self.scores is not None:
            row["scores"] = {name: score.to_json() for name, score in self.scores.items()}
        errors = [] if self.failure is None else [self.failure.reason]
        errors += [f"{name}: {s.reason}" for name, s in (self.scores or {}).items() if isinstance(s, Failure)]
        if errors:
            row["error"] = "; ".join(errors)
        return row


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
        settings: see :class:`~interp.sae.explanations.settings.Settings`.
        embedding: the embedding scorer, needed when ``settings.scorers`` has ``"embedding"``.
        chunk: features explained and scored together.
        progress: a progress bar over features.
        on_row: called with each row once it is written.

    Returns:
        A :class:`Summary`; at the end the file holds one row per feature (rewritten without the rows that later
        rows replaced).
    """
    settings = settings or Settings()
    scorers = make_scorers(settings.scorers, settings, embedding)
    out = Path(out)
    wanted = folder.select(features)
    done = read_rows(out)
    todo = [f for f in wanted if not _complete(done.get(f.index), settings, backend.name)]
    summary = Summary(skipped=len(wanted) - len(todo))
    asked_before = getattr(backend, "asked", 0)
    bar = _progress(len(todo), progress)
    for start in range(0, len(todo), chunk):
        for row in _run_chunk(folder, todo[start : start + chunk], backend, settings, scorers):
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
    scorers: Sequence[Scorer],
) -> list[dict[str, Any]]:
    features = [_prepare(folder, fid, settings) for fid in ids]
    _explain([f for f in features if f.failure is None], backend, settings)
    _score([f for f in features if f.failure is None], backend, scorers)
    return [f.row() for f in features]


def _prepare(folder: FeatureFiles, fid: FeatureId, settings: Settings) -> _Feature:
    feature = _Feature(fid, folder.scan, settings)
    try:
        feature.record = folder.record(fid)
    except FeatureFileError as err:
        feature.failure = Failure(str(err))
        return feature
    feature.explain, feature.test, feature.negatives, feature.length = examples_of(feature.record, settings)
    if not feature.explain:
        feature.failure = Failure(_too_few(feature.record, settings))
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
    if n == 0:
        return (
            f"{record.source}: no activating example; the feature never fired in the text its dashboard was "
            "written from (a dead feature, or one too rare for that text): nothing to explain"
        )
    if n == 1:
        return (
            f"{record.source}: one activating example, which cannot be both shown to the explainer and scored; "
            "write more examples per feature (interp dashboards)"
        )
    return (
        f"{record.source}: {n} activating examples, none left for the explainer after {settings.n_test} held "
        f"out for scoring; give --n-test {n - 1} or less, or write more examples per feature (interp dashboards)"
    )


def _explain(features: Sequence[_Feature], backend: Backend, settings: Settings) -> None:
    explainer = Explainer(threshold=settings.threshold)
    requests = [explainer.request(f.explain) for f in features]
    replies = backend.complete(requests) if requests else []
    for f, request, reply in zip(features, requests, replies, strict=True):
        f.scores = {}
        if isinstance(reply, Failure):
            f.failure = reply.within("the explainer's request failed")
            continue
        f.explainer = {
            "model": backend.name,
            "answered_by": reply.model,
            "prompt": request.key(backend.name),
            "answer": reply.text,
        }
        f.explanation = explainer.parse(reply.text)
        if f.explanation is None:
            f.failure = Failure(f"the explainer's answer holds no explanation: {reply.text[:80]!r}")


def _score(features: Sequence[_Feature], backend: Backend, scorers: Sequence[Scorer]) -> None:
    """Every scorer's prompts for every feature in one call to ``backend``, then each answer judged."""
    found: dict[tuple[int, str], Score | Failure] = {}
    tasks = []
    for i, f in enumerate(features):
        for scorer in scorers:
            if not f.test or not f.negatives:
                found[i, scorer.name] = Failure(_no_examples(f))
            else:
                tasks.append((i, scorer, scorer.prepare(f.explanation, f.test, f.negatives, key=f.id.index)))
    requests = [r for _, _, task in tasks for r in task.requests]
    replies = backend.complete(requests) if requests else []
    at = 0
    for i, scorer, task in tasks:
        found[i, scorer.name] = scorer.judge(task, replies[at : at + len(task.requests)], backend.name)
        at += len(task.requests)
    for i, f in enumerate(features):
        f.scores = {scorer.name: found[i, scorer.name] for scorer in scorers}


def _no_examples(f: _Feature) -> str:
    if not f.test:
        return "no activating example is left for scoring after those shown to the explainer"
    return (
        f"no non-activating example: no run of {f.settings.min_context} tokens where the feature is zero in its "
        "feature file; write examples with more context, or a quantile of examples where it does not fire"
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
