"""``interp generate``: the streamed text is the library's, steering from a file, bad input as one line."""

from __future__ import annotations

import importlib

import pytest
import torch

from interp.analysis import steering_vector
from interp.cli import main
from interp.load import load
from tests.load.builders import byte_level_bpe
from tests.load.families import build

PROMPT = "The cat sat on the mat"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    backend = byte_level_bpe()
    folder = tmp_path_factory.mktemp("cli") / "tiny"
    build("llama", backend.get_vocab_size(), None, folder=folder, tokenizer=backend)  # emboldened weights
    return folder


def _run(capsys, *argv) -> tuple[int, str, str]:
    status = main([str(a) for a in argv])
    out = capsys.readouterr()
    return status, out.out, out.err


def test_generate_streams_the_generated_text(folder, capsys):
    status, out, _ = _run(capsys, "generate", folder, PROMPT, "--max-new-tokens", 9)
    model = load(folder)
    assert status == 0
    assert out == model.generate(PROMPT, 9).text[0] + "\n"
    status, sampled, _ = _run(
        capsys, "generate", folder, PROMPT, "--max-new-tokens", 9, "--sample", "--seed", 3
    )
    assert sampled == model.generate(PROMPT, 9, do_sample=True, seed=3).text[0] + "\n"


def test_generate_steers_with_a_saved_vector(folder, capsys, tmp_path):
    model = load(folder)
    vec = steering_vector(model, ["The cat sat"], ["Numbers like"], "blocks.0.hook_resid_post")
    path = tmp_path / "v.safetensors"
    vec.save(path)
    _, plain, _ = _run(capsys, "generate", folder, PROMPT, "--max-new-tokens", 9)
    _, steered, _ = _run(
        capsys, "generate", folder, PROMPT, "--max-new-tokens", 9, "--steer", path, "--scale", 8
    )
    assert steered == model.generate(PROMPT, 9, fwd_hooks=[vec.hook(8.0)]).text[0] + "\n"
    assert steered != plain
    _, moved, _ = _run(
        capsys, "generate", folder, PROMPT, "--max-new-tokens", 9, "--steer", path, "--scale", 8, "--layer", 1
    )
    name = "blocks.1.hook_resid_post"
    assert moved == model.generate(PROMPT, 9, fwd_hooks=[(name, vec.hook(8.0)[1])]).text[0] + "\n"
    torch.save(vec.vector, tmp_path / "v.pt")
    _, raw, _ = _run(
        capsys, "generate", folder, PROMPT, "--max-new-tokens", 9, "--steer", tmp_path / "v.pt", "--layer", 1
    )
    assert (
        raw
        == model.generate(PROMPT, 9, fwd_hooks=[("blocks.1.hook_resid_pre", vec.hook()[1])]).text[0] + "\n"
    )


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--max-new-tokens", "0"], "--max-new-tokens 0: give at least 1"),
        (["--top-p", "1.5", "--sample"], r"top_p=1.5 is outside \(0, 1\]"),
        (["--temperature", "0", "--sample"], "sampling needs a temperature > 0"),
        (["--temperature", "0.5"], "--temperature only applies when sampling: add --sample"),
        (["--stop", ""], "stop_strings\\[0\\] is empty"),
        (["--layer", "1"], "give the vector with --steer FILE"),
        (["--steer", "missing.safetensors"], "--steer missing.safetensors: no such file"),
    ],
)
def test_bad_input_is_one_line(folder, capsys, extra, message):
    import re

    status, out, err = _run(capsys, "generate", folder, PROMPT, *extra)
    assert status == 2 and out == ""
    assert err.startswith("interp: error: ") and err.count("\n") == 1 and re.search(message, err)


def test_bad_flags_are_refused_before_the_model_loads(folder, capsys, tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded before the bad input was refused")

    monkeypatch.setattr(importlib.import_module("interp.load"), "load", refuse)
    for model, extra, message in (
        (folder, ["--max-new-tokens", "0"], "--max-new-tokens 0"),
        (folder, ["--top-k", "3"], "--top-k only applies when sampling: add --sample"),
        (folder, ["--steer", str(tmp_path / "v.pt")], "no such file"),
        (folder, ["--device", "cuda:99"], "device='cuda:99' cannot be used"),
        (tmp_path / "no-such-model", [], "no model"),
    ):
        status, _, err = _run(capsys, "generate", model, PROMPT, *extra)
        assert status == 2 and message in err and err.count("\n") == 1, err


def test_a_vector_of_another_width_is_refused(folder, capsys, tmp_path):
    torch.save(torch.randn(7), tmp_path / "narrow.pt")
    status, _, err = _run(capsys, "generate", folder, PROMPT, "--steer", tmp_path / "narrow.pt", "--layer", 0)
    assert status == 2 and "shape [7] does not fit 'blocks.0.hook_resid_pre'" in err
