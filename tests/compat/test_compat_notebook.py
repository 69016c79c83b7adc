"""scripts/compat_notebook.py runs a TransformerLens or SAELens notebook on the compat faces and counts the cells
that run.

A small notebook written here stands in for the libraries' own (which are not in this repository): a hub load by
name that the runner swaps, a cell that uses the model, a TransformerLens module interp does not provide, a plain
error, a cell after the errors that still runs, and SAELens cells whose SAE release and dataset the runner swaps
for local ones.
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

SCRIPT = ROOT / "scripts" / "compat_notebook.py"


def _runner():
    spec = importlib.util.spec_from_file_location("compat_notebook", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_hub_loads_by_literal_name_are_swapped_and_nothing_else():
    runner = _runner()
    swap = runner.swap_hub_loads
    assert (
        swap('m = TransformerBridge.boot_transformers("openai-community/gpt2", device=device)')
        == "m = TransformerBridge.from_interp(random_model())"
    )
    assert (
        swap("m = HookedTransformer.from_pretrained('gpt2-small', device=torch.device('cpu'))")
        == "m = HookedTransformer.from_interp(random_model())"
    )
    assert swap('a = HookedTransformer.from_pretrained_no_processing("pythia-70m")') == (
        "a = HookedTransformer.from_interp(random_model())"
    )
    assert swap('m = HookedSAETransformer.from_pretrained("gpt2-small", device=device)') == (
        "m = HookedSAETransformer.from_interp(random_model())"
    )
    kept = "m = HookedTransformer.from_pretrained(model_name, checkpoint_index=index, device=device)"
    assert swap(kept) == kept  # a variable name (training checkpoints in a loop) is left to fail or run
    assert swap("print('boot_transformers(\"x\")')") == "print('boot_transformers(\"x\")')"
    assert (
        swap('tok = AutoTokenizer.from_pretrained("gpt2")') == 'tok = AutoTokenizer.from_pretrained("gpt2")'
    )


def test_sae_releases_and_datasets_by_literal_name_are_swapped():
    runner = _runner()
    cell = (
        'sae = SAE.from_pretrained(\n    release="gpt2-small-res-jb",  # name\n'
        '    sae_id="blocks.7.hook_resid_pre",\n)'
    )
    assert runner.swap_hub_loads(cell) == cell.replace('"gpt2-small-res-jb"', "SAE_RELEASE")
    positional = (
        'a, b, c = SAE.from_pretrained_with_cfg_and_sparsity("gpt2-small-res-jb", "blocks.3.attn.hook_z")'
    )
    assert runner.swap_hub_loads(positional) == positional.replace('"gpt2-small-res-jb"', "SAE_RELEASE")
    assert runner.sae_ids([cell, positional, cell]) == ["blocks.7.hook_resid_pre", "blocks.3.attn.hook_z"]
    assert runner.swap_hub_loads('ds = load_dataset(path="NeelNanda/pile-10k", split="train")') == (
        'ds = load_dataset(path=DATASET, split="train")'
    )
    assert runner.swap_hub_loads("ds = load_dataset('NeelNanda/pile-10k')") == "ds = load_dataset(DATASET)"


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
        "from sae_lens import SAE, HookedSAETransformer\n"
        'sae_model = HookedSAETransformer.from_pretrained("gpt2-small")\n'
        'sae = SAE.from_pretrained(release="gpt2-small-res-jb", sae_id="blocks.7.hook_resid_pre")',
        '_, cache = sae_model.run_with_cache_with_saes("The cat sat", saes=[sae])\n'
        'assert cache["blocks.7.hook_resid_pre.hook_sae_acts_post"].shape[-1] == sae.cfg.d_sae',
        "from datasets import load_dataset\n"
        'ds = load_dataset(path="NeelNanda/pile-10k", split="train")\n'
        "assert len(ds) == 300 and sae.cfg.metadata.dataset_path is not None",
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
    assert lines[-1] == "7 of 9 code cells ran", result.stdout[-3000:]
    assert (
        lines[3].startswith("cell   3: ModuleNotFoundError")
        and lines[4] == "cell   4: ZeroDivisionError: division by zero"
    )
    report = json.loads((tmp_path / "result.json").read_text())
    assert [c["ran"] for c in report["cells"]] == [True, True, True, False, False, True, True, True, True]
    assert (report["ran"], report["of"]) == (7, 9)
    assert path.read_bytes() == written  # the notebook itself is read, never written
