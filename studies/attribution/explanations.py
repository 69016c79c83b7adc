"""Explanations of the graphs' top features, scored, against the shuffled-explanation baseline.

Each feature that has a dashboard (the top features of the graphs) gets an explanation written from its dashboard
and scored on examples it was not written from (:mod:`interp.sae.explanations`: the examples are split, the
explainer sees some, the scorers others). The explainer is a language model (by default the packaged SmolLM2,
a 135M model: a weak explainer whose explanations are often a restatement of a token or no explanation at all;
an OpenAI-compatible endpoint serving a larger model is what to use for explanations worth reading) or, with
``tokens``, no model at all: the explanation names the tokens where the feature fires most in the examples shown
(a lexical baseline). The default score is the embedding score with the packaged MiniLM (AUC of the
explanation's similarity to activating against non-activating examples; chance 0.5); detection and fuzzing
(balanced accuracy of a scorer model told the explanation; chance 0.5) can be added where the explainer is a model.

The baseline: every feature scored, on its own examples, with the explanation of another feature, the other
given by a derangement of the features (a permutation with no fixed point, seeded). An explanation that says
something specific about its feature scores above the one borrowed from another; the paired difference (true
minus shuffled, per feature) is the headline. Features of one graph, and of twin graphs, are not independent:
the interval resamples groups of schemas: each feature counts once, in the group that joins every schema it is
top in with every schema sharing a top feature with those (:func:`linked_schemas`), so no score is drawn as two
independent values.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from studies.attribution.measure import interval

TOKENS = "tokens"  # the explainer that names the strongest tokens, without a model
METRIC = {"embedding": "auc", "detection": "accuracy", "fuzzing": "accuracy"}
CHANCE = 0.5


@dataclass(frozen=True)
class ExplanationSettings:
    """Who explains, which scores, and how many examples each side gets."""

    explainer: str
    scorers: tuple[str, ...]
    n_explain: int = 10
    n_test: int = 10
    seed: int = 0


def derangement(n: int, seed: int) -> list[int]:
    """A permutation of ``range(n)`` with no fixed point, drawn uniformly (rejection sampling, seeded).

    >>> p = derangement(5, 0)
    >>> sorted(p) == list(range(5)) and all(p[i] != i for i in range(5))
    True
    """
    if n < 2:
        raise ValueError(f"a derangement needs at least 2 items, got {n}")
    rng = np.random.default_rng(seed)
    while True:
        p = rng.permutation(n)
        if not (p == np.arange(n)).any():
            return p.tolist()


def token_explanation(examples: Sequence[Any], most: int = 3) -> str | None:
    """The explanation the ``tokens`` explainer writes: the tokens where the feature is strongest in the
    examples shown to it, the most frequent first (ties in order of appearance)."""
    counts = Counter(
        e.tokens[int(np.argmax(e.activations))].strip() for e in examples if e.max_activation > 0
    )
    counts.pop("", None)
    if not counts:
        return None
    words = [f'"{t}"' for t, _ in counts.most_common(most)]
    return f"the token {words[0]}" if len(words) == 1 else "the tokens " + ", ".join(words)


def run(
    folder: Path,
    features: Sequence[tuple[int, int]],
    settings: ExplanationSettings,
    backend: Any,
    embedding: Any,
    work: Path,
    progress: bool,
) -> list[dict[str, Any]]:
    """Explain and score ``features`` of the dashboards ``folder`` (``.../features/SCAN``), then score each with
    a deranged feature's explanation; one row per feature (``explanation``, ``true``/``shuffled`` per scorer,
    ``shuffled_from``, or ``error``). Rows and answers are kept under ``work``, so a rerun asks nothing twice."""
    from interp.sae.explanations import FeatureFiles, FeatureId, Settings, autointerp, examples_of, read_rows

    files = FeatureFiles.open(folder.parent.parent, folder.name)
    ids = [FeatureId(layer, feature) for layer, feature in features]
    auto = Settings(
        scorers=settings.scorers, n_explain=settings.n_explain, n_test=settings.n_test, seed=settings.seed
    )
    if settings.explainer == TOKENS:
        rows = _token_rows(files, ids, auto, embedding)
    else:
        key = hashlib.sha256(json.dumps([files.scan, settings.explainer]).encode()).hexdigest()[:12]
        out = work / f"explanations-{key}.jsonl"
        autointerp(files, backend, out, features=ids, settings=auto, embedding=embedding, progress=progress)
        done = read_rows(out)
        rows = [done[f.index] for f in ids]
    table = [_row(r) for r in rows]
    ok = [i for i, r in enumerate(table) if "error" not in r]
    if len(ok) < 2:
        return table
    perm = derangement(len(ok), settings.seed)
    borrowed = {ok[i]: ok[perm[i]] for i in range(len(ok))}
    examples = {i: examples_of(files.record(ids[i]), auto) for i in ok}
    for name in settings.scorers:
        scores = _shuffled_scores(
            name, [(i, table[borrowed[i]]["explanation"], examples[i]) for i in ok], ids, auto, backend,
            embedding,
        )  # fmt: skip
        for i in scores:
            table[i]["shuffled"][name] = scores[i]
    for i in ok:
        other = table[borrowed[i]]
        table[i]["shuffled_from"] = f"{other['layer']}:{other['feature']}"
    return table


def _row(row: dict[str, Any]) -> dict[str, Any]:
    """A feature's row as the study keeps it: the explanation and each score's number."""
    out = {"layer": row["layer"], "feature": row["index"], "featureIndex": row["featureIndex"]}
    if row.get("error") or not row.get("explanation"):
        out["error"] = row.get("error") or "no explanation"
        return out
    out.update(explanation=row["explanation"], true={}, shuffled={})
    for name, score in row["scores"].items():
        out["true"][name] = float(score[METRIC[name]])
    return out


def _token_rows(files: Any, ids: Sequence[Any], auto: Any, embedding: Any) -> list[dict[str, Any]]:
    """autointerp's rows, for the ``tokens`` explainer (embedding score only)."""
    from interp.sae.explanations import FeatureFileError, examples_of

    rows = []
    for fid in ids:
        row: dict[str, Any] = {"layer": fid.layer, "index": fid.feature, "featureIndex": fid.index}
        try:
            explain, test, negatives, _ = examples_of(files.record(fid), auto)
        except FeatureFileError as err:
            rows.append({**row, "error": str(err)})
            continue
        text = token_explanation(explain)
        if text is None:
            rows.append({**row, "error": "no activating example left for the explainer"})
        elif not test or not negatives:
            rows.append({**row, "error": "no activating or no non-activating example to score"})
        else:
            rows.append({**row, "explanation": text, "scores": {"embedding": {"auc": embedding.score(
                text, test, negatives).auc}}})  # fmt: skip
    return rows


