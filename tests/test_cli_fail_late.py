"""The fail-late and traceback paths a new user met: each refused in one line, early, losing nothing.

Every case checks the exit status, that the message is one line naming what was wrong, that it comes before
any model load where it can, that nothing the user had is lost, and that the corrected command then works.
"""

from __future__ import annotations

import importlib
import json
import math
import subprocess
import sys

import pytest
import torch

import interp.sae as sae_lib
from interp import HookedTransformer, TransformerConfig
from interp.analysis import load_steering_vector, steer, steering_sweep, steering_vector
from interp.circuits import Circuit, Pairs, logit_difference
from interp.cli import main
from interp.study import start
from tests.store.models import sentences, write_gpt2_folder
from tests.test_cli import one_error_line

LOADER = importlib.import_module("interp.load")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return write_gpt2_folder(tmp_path_factory.mktemp("ckpt") / "tiny-gpt2")


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(sentences(40, seed=1)) + "\n")
    return path


@pytest.fixture
def no_loading(monkeypatch):
    monkeypatch.setattr(LOADER, "load", lambda *a, **k: pytest.fail("the model loaded before the check"))


def one_line(capsys, *needles: str) -> str:
    return one_error_line(capsys, "interp: error: ", *needles)


def sae_train(checkpoint, data, out, *extra) -> list[str]:
    return [
        "sae", "train", str(checkpoint), "--data", str(data), "--hook", "blocks.1.hook_resid_post",
        "--d-sae", "32", "--k", "4", "--out", str(out), "--train-batch-size", "64", "--context", "8",
        "--tokens", "128", "--quiet", *extra,
    ]  # fmt: skip


# 1. Every training setting before the model loads; a run that failed before its first step never blocks ------


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--lr", "-1"], "--lr -1.0; the learning rate must be a finite number above 0"),
        (["--lr", "nan"], "--lr nan; the learning rate must be a finite number above 0"),
        (["--tokens", "0"], "--tokens 0; train on at least one token"),
        (["--checkpoint-every", "0"], "--checkpoint-every 0; give a positive number of steps"),
        (["--buffer-rows", "0"], "--buffer-rows 0; it must be a whole number of at least 1"),
        (["--skip-first", "1000"], "--skip-first 1000 leaves no token of a --context 8 window"),
        (["--d-sae", "0"], "--d-sae 0; it must be a whole number of at least 1"),
    ],
)
def test_sae_train_settings_are_refused_before_the_model_loads(
    extra, message, tmp_path, checkpoint, corpus, capsys, monkeypatch
):
    out = tmp_path / "f1"
    with monkeypatch.context() as patch:
        patch.setattr(LOADER, "load", lambda *a, **k: pytest.fail("the model loaded before the check"))
        assert main(sae_train(checkpoint, corpus, out, *extra)) == 2
    one_line(capsys, message)
    assert not out.exists()  # nothing marked incomplete, nothing to block the retry
    assert main(sae_train(checkpoint, corpus, out)) == 0
    assert json.loads((out / "run.json").read_text())["complete"] is True


def test_a_run_that_failed_before_its_first_step_does_not_block_its_retry(
    tmp_path, checkpoint, corpus, capsys, monkeypatch
):
    train = importlib.import_module("interp.sae.training")

    def fails_at_start(*args, **kwargs):
        raise ValueError("stopped before the first step")

    out = tmp_path / "run"
    with monkeypatch.context() as patch:
        patch.setattr(train, "train", fails_at_start)
        assert main(sae_train(checkpoint, corpus, out, "--lr", "0.5")) == 2
    one_line(capsys, "stopped before the first step")
    assert json.loads((out / "run.json").read_text())["complete"] is False
    cached = sorted(p.name for p in (out / "activations").iterdir())
    assert main(sae_train(checkpoint, corpus, out, "--lr", "0.001")) == 0  # other training settings: fine
    assert sorted(p.name for p in (out / "activations").iterdir()) == cached  # the cache was reused
    assert json.loads((out / "run.json").read_text())["settings"]["lr"] == 0.001
    capsys.readouterr()
    assert main(sae_train(checkpoint, corpus, out, "--lr", "0.002")) == 2  # a trained run is protected
    one_line(capsys, "holds another run (lr was 0.001, now 0.002)")


# 2. Unreadable steering files and a closed pipe: one line, or quiet -------------------------------------------


def test_generate_with_a_junk_steering_file_is_one_line(tmp_path, checkpoint, capsys, no_loading):
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"this is not safetensors at all")
    assert main(["generate", str(checkpoint), "Hi", "--steer", str(junk)]) == 2
    one_line(capsys, f"{str(junk)!r} is not a steering vector file: it cannot be read as safetensors")
    garbage = tmp_path / "g.pt"
    garbage.write_bytes(b"\x80\x04garbage")
    assert main(["generate", str(checkpoint), "Hi", "--steer", str(garbage), "--layer", "0"]) == 2
    one_line(capsys, f"--steer {garbage}: not a tensor saved with torch.save")


