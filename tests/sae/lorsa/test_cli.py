"""``interp sae train --kind lorsa``: the run folder caches a layer's attention input and output, trains a Lorsa
on whole windows, writes it in llamascopium's format, resumes; Lorsa's flags refused where they do not apply."""

from __future__ import annotations

import json

import pytest
import torch

import interp.sae as sae_lib
from interp.cli import main
from interp.load import load
from interp.sae.lorsa import Lorsa
from tests.store.models import sentences, write_gpt2_folder


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return write_gpt2_folder(tmp_path_factory.mktemp("ckpt") / "tiny-gpt2")


def _argv(checkpoint, data, out, *extra):
    return [
        "sae", "train", str(checkpoint), "--data", str(data), "--kind", "lorsa", "--layers", "1", "--d-sae", "16",
        "--k", "3", "--out", str(out), "--train-batch-size", "64", "--context", "8", "--shard-rows", "40",
        "--checkpoint-every", "2", "--tokens", "640", "--quiet", *extra,
    ]  # fmt: skip


def test_train_command_writes_a_lorsa_that_splices_and_resumes(tmp_path, checkpoint, capsys):
    data = tmp_path / "corpus.txt"
    lines = sentences(90, seed=4)
    data.write_text("\n".join(" ".join(lines[i : i + 3]) for i in range(0, 90, 3)) + "\n")  # 8 tokens or more
    out = tmp_path / "run"
    assert main(_argv(checkpoint, data, out)) == 0
    line = capsys.readouterr().out
    assert "Lorsa (topk) at layer 1, 16 heads sharing 2 QK heads, trained on 600 cached rows" in line
    lorsa = sae_lib.load(out / "lorsa")
    assert isinstance(lorsa, Lorsa) and lorsa.layers == [1]
    assert lorsa.layer(1).cfg.positional == "none"  # GPT-2's positions are in the stream
    first = {k: v.clone() for k, v in lorsa.state_dict().items()}
    assert main(_argv(checkpoint, data, out)) == 0  # resumes at the end: nothing to redo
    again = sae_lib.load(out / "lorsa")
    assert all(torch.equal(first[k], v) for k, v in again.state_dict().items())
    assert json.loads((out / "run.json").read_text())["complete"]
    model = load(checkpoint)
    ids, mask = model.to_tokens(sentences(3, seed=9))
    with model.saes(lorsa, use_error_term=True):
        logits = model(ids, mask)
    observed = model.run_with_hooks(
        ids, mask, fwd_hooks=[("blocks.1.ln1.hook_normalized", lambda x, h: None)]
    )
    assert torch.equal(logits, observed)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--layers", "0,1"), "--kind lorsa trains one layer; give it as --layers L"),
        (
            ("--n-qk-heads", "2", "--kind", "transcoder"),
            "--n-qk-heads are for --kind lorsa, not --kind transcoder",
        ),
        (("--train-batch-size", "60"), "--train-batch-size 60 is not a whole number of --context 8 windows"),
    ],
)
def test_bad_lorsa_arguments_are_refused(tmp_path, checkpoint, capsys, extra, message):
    data = tmp_path / "ok.txt"
    data.write_text("\n".join(sentences(20, seed=1)) + "\n")
    assert main([*_argv(checkpoint, data, tmp_path / "out"), *extra]) == 2
    assert message in capsys.readouterr().err
