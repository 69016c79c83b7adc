"""Run a TransformerLens notebook on interp's compat layer, cell by cell, and count the code cells that run.

    python scripts/tl_notebook.py PATH/TO/Main_Demo.ipynb [--model smollm2-135m] [--out result.json]

The notebook is run as written, with two changes and nothing else:

- a first cell (not counted) calls ``interp.compat.transformer_lens.install()``, so ``import transformer_lens``
  gives interp's face, and defines ``random_model()``: an interp model with random weights and GPT-2 small's
  shape (12 layers of 12 heads; d_model 192 to keep it quick on a CPU), learned positions, LayerNorm, GELU,
  ``n_ctx`` 1024, and the packaged SmolLM2 tokenizer (``interp.load("smollm2-135m")``);
- each call that loads a hub model by a literal name, ``TransformerBridge.boot_transformers("...", ...)`` or
  ``HookedTransformer.from_pretrained("...", ...)``, becomes ``TransformerBridge.from_interp(random_model())``
  (no hub is reached; a call with a variable name, such as a loop over training checkpoints, is left as it is).
  With ``--model NAME``, ``random_model()`` returns ``interp.load(NAME)`` instead (a packaged name, a folder or
  a GGUF file).

Every code cell runs even when an earlier one failed (errors are recorded, not raised). The script prints one
line per code cell (``ok`` or the error's first line), then ``N of M code cells ran``, and writes the same as
JSON with ``--out``. The notebook needs the packages it imports (plotly, circuitsvis, fancy_einsum, jaxtyping
for Main_Demo) in this interpreter, whose kernel runs it. Nothing is fetched; the notebook is not copied.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

SETUP = """\
import interp
import interp.compat.transformer_lens as _interp_tl

_interp_tl.install()
MODEL = {model!r}


def random_model():
    \"\"\"A random interp model of GPT-2 small's depth and heads, with the packaged SmolLM2 tokenizer; or MODEL.\"\"\"
    if MODEL is not None:
        return interp.load(MODEL)
    tokenizer = interp.load("smollm2-135m").tokenizer
    cfg = interp.TransformerConfig(
        n_layers=12, n_heads=12, d_model=192, d_mlp=768, d_vocab=tokenizer.vocab_size, n_ctx=1024,
        norm="layernorm", positional="learned", act="gelu_tanh", seed=0, name="random-gpt2-shape",
    )
    model = interp.HookedTransformer(cfg).eval()
    model.tokenizer = tokenizer
    return model
"""

# A call whose first argument is a string literal: a model name on the hub.
HUB_LOAD = re.compile(
    r"(?:TransformerBridge\.boot_transformers|HookedTransformer\.from_pretrained(?:_no_processing)?)"
    r"\(\s*(['\"])[^'\"]*\1[^()]*(?:\([^()]*\)[^()]*)*\)"
)
SWAPPED = "TransformerBridge.from_interp(random_model())"


def swap_hub_loads(source: str) -> str:
    """``source`` with every hub load by literal name replaced by a random interp model."""
    return HUB_LOAD.sub(SWAPPED, source)


def run(path: Path, timeout: int = 600, model: str | None = None) -> dict:
    """Run the notebook at ``path`` (see the module docstring); returns ``{"cells": [...], "ran": n, "of": m}``."""
    import nbclient
    import nbformat

    nb = nbformat.read(path, as_version=4)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    for cell in code:
        cell.source = swap_hub_loads(cell.source)
        cell.outputs = []
    nb.cells = [nbformat.v4.new_code_cell(SETUP.format(model=model)), *code]
    client = nbclient.NotebookClient(
        nb, timeout=timeout, kernel_name="python3", allow_errors=True, resources={"metadata": {"path": "."}}
    )
    client.execute()
    setup_error = _error(nb.cells[0])
    if setup_error is not None:
        raise RuntimeError(f"the setup cell failed: {setup_error}")
    cells = []
    for index, cell in enumerate(nb.cells[1:]):
        error = _error(cell)
        cells.append({"index": index, "ran": error is None, "error": error, "source": cell.source[:200]})
    ran = sum(c["ran"] for c in cells)
    return {"notebook": path.name, "model": model or "random", "cells": cells, "ran": ran, "of": len(cells)}


def _error(cell) -> str | None:
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            lines = str(output.get("evalue", "")).strip().splitlines()
            return f"{output.get('ename', 'Error')}: {lines[0] if lines else ''}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook", type=Path, help="the notebook to run (it is read, never copied)")
    parser.add_argument(
        "--model", help="load this model for the hub loads (default: a random GPT-2-shaped one)"
    )
    parser.add_argument("--out", type=Path, help="write the per-cell result as JSON here")
    parser.add_argument("--timeout", type=int, default=600, help="seconds one cell may take")
    args = parser.parse_args(argv)
    if not args.notebook.is_file():
        parser.error(f"{args.notebook} is not a file; give the path of a .ipynb notebook")
    result = run(args.notebook, timeout=args.timeout, model=args.model)
    for cell in result["cells"]:
        print(f"cell {cell['index']:3d}: {'ok' if cell['ran'] else cell['error']}")
    print(f"{result['ran']} of {result['of']} code cells ran")
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