def test_generate_into_a_closed_pipe_ends_quietly(checkpoint, capsys, monkeypatch):
    class ClosedPipe:
        """A reader that has gone (``| head`` after its bytes): every write fails as a closed pipe does."""

        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            raise BrokenPipeError(32, "Broken pipe")

        def fileno(self):
            raise OSError("no file descriptor")

    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    assert main(["generate", str(checkpoint), "the cat", "--max-new-tokens", "5"]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.slow  # a fresh interpreter importing torch
def test_generate_piped_into_head_prints_no_traceback(checkpoint):
    argv = [sys.executable, "-m", "interp", "generate", str(checkpoint), "the", "--max-new-tokens", "30"]
    head = subprocess.run(
        f"{subprocess.list2cmdline(argv)} | head -c 20",
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert len(head.stdout) == 20 and head.stderr == "", head.stderr


# 3. Damaged files are named ------------------------------------------------------------------------------------


def test_a_truncated_checkpoint_is_named_on_resume_before_the_model_loads(
    tmp_path, checkpoint, corpus, capsys, monkeypatch
):
    out = tmp_path / "run"
    assert main(sae_train(checkpoint, corpus, out, "--checkpoint-every", "1")) == 0
    capsys.readouterr()
    saved = out / "checkpoint" / "checkpoint.safetensors"
    saved.write_bytes(saved.read_bytes()[:100])
    record = json.loads((out / "run.json").read_text())
    (out / "run.json").write_text(json.dumps({**record, "complete": False}))  # as if interrupted
    with monkeypatch.context() as patch:
        patch.setattr(LOADER, "load", lambda *a, **k: pytest.fail("the model loaded before the check"))
        assert main(sae_train(checkpoint, corpus, out, "--checkpoint-every", "1")) == 2
    one_line(capsys, f"checkpoint {saved} cannot be read", "delete it to train again")
    saved.unlink()
    assert main(sae_train(checkpoint, corpus, out, "--checkpoint-every", "1")) == 0


def test_library_loaders_name_the_damaged_file(tmp_path):
    sae = sae_lib.SAE(sae_lib.SAEConfig(d_in=4, d_sae=8, architecture="topk", k=2, hook_name="hook_embed"))
    sae_lib.save(sae, tmp_path / "sae")
    cfg = tmp_path / "sae" / "cfg.json"
    cfg.write_text(cfg.read_text()[:20])
    with pytest.raises(sae_lib.SAEFormatError, match=f"{tmp_path / 'sae'}: a JSON file in it is not valid"):
        sae_lib.load(tmp_path / "sae")
    sae_lib.save(sae, tmp_path / "sae2")
    weights = tmp_path / "sae2" / "sae_weights.safetensors"
    weights.write_bytes(weights.read_bytes()[:50])
    with pytest.raises(sae_lib.SAEFormatError, match=f"{tmp_path / 'sae2'}: a file in it cannot be decoded"):
        sae_lib.load(tmp_path / "sae2")
    junk = tmp_path / "v.safetensors"
    junk.write_bytes(b"\x00" * 7)
    with pytest.raises(ValueError, match="v.safetensors' is not a steering vector file"):
        load_steering_vector(junk)
    circuit = tmp_path / "c.json"
    circuit.write_text('{"edges": [')
    with pytest.raises(ValueError, match="c.json is not a circuit file: it is not valid JSON"):
        Circuit.load(circuit)


# 4. Flags that did nothing are refused; NaN steering is refused ------------------------------------------------


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--scale", "2"], "--scale says how to steer; give the vector with --steer FILE"),
        (["--steer-positions", "new"], "--steer-positions says how to steer"),
        (["--top-p", "0.9"], "--top-p only applies when sampling: add --sample"),
    ],
)
def test_flags_that_would_do_nothing_are_refused(extra, message, checkpoint, capsys, no_loading):
    assert main(["generate", str(checkpoint), "Hi", *extra]) == 2
    assert "do_sample" not in one_line(capsys, message)


def test_nan_steering_is_refused_before_the_model_loads(tmp_path, checkpoint, capsys, monkeypatch):
    good = tmp_path / "v.pt"
    torch.save(torch.ones(16), good)
    nan = tmp_path / "nan.pt"
    torch.save(torch.full((16,), math.nan), nan)
    with monkeypatch.context() as patch:
        patch.setattr(LOADER, "load", lambda *a, **k: pytest.fail("the model loaded before the check"))
        assert (
            main(["generate", str(checkpoint), "Hi", "--steer", str(good), "--layer", "0", "--scale", "nan"])
            == 2
        )
        one_line(capsys, "steering scale nan is not a finite number")
        assert main(["generate", str(checkpoint), "Hi", "--steer", str(nan), "--layer", "0"]) == 2
        one_line(capsys, "the steering vector holds 16 NaN or infinite value(s) of 16")
    with pytest.raises(ValueError, match="not a finite number"):
        steer(torch.ones(3), math.inf)
    assert (
        main(
            [
                "generate",
                str(checkpoint),
                "the cat",
                "--steer",
                str(good),
                "--layer",
                "0",
                "--max-new-tokens",
                "2",
            ]
        )
        == 0
    )


