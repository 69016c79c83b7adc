"""Run a TransformerLens or SAELens notebook on interp's compat faces, cell by cell, and count the cells that run.

    python scripts/compat_notebook.py NOTEBOOK.ipynb [--model NAME] [--sae-release FOLDER] [--dataset PATH]
                                     [--out result.json]

The notebook is run as written, except that what it names on a hub is swapped for something on this machine
(its checkpoint names, and nothing else):

- a first cell (not counted) calls ``interp.compat.sae_lens.install()``, so ``import sae_lens`` and ``import
  transformer_lens`` give interp's faces, and defines ``random_model()``: an interp model with random weights and
  GPT-2 small's shape (12 layers of 12 heads; d_model 192 to keep it quick on a CPU), learned positions,
  LayerNorm, GELU, ``n_ctx`` 1024, and the packaged SmolLM2 tokenizer (``interp.load("smollm2-135m")``); with
  ``--model NAME`` it returns ``interp.load(NAME)`` instead (a packaged name, a folder or a GGUF file);
- each call that loads a model by a literal name, ``TransformerBridge.boot_transformers("...")`` or
  ``HookedTransformer`` / ``HookedSAETransformer.from_pretrained("...")`` (and ``_no_processing``), becomes
  ``CLASS.from_interp(random_model())`` (a call with a variable name, such as a loop over training checkpoints,
  is left as it is);
- the release of ``SAE.from_pretrained(release="...", sae_id=...)`` becomes ``SAE_RELEASE``: the folder given with
  ``--sae-release``, or one the first cell writes with a random SAELens SAE for every ``sae_id`` the notebook
  names (on that hook when the id is one of the model's hooks, else on ``blocks.L.hook_resid_pre`` for the first
  number in the id), trained-on metadata included (context 128, BOS, the dataset below);
- the dataset of ``load_dataset("...")`` / ``load_dataset(path="...")`` becomes ``DATASET``: the local file or
  folder given with ``--dataset``, or a folder the first cell writes with 300 lines of seeded random words.

Every code cell runs even when an earlier one failed (errors are recorded, not raised); a cell still running
after ``--timeout`` seconds is interrupted and counted as not run (``timed out``). The script prints one line
per code cell (``ok``, ``timed out`` or the error: its first line, and the end of its last when it has several),
then ``N of M code cells ran``, and writes the same as JSON with ``--out``. The notebook needs the packages it imports (plotly, fancy_einsum, datasets...) in this
interpreter, whose kernel runs it. Nothing is fetched; the notebook is read, never written.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

SETUP = """\
import json as _json
import random as _random
import tempfile as _tempfile
from pathlib import Path as _Path

import interp
import interp.compat.sae_lens as _interp_sae_lens

_interp_sae_lens.install()
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


def _random_dataset():
    folder = _Path(_tempfile.mkdtemp(prefix="dataset-"))
    words = "the a of and to in is was it for on that with as by at from his her they this".split()
    words += "cat dog John Mary store milk bottle went gave heavens earth created beginning day week".split()
    rng = _random.Random(0)
    lines = [" ".join(rng.choice(words) for _ in range(rng.randint(8, 60))).capitalize() + "." for _ in range(300)]
    (folder / "train.jsonl").write_text("".join(_json.dumps({{"text": line}}) + "\\n" for line in lines))
    return str(folder)


DATASET = {dataset!r} or _random_dataset()


def _random_release(sae_ids):
    import re as _re

    model = random_model()
    root = _Path(_tempfile.mkdtemp(prefix="sae-release-"))
    for sae_id in sae_ids:
        if sae_id in model.hook_dict:
            hook = sae_id
        else:
            found = _re.search(r"\\d+", sae_id)
            layer = min(int(found.group()) if found else 0, model.cfg.n_layers - 1)
            hook = f"blocks.{{layer}}.hook_resid_pre"
        d_in = model.cfg.n_heads * model.cfg.d_head if hook.endswith("hook_z") else model.cfg.d_model
        metadata = {{"hook_name": hook, "model_name": model.cfg.name, "context_size": 128, "prepend_bos": True,
                    "dataset_path": DATASET}}
        config = {{"architecture": "standard", "d_in": d_in, "d_sae": 8 * d_in, "metadata": metadata,
                  "reshape_activations": "hook_z" if hook.endswith("hook_z") else "none"}}
        _interp_sae_lens.SAE.from_dict(config).save_model(root / sae_id)
    return str(root)


