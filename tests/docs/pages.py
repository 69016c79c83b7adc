"""The documentation pages and the examples inside them.

A page's ```python blocks run in order in one namespace, as a reader would paste them into one session; its
```console blocks are commands typed at a shell, ``$ interp ...`` (the lines without ``$`` are what they print),
run in the same folder between them. A block that cannot run here (it needs a GPU, several machines or a file of
the reader's own) is preceded by an HTML comment ``<!-- not run: REASON -->``, which the page's reader does not
see; the reason is required.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOT_RUN = re.compile(r"<!--\s*not run:(.*?)-->")
FENCE = re.compile(r"^```(\S*)\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: Path
    line: int  # 1-based line of the opening fence
    language: str
    source: str
    not_run: str | None  # the reason given in a ``<!-- not run: ... -->`` comment just above, if any


def pages() -> list[Path]:
    """The README, the benchmarks' README and every Markdown page under ``docs/``, in a stable order."""
    return [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page``, with the ``not run`` reason that precedes it."""
    lines = page.read_text(encoding="utf-8").split("\n")
    found, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), None)
        if end is None:
            raise ValueError(f"{page.relative_to(ROOT)}:{i + 1}: a code fence that is never closed")
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        reason = NOT_RUN.search(before)
        text = "\n".join(lines[i + 1 : end]) + "\n"
        found.append(Block(page, i + 1, opening.group(1), text, reason.group(1).strip() if reason else None))
        i = end + 1
    return found


def python_blocks(page: Path) -> list[Block]:
    """The page's Python examples that are meant to run."""
    return [b for b in blocks(page) if b.language == "python" and b.not_run is None]


def runnable_blocks(page: Path) -> list[Block]:
    """The page's Python examples and its commands (``console`` blocks) that are meant to run, in page order."""
    return [b for b in blocks(page) if b.language in ("python", "console") and b.not_run is None]


def commands(block: Block) -> list[str]:
    """The commands of a ``console`` block: its lines that start with ``$ ``, without it."""
    return [line[2:].strip() for line in block.source.splitlines() if line.startswith("$ ")]


def relative_links(page: Path) -> list[str]:
    """Targets of the page's Markdown links that point inside the repository (no scheme, no bare anchor)."""
    return links_in(page.read_text(encoding="utf-8"))


def links_in(text: str) -> list[str]:
    """Targets of the Markdown links in ``text`` that point inside the repository, without their anchors."""
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    return [t.split("#")[0] for t in targets if "://" not in t and not t.startswith(("#", "mailto:"))]