def test_steering_positions_outside_the_prompt_are_refused(tiny):
    vector = torch.ones(tiny.cfg.d_model)
    hook = ("blocks.0.hook_resid_pre", steer(vector, 2.0, positions=[-1, 7]))
    with pytest.raises(
        ValueError, match="steering position 7 is outside the prompt: the shortest prompt has 3"
    ):
        tiny.generate("the cat sat", 2, fwd_hooks=[hook])
    inside = ("blocks.0.hook_resid_pre", steer(vector, 2.0, positions=[-1, 0]))
    assert tiny.generate("the cat sat", 2, fwd_hooks=[inside]).text[0] != ""


# 5. Messages in the user's own terms --------------------------------------------------------------------------


def test_messages_speak_of_what_the_user_wrote(tmp_path, capsys):
    assert main(["study", "circuits", "--pairs", "-3", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "argument --pairs: invalid value '-3': -3 is negative" in err and "_count" not in err
    with pytest.raises(ValueError, match="d_sae=0; it must be a whole number of at least 1"):
        sae_lib.train(torch.randn(64, 4), d_sae=0, k=4, progress=False)
    rows = torch.randn(64, 4)
    rows[5, 1] = math.nan
    with pytest.raises(ValueError, match="1 of the first 64 training rows hold NaN or infinite values"):
        sae_lib.train(rows, d_sae=8, k=2, progress=False, batch_size=32)


def test_steering_sweep_with_a_list_and_labels_outside_the_vocabulary(tiny):
    vec = steering_vector(tiny, ["the cat"], ["a dog"], "blocks.0.hook_resid_post")
    with pytest.raises(TypeError, match=r"vectors is a list; give a SteeringVector or a \{label"):
        steering_sweep(tiny, ["the cat"], [vec], [1.0], lambda logits, batch: logits[:, -1, 0])
    ids = torch.tensor([[3, 4, 5]])
    pairs = Pairs(
        clean=ids, corrupt=ids, labels={"answer": torch.tensor([10_000]), "foil": torch.tensor([3])}
    )
    logits = tiny(ids)
    with pytest.raises(
        ValueError, match="label 'answer' holds token id 10000, outside this model's vocabulary"
    ):
        logit_difference(logits, pairs)


@pytest.fixture(scope="module")
def tiny():
    from tests.store.models import tiny_model

    return tiny_model()


# 6. The manifest's wall time is the whole run's ----------------------------------------------------------------


def test_the_manifest_records_the_whole_run(tmp_path):
    import dataclasses

    from interp.registry import study_parser

    run = start(study_parser("demo", "A demonstration.", default_model=None), ["--out", str(tmp_path / "r")])
    earlier = dataclasses.replace(run, started=run.started - 161.0)  # the run began 161 s before its report
    report = earlier.report("Demo")
    report.add_text("done")
    earlier.finish(report)
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert 161.0 <= manifest["wall_time_s"] < 161.0 + 60


# 7. OLMo 2's norms under TransformerLens's names: the same hook points -----------------------------------------


def test_output_norms_answer_to_transformer_lens_names_as_the_same_points():
    model = HookedTransformer(
        TransformerConfig(n_layers=2, d_model=8, n_heads=2, d_vocab=10, n_ctx=6, norm_placement="output")
    )
    aliases = model.hook_aliases()
    for layer in range(2):
        for tl, own in (("ln1", "ln1_post"), ("ln2", "ln2_post")):
            for leaf in ("hook_scale", "hook_normalized"):
                alias, name = f"blocks.{layer}.{tl}.{leaf}", f"blocks.{layer}.{own}.{leaf}"
                assert aliases.canonical(alias) == name and model.resolve(alias) == [name]
                assert alias not in model.hook_names() and name in model.hook_names()
    ids = torch.tensor([[1, 2, 3]])
    _, everything = model.run_with_cache(ids)
    _, by_alias = model.run_with_cache(ids, names_filter=["blocks.1.ln2.hook_normalized"])
    assert list(by_alias.keys()) == [
        "blocks.1.ln2_post.hook_normalized"
    ]  # each point cached once, by its name
    torch.testing.assert_close(
        by_alias["blocks.1.ln2.hook_normalized"], everything["blocks.1.ln2_post.hook_normalized"]
    )
    fired = []
    zeroed = model.run_with_hooks(
        ids, fwd_hooks=[("blocks.1.ln2.hook_normalized", lambda x, hook: fired.append(hook.name) or x * 0)]
    )
    same = model.run_with_hooks(ids, fwd_hooks=[("blocks.1.ln2_post.hook_normalized", lambda x, hook: x * 0)])
    assert fired == ["blocks.1.ln2_post.hook_normalized"]  # the very point, once
    torch.testing.assert_close(zeroed, same)
    assert not torch.allclose(zeroed, model(ids))
    pre_norm = HookedTransformer(TransformerConfig(n_layers=1, d_model=8, n_heads=2, d_vocab=10, n_ctx=6))
    assert pre_norm.resolve("blocks.0.ln1.hook_scale") == [
        "blocks.0.ln1.hook_scale"
    ]  # its own norm, no alias
