"""``interp sae train``: the whole pipeline on a tiny checkpoint folder, resuming, and every bad input refused
before the model runs."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest
import torch

import interp.sae as sae_lib
from interp.cli import main
from interp.load import load
from tests.store.models import sentences, write_gpt2_folder


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return write_gpt2_folder(tmp_path_factory.mktemp("ckpt") / "tiny-gpt2")


def _argv(checkpoint, data, out, *extra):
    return [
        "sae", "train", str(checkpoint), "--data", str(data), "--hook", "blocks.1.hook_resid_post",
        "--d-sae", "32", "--k", "4", "--out", str(out), "--train-batch-size", "64", "--context", "8",
        "--shard-rows", "40", "--checkpoint-every", "2", "--quiet", *extra,
    ]  # fmt: skip


def test_train_command_writes_a_loadable_sae_and_resumes(tmp_path, checkpoint, capsys):
    data = tmp_path / "corpus.jsonl"
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in sentences(60, seed=3)))
    out = tmp_path / "run"
    assert main(_argv(checkpoint, data, out, "--tokens", "640")) == 0
    line = capsys.readouterr().out
    assert "topk SAE, d_in=16, d_sae=32" in line and "L0 4.0" in line
    sae = sae_lib.load(out / "sae")
    assert sae.hook_name == "blocks.1.hook_resid_post" and sae.cfg.k == 4
    run = json.loads((out / "run.json").read_text())
    assert run["complete"] and run["d_in"] == 16
    first = {k: v.clone() for k, v in sae.state_dict().items()}
    assert main(_argv(checkpoint, data, out, "--tokens", "640")) == 0  # resumes at the end: nothing to redo
    again = sae_lib.load(out / "sae")
    assert all(torch.equal(first[k], v) for k, v in again.state_dict().items())
    model = load(checkpoint)
    with model.saes([sae], use_error_term=True):
        ids, mask = model.to_tokens(sentences(3, seed=9))
        logits, cache = model.run_with_cache(ids, mask, names_filter="*.hook_sae_acts_post")
    assert torch.equal(logits, model(ids, mask)) and len(cache) == 1


def test_bad_inputs_are_refused_before_the_model_runs(tmp_path, checkpoint, capsys):
    text = tmp_path / "ok.txt"
    text.write_text("one two three\nfour five\n")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n")
    binary = tmp_path / "blob.txt"
    binary.write_bytes(b"\x00\x01\x02abc")
    afile = tmp_path / "afile"
    afile.write_text("x")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes").write_text("x")
    cases = [
        (_argv(checkpoint, text, tmp_path / "a", "--k", "64"), "--k 64 is larger than d_sae=32"),
        (_argv(checkpoint, empty, tmp_path / "b"), "holds no"),
        (_argv(checkpoint, binary, tmp_path / "c"), "not text|not UTF-8|NUL"),
        (_argv(checkpoint, tmp_path / "missing.txt", tmp_path / "d"), "does not exist"),
        (_argv(checkpoint, text, afile), "is a file"),
        (
            _argv(checkpoint, text, foreign),
            "holds notes, which interp sae train did not write \\(there is no run.json\\)",
        ),
        (
            [
                *_argv(checkpoint, text, tmp_path / "e")[:6],
                "blocks.1.hook_resid_pst",
                *_argv(checkpoint, text, tmp_path / "e")[7:],
            ],
            "did you mean 'blocks.1.hook_resid_post'",
        ),
    ]
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert __import__("re").search(message, err), (message, err)
    assert not (tmp_path / "e" / "activations").exists()  # refused before caching anything
    out = tmp_path / "f"
    assert main(_argv(checkpoint, text, out, "--tokens", "64")) == 0
    capsys.readouterr()
    assert main(_argv(checkpoint, text, out, "--tokens", "64", "--seed", "3")) == 2
    assert "holds another run (seed was 0, now 3)" in capsys.readouterr().err


def _tc_argv(checkpoint, data, out, *extra):
    return [
        "sae", "train", str(checkpoint), "--data", str(data), "--d-sae", "24", "--k", "3", "--out", str(out),
        "--train-batch-size", "64", "--context", "8", "--shard-rows", "40", "--checkpoint-every", "2",
        "--tokens", "320", "--quiet", *extra,
    ]  # fmt: skip


@pytest.mark.parametrize(("kind", "extra"), [("clt", ()), ("skip-transcoder", ("--layers", "1"))])
def test_train_command_trains_transcoders_that_splice_into_the_model(
    tmp_path, checkpoint, capsys, kind, extra
):
    data = tmp_path / "corpus.txt"
    data.write_text("\n".join(sentences(40, seed=4)) + "\n")
    out = tmp_path / kind
    assert main(_tc_argv(checkpoint, data, out, "--kind", kind, *extra)) == 0
    assert f"{kind} (topk)" in capsys.readouterr().out
    model = load(checkpoint)
    tc = sae_lib.load_transcoders(out / "transcoders", model=model)
    assert tc.layers == ([0, 1] if kind == "clt" else [1]) and tc.d_transcoder == 24
    assert tc.has_skip == (kind == "skip-transcoder")
    ids, mask = model.to_tokens(sentences(3, seed=9))
    observe = [(tc.input_hook(layer), lambda x, h: None) for layer in tc.layers]
    with model.transcoders(tc, error=True):
        logits = model(ids, mask)
    assert torch.equal(logits, model.run_with_hooks(ids, mask, fwd_hooks=observe))
    assert json.loads((out / "run.json").read_text())["complete"]


def test_bad_transcoder_arguments_are_refused_before_the_model_runs(tmp_path, checkpoint, capsys):
    data = tmp_path / "ok.txt"
    data.write_text("one two three\nfour five\n")
    cases = [
        (("--kind", "clt", "--layers", "1"), "--kind clt spans every layer"),
        (("--kind", "transcoder", "--hook", "blocks.0.hook_resid_post"), "--hook is for SAEs"),
        (("--kind", "transcoder", "--input-site", "ln2.hook_normalised"), "did you mean"),
        (("--kind", "transcoder", "--layers", "0,7"), "the model has layers 0..1"),
    ]
    cases.append(((), "--hook is required for an SAE"))
    for extra, message in cases:
        assert main(_tc_argv(checkpoint, data, tmp_path / "x", *extra)) == 2, extra
        assert message in capsys.readouterr().err, (extra, message)
        assert not (tmp_path / "x" / "activations").exists()


def test_a_record_cut_short_while_written_keeps_the_last_one_and_the_run_resumes(
    tmp_path, checkpoint, capsys, monkeypatch
):
    data = tmp_path / "corpus.txt"
    data.write_text("\n".join(sentences(40, seed=5)) + "\n")
    out = tmp_path / "run"
    write_text = Path.write_text
    records = []

    def disk_fills_on_the_final_record(path, text, *args, **kwargs):
        if not path.name.startswith("run.json"):
            return write_text(path, text, *args, **kwargs)
        records.append(text)
        if len(records) == 1:  # the record of a run under way
            return write_text(path, text, *args, **kwargs)
        write_text(path, text[: len(text) // 2], *args, **kwargs)
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    with monkeypatch.context() as patch:
        patch.setattr(Path, "write_text", disk_fills_on_the_final_record)
        assert main(_argv(checkpoint, data, out, "--tokens", "256")) == 2
    assert "No space left on device" in capsys.readouterr().err
    assert json.loads(records[1])["complete"]  # the write that was cut short was the final record
    assert json.loads((out / "run.json").read_text()) == json.loads(records[0])  # the last record, whole
    assert sorted(p.name for p in out.iterdir()) == ["activations", "checkpoint", "run.json", "sae"]
    assert main(_argv(checkpoint, data, out, "--tokens", "256")) == 0  # resumed at its last checkpoint
    assert json.loads((out / "run.json").read_text())["complete"]


def test_a_transcoder_run_resumed_on_a_wider_model_is_refused_before_anything_is_written(tmp_path, capsys):
    model = write_gpt2_folder(tmp_path / "model")
    data = tmp_path / "corpus.txt"
    data.write_text("\n".join(sentences(40, seed=6)) + "\n")
    out = tmp_path / "tc"
    assert main(_tc_argv(model, data, out, "--kind", "transcoder")) == 0
    capsys.readouterr()
    record = (out / "run.json").read_text()
    assert json.loads(record)["d_in"] == 16
    write_gpt2_folder(model, d_model=32)  # the same folder and data, another width
    assert main(_tc_argv(model, data, out, "--kind", "transcoder")) == 2
    err = capsys.readouterr().err
    assert f"--out {out} was trained with d_in=16, but blocks.0.ln2.hook_normalized has width 32" in err
    assert (out / "run.json").read_text() == record  # the finished run's record is untouched


def test_tokens_bounds_the_cache_and_a_dictionary_worse_than_the_mean_is_said(tmp_path, checkpoint, capsys):
    """``--tokens`` caches the windows that hold the rows it asks for (with ``--skip-first`` rows left out of
    each), not the whole corpus; a run that ends with a fraction of variance unexplained of 1 or more says
    so on stderr, with what to try."""
    from interp.store import ActivationStore, windows

    data = tmp_path / "corpus.txt"
    data.write_text("".join(t + "\n" for t in sentences(300, seed=4)))
    model = load(checkpoint)
    every = windows(model, data.read_text().splitlines(), 8, 16)
    kept = [
        int(n) - 1 for _, mask in every for n in mask.sum(-1)
    ]  # training rows of each window (--skip-first 1)
    assert sum(kept) > 1000
    out = tmp_path / "run"
    # Two steps at a learning rate of 10: the second step's reconstruction is far worse than the mean.
    assert (
        main(_argv(checkpoint, data, out, "--tokens", "200", "--train-batch-size", "100", "--lr", "10")) == 0
    )
    store = ActivationStore(out / "activations")
    needed = next(i for i in range(len(kept)) if sum(kept[: i + 1]) >= 200) + 1
    assert len(store) == sum(int(n) for n in torch.cat([m.sum(-1) for _, m in every])[:needed])
    captured = capsys.readouterr()
    fvu = json.loads((out / "run.json").read_text())["final"]["fvu"]
    assert fvu >= 1, fvu
    assert f"warning: the dictionary's fraction of variance unexplained is {fvu:.3f}" in captured.err
    assert "it took 2 steps of 100 rows: train on more tokens" in captured.err
    assert "TrainingWarning" not in captured.err  # said once, in the command's words


def test_a_refused_setting_is_named_by_its_flag(tmp_path, checkpoint, capsys):
    """The library's refusal carries the setting's name and value (``SettingError``), which the command says
    with its flag: also where the message does not begin with the setting (``k`` refused for ``topk``)."""
    from interp.sae.training import SettingError, TrainSettings

    with pytest.raises(SettingError, match="k=None; architecture='topk' needs k >= 1") as refused:
        TrainSettings(d_sae=8, architecture="topk")
    assert (refused.value.name, refused.value.value) == ("k", None)
    text = tmp_path / "ok.txt"
    text.write_text("one two three\n")
    argv = _argv(checkpoint, text, tmp_path / "a")
    no_k = argv[: argv.index("--k")] + argv[argv.index("--k") + 2 :]
    cases = [
        (no_k, "--k None; architecture='topk' needs k >= 1 active latents"),
        ([*argv, "--lr", "-1"], "--lr -1.0; the learning rate must be a finite number above 0"),
        ([*argv, "--train-batch-size", "0"], "--train-batch-size 0; it must be a whole number of at least 1"),
        ([*argv, "--buffer-rows", "0"], "--buffer-rows 0; it must be a whole number of at least 1"),
    ]
    for case, message in cases:
        assert main(case) == 2, case
        assert message in capsys.readouterr().err, message