SAE_RELEASE = {release!r} or _random_release({sae_ids!r})
"""

# A call whose first argument is a string literal: a model name on the hub.
HUB_LOAD = re.compile(
    r"(?P<cls>TransformerBridge|HookedSAETransformer|HookedTransformer)"
    r"\.(?:boot_transformers|from_pretrained(?:_no_processing)?)"
    r"\(\s*(['\"])[^'\"]*\2[^()]*(?:\([^()]*\)[^()]*)*\)"
)
# SAE.from_pretrained's release, by keyword or as the first positional argument.
SAE_RELEASE = re.compile(
    r"(?P<head>\.from_pretrained(?:_with_cfg_and_sparsity)?\(\s*(?:release\s*=\s*)?)(['\"])[^'\"]*\2"
    r"(?=[^()]*sae_id|\s*,\s*['\"])"
)
SAE_ID = re.compile(
    r"sae_id\s*=\s*(['\"])(?P<id>[^'\"]+)\1|from_pretrained(?:_with_cfg_and_sparsity)?\(\s*(['\"])[^'\"]*\3\s*,\s*(['\"])(?P<pos>[^'\"]+)\4"
)
DATASET_LOAD = re.compile(r"(?P<head>\bload_dataset\(\s*(?:path\s*=\s*)?)(['\"])[^'\"]*\2")


def swap_hub_loads(source: str) -> str:
    """``source`` with every hub model, SAE release and dataset by literal name replaced by a local one."""
    source = HUB_LOAD.sub(lambda m: f"{m['cls']}.from_interp(random_model())", source)
    source = SAE_RELEASE.sub(lambda m: f"{m['head']}SAE_RELEASE", source)
    return DATASET_LOAD.sub(lambda m: f"{m['head']}DATASET", source)


def sae_ids(sources: list[str]) -> list[str]:
    """Every literal ``sae_id`` the cells name, in order of first appearance."""
    found = (m["id"] or m["pos"] for source in sources for m in SAE_ID.finditer(source))
    return list(dict.fromkeys(found))


def run(
    path: Path,
    timeout: int = 600,
    model: str | None = None,
    release: str | None = None,
    dataset: str | None = None,
) -> dict:
    """Run the notebook at ``path`` (see the module docstring); returns ``{"cells": [...], "ran": n, "of": m}``."""
    import nbclient
    import nbformat

    nb = nbformat.read(path, as_version=4)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    ids = sae_ids([cell.source for cell in code])
    for cell in code:
        cell.source = swap_hub_loads(cell.source)
        cell.outputs = []
    setup = SETUP.format(model=model, dataset=dataset, release=release, sae_ids=ids)
    nb.cells = [nbformat.v4.new_code_cell(setup), *code]
    client = nbclient.NotebookClient(
        nb,
        timeout=timeout,
        interrupt_on_timeout=True,  # a cell that runs too long is stopped and counted, and the next one runs
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": "."}},
    )
    client.execute()
    setup_error = _error(nb.cells[0], timeout)
    if setup_error is not None:
        raise RuntimeError(f"the setup cell failed: {setup_error}")
    cells = []
    for index, cell in enumerate(nb.cells[1:]):
        error = _error(cell, timeout)
        cells.append({"index": index, "ran": error is None, "error": error, "source": cell.source[:200]})
    ran = sum(c["ran"] for c in cells)
    return {"notebook": path.name, "model": model or "random", "cells": cells, "ran": ran, "of": len(cells)}


def _error(cell, timeout: int) -> str | None:
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            if output.get("ename") == "KeyboardInterrupt":
                return f"timed out: still running after {timeout} s (interrupted)"
            lines = str(output.get("evalue", "")).strip().splitlines()
            text = lines[0] if len(lines) < 2 else f"{lines[0][:100]} ... {lines[-1][-200:]}"
            return f"{output.get('ename', 'Error')}: {text}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook", type=Path, help="the notebook to run (it is read, never copied)")
    parser.add_argument(
        "--model", help="load this model for the hub loads (default: a random GPT-2-shaped one)"
    )
    parser.add_argument(
        "--sae-release", help="a local folder with one SAE folder per sae_id (default: random SAEs)"
    )
    parser.add_argument("--dataset", help="a local file or folder for load_dataset (default: random words)")
    parser.add_argument("--out", type=Path, help="write the per-cell result as JSON here")
    parser.add_argument("--timeout", type=int, default=600, help="seconds one cell may take")
    args = parser.parse_args(argv)
    if not args.notebook.is_file():
        parser.error(f"{args.notebook} is not a file; give the path of a .ipynb notebook")
    for flag, value in (("--sae-release", args.sae_release), ("--dataset", args.dataset)):
        if value is not None and not Path(value).exists():
            parser.error(f"{flag} {value} does not exist; give a local folder or file")
    result = run(args.notebook, args.timeout, args.model, args.sae_release, args.dataset)
    for cell in result["cells"]:
        print(f"cell {cell['index']:3d}: {'ok' if cell['ran'] else cell['error']}")
    print(f"{result['ran']} of {result['of']} code cells ran")
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
