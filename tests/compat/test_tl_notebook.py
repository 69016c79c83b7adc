"""scripts/tl_notebook.py runs a TransformerLens notebook on the compat layer and counts the cells that run.

A small notebook written here stands in for TransformerLens's Main_Demo (which is not in this repository): a hub
load by name that the runner swaps, a cell that uses the model, a TransformerLens module interp does not provide,
a plain error, and a cell after the errors that still runs.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from tests.docs.pages import ROOT
from tests.load.builders import needs_smollm

SCRIPT = ROOT / "scripts" / "tl_notebook.py"


def _runner():
    spec = importlib.util.spec_from_file_location("tl_notebook", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_hub_loads_by_literal_name_are_swapped_and_nothing_else():
    swap = _runner().swap_hub_loads
    swapped = "TransformerBridge.from_interp(random_model())"
    assert (
        swap('m = TransformerBridge.boot_transformers("openai-community/gpt2", device=device)')
        == f"m = {swapped}"
    )
    assert (
        swap("m = HookedTransformer.from_pretrained('gpt2-small', device=torch.device('cpu'))")
        == f"m = {swapped}"
    )
    assert swap('a = HookedTransformer.from_pretrained_no_processing("pythia-70m")') == f"a = {swapped}"
    kept = "m = HookedTransformer.from_pretrained(model_name, checkpoint_index=index, device=device)"
    assert swap(kept) == kept  # a variable name (training checkpoints in a loop) is left to fail or run
    assert swap("print('boot_transformers(\"x\")')") == "print('boot_transformers(\"x\")')"


@pytest.mark.slow
@needs_smollm
def test_a_notebook_runs_cell_by_cell_and_the_count_is_printed(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    cells = [
        "import torch\nfrom transformer_lens.model_bridge import TransformerBridge",
        'model = TransformerBridge.boot_transformers("openai-community/gpt2", device="cpu")',
        'logits = model("The cat sat on the mat", return_type="logits")\n'
        "assert logits.shape[-1] == model.cfg.d_vocab and model.cfg.n_layers == 12 and model.cfg.n_heads == 12",
        "from transformer_lens.loading_from_pretrained import get_checkpoint_labels",
        "1 / 0",
        "print('still here')",
    ]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "demo.ipynb"
    nbformat.write(nb, path)
    written = path.read_bytes()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [sys.executable, str(SCRIPT), str(path), "--out", str(tmp_path / "result.json")],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.strip().splitlines()
    assert lines[-1] == "4 of 6 code cells ran"
    assert (
        lines[3].startswith("cell   3: ModuleNotFoundError")
        and lines[4] == "cell   4: ZeroDivisionError: division by zero"
    )
    report = json.loads((tmp_path / "result.json").read_text())
    assert [c["ran"] for c in report["cells"]] == [True, True, True, False, False, True]
    assert (report["ran"], report["of"]) == (4, 6)
    assert path.read_bytes() == written  # the notebook itself is read, never written