def _shuffled_scores(name, items, ids, auto, backend, embedding) -> dict[int, float]:
    """Each feature's score ``name`` with a borrowed explanation, on its own examples (a feature whose score has
    nothing to be computed from, such as no readable answer, is left out)."""
    from interp.sae.explanations import Failure, make_scorers

    (scorer,) = make_scorers([name], auto, embedding)
    tasks = {i: scorer.prepare(text, test, neg, key=ids[i].index) for i, text, (_, test, neg, _) in items}
    requests = [r for task in tasks.values() for r in task.requests]
    replies = backend.complete(requests) if requests else []
    out, at = {}, 0
    for i, task in tasks.items():
        judged = scorer.judge(task, replies[at : at + len(task.requests)], backend.name if requests else None)
        at += len(task.requests)
        if not isinstance(judged, Failure):
            out[i] = float(judged.to_json()[METRIC[name]])
    return out


def schemas_of(groups: Mapping[str, dict], top: int) -> dict[tuple[int, int], list[str]]:
    """``(layer, feature) -> schemas`` in whose graphs it is among the ``top`` by influence (each once)."""
    out: dict[tuple[int, int], list[str]] = {}
    for group in groups.values():
        schema = {p.name: p.schema for p in group["prompts"]}
        for prompt, table in group["features"].items():
            for r in table.head(top).itertuples():
                found = out.setdefault((int(r.layer), int(r.feature)), [])
                if schema[prompt] not in found:
                    found.append(schema[prompt])
    return out


def linked_schemas(schemas: Mapping[tuple[int, int], list[str]]) -> dict[tuple[int, int], str]:
    """Each feature's group for the bootstrap: the schemas it is top in, joined with every schema that shares a
    feature with them (the connected components of "shares a top feature"), so that no feature's score sits in two
    groups and the groups resampled are independent of one another. A group is named by its smallest schema id."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for found in schemas.values():
        for other in found[1:]:
            a, b = sorted((root(found[0]), root(other)))
            parent[b] = a
    return {feature: root(found[0]) for feature, found in schemas.items() if found}


def summarise(
    rows: Sequence[dict[str, Any]],
    schemas: Mapping[tuple[int, int], list[str]],
    scorers: Sequence[str],
    seed: int,
) -> dict[str, Any]:
    """Per scorer: the true and the shuffled explanations' mean score and their paired difference, each with a
    95% interval over linked groups of schemas (one value per feature), the chance level, and counts; how many
    distinct explanations there are, and the most common (a weak explainer repeats one, and a repeated
    explanation scores the same as its shuffled self)."""
    scored = [r for r in rows if "error" not in r and r.get("shuffled")]
    texts = Counter(r["explanation"] for r in rows if r.get("explanation"))
    common = texts.most_common(1)
    out: dict[str, Any] = {
        "n_features": len(rows),
        "n_scored": len(scored),
        "n_distinct_explanations": len(texts),
        "most_common_explanation": {"text": common[0][0], "count": common[0][1]} if common else None,
        "scorers": {},
    }
    linked = linked_schemas(schemas)
    for name in scorers:
        each = [r for r in scored if name in r["true"] and name in r["shuffled"]]  # each feature once
        groups = [linked[(r["layer"], r["feature"])] for r in each]
        true = [r["true"][name] for r in each]
        shuffled = [r["shuffled"][name] for r in each]
        out["scorers"][name] = {
            "quartiles": {
                side: np.percentile([r[side][name] for r in each], [25, 50, 75]).tolist() if each else []
                for side in ("true", "shuffled")
            },
            "metric": METRIC[name],
            "chance": CHANCE,
            "n_values": len(each),
            "n_schemas": len({x for r in each for x in schemas[(r["layer"], r["feature"])]}),
            "n_groups": len(set(groups)),
            "true": interval(true, seed, groups),
            "shuffled": interval(shuffled, seed, groups),
            "difference": interval([a - b for a, b in zip(true, shuffled, strict=True)], seed, groups),
        }
    return out
