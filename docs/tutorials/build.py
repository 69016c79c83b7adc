"""Write the tutorial notebooks from the cells below: ``python docs/tutorials/build.py``.

The notebooks are committed without outputs; edit them here, not in Jupyter, and run this script. Every
markdown cell that states a result is followed by a code cell that asserts it, so a change to the library
that breaks the story fails the test that executes the notebooks (``tests/docs/test_tutorials.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from cells_features import CELLS as FEATURES  # noqa: E402
from cells_graphs import CELLS as GRAPHS  # noqa: E402
from cells_readable import CELLS as READABLE  # noqa: E402
from cells_seed import CELLS as SEED  # noqa: E402
from cells_sentence import CELLS as SENTENCE  # noqa: E402

NOTEBOOKS = {
    "01-one-sentence.ipynb": SENTENCE,
    "02-features-to-circuits.ipynb": FEATURES,
    "03-attribution-graphs.ipynb": GRAPHS,
    "04-readable-features.ipynb": READABLE,
    "05-why-it-means-animal.ipynb": SEED,
}


def notebook(cells: list[tuple[str, str]]) -> nbformat.NotebookNode:
    """A notebook of ``(kind, source)`` cells, ``kind`` being ``"md"`` or ``"code"``, on a Python 3 kernel."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    make = {"md": nbformat.v4.new_markdown_cell, "code": nbformat.v4.new_code_cell}
    nb.cells = [make[kind](source.strip("\n")) for kind, source in cells]
    for i, cell in enumerate(nb.cells):
        cell.id = f"cell-{i:02d}"  # stable ids, so that rebuilding changes nothing
    return nb


def render(cells: list[tuple[str, str]]) -> str:
    """The notebook's file contents."""
    return nbformat.writes(notebook(cells)) + "\n"


def main() -> None:
    for name, cells in NOTEBOOKS.items():
        (HERE / name).write_text(render(cells), encoding="utf-8")
        print(f"wrote {HERE / name}")


if __name__ == "__main__":
    main()
