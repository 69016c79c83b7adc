"""One rule for every command's output folder (:func:`interp.preflight.check_owned`): a file of a name the
command writes (any file, for a command that owns its whole folder) that no earlier run of it wrote is refused
in one line, before any model loads, and left as it is; nothing in the folder is touched."""

from __future__ import annotations

import importlib

import pytest

import interp
from interp.cli import main
from interp.sae import save_transcoders
from tests.circuits.test_cli_attribute import LLAMA, PROMPT
from tests.circuits.transcoders import tiny_transcoders

LOADER = importlib.import_module("interp.load")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("inputs")
    save_transcoders(tiny_transcoders(interp.load(str(LLAMA)).cfg, d_transcoder=8, seed=1), root / "tc")
    (root / "texts.txt").write_text("w1 w2 w3\nw4 w5 w6 w7\n")
    return root


def _commands(inputs, out):
    """Each command that writes a folder: its argv, the entry of someone else's it would replace, and who."""
    tc, texts = str(inputs / "tc"), str(inputs / "texts.txt")
    return {
        "attribute": (
            ["attribute", str(LLAMA), "--transcoders", tc, "--prompt", PROMPT, "--out", str(out)],
            out / "index.html",
            f"--out {out} holds index.html, which interp attribute did not write (there is no "
            "graph-manifest.json)",
        ),
        "dashboards": (
            ["dashboards", str(LLAMA), "--dictionary", tc, "--data", texts, "--out", str(out)],
            out / "features" / "tc" / "index.html",
            f"--out {out / 'features' / 'tc'} holds index.html, which interp dashboards did not write (there is "
            "no run.json)",
        ),
        "sae train": (
            [
                "sae",
                "train",
                str(LLAMA),
                "--data",
                texts,
                "--hook",
                "blocks.1.hook_resid_post",
                "--d-sae",
                "8",
                "--k",
                "2",
                "--out",
                str(out),
            ],  # fmt: skip
            out / "notes.md",
            # a training run owns its whole folder: every entry there counts
            f"--out {out} holds kept.txt, notes.md, which interp sae train did not write (there is no run.json)",
        ),
        "study": (
            ["study", "heads", "--out", str(out)],
            out / "results.json",
            f"--out {out} holds results.json, which a report did not write (there is no manifest.json)",
        ),
    }


@pytest.mark.parametrize("command", ["attribute", "dashboards", "sae train", "study"])
def test_someone_elses_file_is_refused_before_the_model_loads(inputs, tmp_path, capsys, monkeypatch, command):
    monkeypatch.setattr(LOADER, "load", lambda *a, **k: pytest.fail("the model loaded before the check"))
    out = tmp_path / "out"
    argv, theirs, message = _commands(inputs, out)[command]
    theirs.parent.mkdir(parents=True)
    theirs.write_text("someone else's")
    (out / "kept.txt").write_text("kept")
    before = sorted(p.relative_to(out).as_posix() for p in out.rglob("*"))
    assert main([*argv, "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert err.endswith("they are left untouched: move them, or choose a new or empty folder")
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == before
    assert theirs.read_text() == "someone else's" and (out / "kept.txt").read_text() == "kept"
