"""A run that stops continues from its checkpoint and ends with the files an uninterrupted run writes; an
activation store gives the dashboards the corpus gives; memory does not grow with the tokens read."""

from __future__ import annotations

import json
import signal

import pytest
import torch

from interp.sae.dashboards import Settings, collect, write_dashboards
from interp.sae.dashboards.folder import STATE
from interp.sae.dashboards.sources import special_first
from interp.store import cache_activations
from tests.sae.dashboards import helpers

SETTINGS = Settings(top=4, quantiles=3, per_quantile=2, sample=10, before=3, after=2)


@pytest.fixture(scope="module")
def model():
    return helpers.model()


@pytest.fixture(scope="module")
def tc(model):
    return helpers.dictionary("skip", model)


def _files(root):
    return {p.name: p.read_bytes() for p in sorted(root.iterdir()) if p.name != "run.json"}


def _write(model, tc, out, **kwargs):
    return write_dashboards(
        model, tc, out, data=helpers.texts(), scan="tc", settings=SETTINGS, batch_size=5, **kwargs
    )


@pytest.fixture(scope="module")
def uninterrupted(model, tc, tmp_path_factory):
    out = tmp_path_factory.mktemp("whole")
    assert _write(model, tc, out).state == "new"
    return _files(out / "features" / "tc")


def test_a_run_that_fails_continues_to_the_same_files(model, tc, tmp_path, uninterrupted):
    seen = []

    def fail(batch):
        seen.append(batch.progress["batch"])
        if len(seen) == 3:
            raise RuntimeError("the machine went away")

    with pytest.raises(RuntimeError, match="went away"):
        _write(model, tc, tmp_path, checkpoint_seconds=0.0, after_batch=fail)
    root = tmp_path / "features" / "tc"
    assert (root / STATE).is_file() and not (root / "index.json").exists()
    again = []
    done = _write(model, tc, tmp_path, after_batch=lambda b: again.append(b.progress["batch"]))
    assert done.state == "resume" and again[0] == 4  # batches 1-3 were not read again
    assert _files(root) == uninterrupted
    assert _write(model, tc, tmp_path).state == "complete"


def test_ctrl_c_saves_the_batch_under_way_and_the_rerun_finishes(model, tc, tmp_path, uninterrupted):
    def interrupt(batch):
        if batch.progress["batch"] == 2:
            signal.raise_signal(signal.SIGINT)  # held until this batch's work is folded in

    with pytest.raises(KeyboardInterrupt):
        _write(model, tc, tmp_path, after_batch=interrupt)
    root = tmp_path / "features" / "tc"
    from safetensors import safe_open

    with safe_open(str(root / STATE), "pt") as f:
        saved = json.loads(f.metadata()["extra"])["progress"]
    assert saved["batch"] == 3  # the batch during which Ctrl-C arrived was finished and saved
    assert _write(model, tc, tmp_path).state == "resume"
    assert _files(root) == uninterrupted


def test_another_run_is_refused_and_nothing_is_lost(model, tc, tmp_path):
    _write(model, tc, tmp_path)
    root = tmp_path / "features" / "tc"
    before = _files(root)
    with pytest.raises(ValueError, match="holds dashboards of another run .*settings.*pass another --scan"):
        write_dashboards(model, tc, tmp_path, data=helpers.texts(), scan="tc", settings=Settings(top=2))
    assert _files(root) == before


def test_a_store_gives_the_dashboards_of_the_corpus(model, tc, tmp_path):
    """Shards of 7 rows split items between shards: an example's window is still whole."""
    texts = helpers.texts(25)
    batches = [special_first(model.tokenizer, texts[i : i + 5]) for i in range(0, len(texts), 5)]
    hooks = [tc.input_hook(layer) for layer in tc.layers]
    store = cache_activations(model, batches, hooks, tmp_path / "store", shard_rows=7, progress=False)
    from_store = collect(model, tc, store=store, settings=SETTINGS, skip_first=1).records(model)
    from_text = collect(model, tc, data=texts, settings=SETTINGS, batch_size=5).records(model)
    for a, b in zip(from_store, from_text, strict=True):
        assert (a["layer"], a["feature"], a["n_active"], a["n_tokens"]) == (
            b["layer"],
            b["feature"],
            b["n_active"],
            b["n_tokens"],
        )
        assert a["histogram"] == b["histogram"] and a["top_logits"] == b["top_logits"]
        torch.testing.assert_close(a["act_max"], b["act_max"], rtol=1e-5, atol=2e-5)
        for ga, gb in zip(a["examples_quantiles"], b["examples_quantiles"], strict=True):
            assert [e["tokens"] for e in ga["examples"]] == [e["tokens"] for e in gb["examples"]]
            assert [(e["item"], e["position"]) for e in ga["examples"]] == [
                (e["item"], e["position"]) for e in gb["examples"]
            ]


def test_tokens_cut_the_data_and_memory_does_not_grow_with_them(model, tc):
    texts = helpers.texts(60)
    small = collect(model, tc, data=texts, settings=SETTINGS, max_tokens=100)
    large = collect(model, tc, data=texts, settings=SETTINGS)
    lengths = [len(special_first(model.tokenizer, [t])[0][0]) for t in texts]
    assert large.collector.n_tokens == sum(lengths) - len(
        texts
    )  # every token after each item's special token
    started = next(i for i in range(len(lengths)) if sum(lengths[: i + 1]) >= 100) + 1
    assert small.collector.n_tokens == 100 - started  # the first 100 tokens, less the items' special tokens

    def size(c):
        return sum(t.numel() * t.element_size() for t in c.collector.state().values())

    assert size(small) == size(large)
