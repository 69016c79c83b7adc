"""Feature search, ``GET /search``: the labels of the named folders (:mod:`~interp.serve.pages.labels`) found by
their words or by their meaning.

``GET /api/search?q=...&mode=text``: the labels holding every word of the query (case ignored), those holding
it as one phrase first, shorter labels before longer ones. ``mode=meaning``: every label ranked by the cosine
similarity of its sentence embedding to the query's, with the packaged MiniLM (``minilm-l6``, as the embedding
score of ``interp autointerp`` embeds texts: :class:`~interp.sae.explanations.embedding.SentenceEmbedder`),
loaded on the first such search and run on the model's queue like every computation; the labels' embeddings
are kept until the labels change. Each result names its feature, the source it belongs to on this server
(``null`` for a dictionary not served here), its scan and its file.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from fastapi import APIRouter, Request

from interp.serve.errors import RequestError, at_most
from interp.serve.pages.labels import Label, Labels
from interp.serve.pages.page import render, respond
from interp.serve.pages.state import workbench
from interp.serve.work import compute

router = APIRouter()
MAX_QUERY = 500
"""Characters of a query."""
WORD = re.compile(r"\w+")


@router.get("/search")
async def search_page(request: Request) -> object:
    return respond(render(request.app.state.served, "search", "Feature search"))


@router.get("/api/search")
async def search(
    q: str, request: Request, mode: Literal["text", "meaning"] = "text", limit: int = 25
) -> dict[str, Any]:
    served = request.app.state.served
    if not q.strip():
        raise RequestError(400, "the query is empty; give words of an explanation, such as 'plural nouns'")
    if len(q) > MAX_QUERY:
        raise RequestError(400, f"the query is {len(q)} characters; give at most {MAX_QUERY}")
    if limit < 1:
        raise RequestError(400, f"limit={limit}; give the number of results, 1 or more")
    at_most("limit", limit, served.limits.max_results, "--max-results")
    bench = workbench(request)
    labels = await bench.current_labels()
    if mode == "text":
        found = by_words(labels, q)[:limit]
    else:
        found = await compute(request, lambda cancel: by_meaning(bench, labels, q, limit))
    return {
        "query": q,
        "mode": mode,
        "n_labels": len(labels.all),
        "results": [{**label.to_json(), "score": score} for label, score in found],
    }


def by_words(labels: Labels, query: str) -> list[tuple[Label, float]]:
    """The labels holding every word of ``query`` (see the module docstring); the score is 2 for the whole
    phrase, 1 for the words apart."""
    words = [w.lower() for w in WORD.findall(query)]
    phrase = " ".join(query.lower().split())
    found = []
    for label in labels.all:
        text = label.text.lower()
        if words and all(w in text for w in words):
            found.append((label, 2.0 if phrase in " ".join(text.split()) else 1.0))
    found.sort(key=lambda x: (-x[1], len(x[0].text), x[0].text))
    return found


def by_meaning(bench: Any, labels: Labels, query: str, limit: int) -> list[tuple[Label, float]]:
    """Every label by the cosine of its embedding with the query's, most similar first (``limit`` of them)."""
    if not labels.all:
        return []
    texts, embeddings = bench.embedded(labels)
    query_embedding = bench.encoder().encode([query])[0]  # [d]
    cosine = embeddings @ query_embedding  # [n texts]: unit vectors
    score = {text: float(c) for text, c in zip(texts, cosine.tolist(), strict=True)}
    ranked = sorted(labels.all, key=lambda label: (-score[label.text], label.text))
    return [(label, score[label.text]) for label in ranked[:limit]]
