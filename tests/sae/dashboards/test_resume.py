"""A run that stops continues from its checkpoint and ends with the files an uninterrupted run writes; an
activation store gives the dashboards the corpus gives; memory does not grow with the tokens read."""

from __future__ import annotations

import dataclasses
import json
import signal

import pytest
import torch

from interp.sae.dashboards import Data, Settings, collect, write_dashboards
from interp.sae.dashboards.folder import STATE
from interp.sae.dashboards.sources import special_first
from interp.store import cache_activations
from tests.circuits.transcoders import tiny_transcoders
from tests.sae.dashboards import helpers

SETTINGS = Settings(top=4, quantiles=3, per_quantile=2, sample=10, before=3, after=2)


@pytest.fixture(scope="module")
def model():
    return helpers.model()


@pytest.fixture(scope="module")
def tc(model):
    return helpers.dictionary("skip", model)


@pytest.fixture(scope="module")
def store(model, tc, tmp_path_factory):
    """25 items cached in shards of 7 rows, so items are split between shards."""
    texts = helpers.texts(25)
    batches = [special_first(model.tokenizer, texts[i : i + 5]) for i in range(0, len(texts), 5)]
    hooks = [tc.input_hook(layer) for layer in tc.layers]
    folder = tmp_path_factory.mktemp("store") / "store"
    return texts, cache_activations(model, batches, hooks, folder, shard_rows=7, progress=False)


def _files(root):
    return {p.name: p.read_bytes() for p in sorted(root.iterdir()) if p.name != "run.json"}


def _write(model, tc, out, settings=SETTINGS, **kwargs):
    return write_dashboards(
        model, tc, out, Data(texts=helpers.texts(), batch_size=5), scan="tc", settings=settings, **kwargs
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


@pytest.mark.parametrize("kind", ["clt", "sae"])
def test_every_kind_of_dictionary_continues_to_the_same_files(model, kind, tmp_path):
    """A cross-layer transcoder and an SAE (read as an SAESet) stop and continue as the transcoder set does."""
    module = helpers.dictionary(kind, model)
    _write(model, module, tmp_path / "whole")
    whole = _files(tmp_path / "whole" / "features" / "tc")

    def fail(batch):
        if batch.progress["batch"] == 5:
            raise RuntimeError("stopped")

    with pytest.raises(RuntimeError, match="stopped"):
        _write(model, module, tmp_path / "cut", checkpoint_seconds=0.0, after_batch=fail)
    assert _write(model, module, tmp_path / "cut").state == "resume"
    assert _files(tmp_path / "cut" / "features" / "tc") == whole


def test_a_store_run_that_fails_continues_to_the_same_files(model, tc, store, tmp_path):
    """Through a store whose items span shards: the rerun starts at the row after the last whole item saved."""
    _, folder = store

    def run(out, **kwargs):
        return write_dashboards(model, tc, out, Data(store=folder), scan="tc", settings=SETTINGS, **kwargs)

    run(tmp_path / "whole")
    whole = _files(tmp_path / "whole" / "features" / "tc")
    rows = []

    def fail(batch):
        rows.append(batch.progress["row"])
        if len(rows) == 4:
            raise RuntimeError("stopped")

    with pytest.raises(RuntimeError, match="stopped"):
        run(tmp_path / "cut", checkpoint_seconds=0.0, after_batch=fail)
    again = []
    assert run(tmp_path / "cut", after_batch=lambda b: again.append(b.progress["row"])).state == "resume"
    assert again[0] > rows[-1]  # the rows saved were not read again
    assert _files(tmp_path / "cut" / "features" / "tc") == whole


def test_another_dictionary_or_a_store_of_another_model_is_refused(model, tc, store, tmp_path):
    _write(model, tc, tmp_path)
    root = tmp_path / "features" / "tc"
    before = _files(root)
    other = tiny_transcoders(model.cfg, d_transcoder=16, kind="skip", seed=8)  # another one of the same shape
    with pytest.raises(
        ValueError,
        match=r"holds another run's dashboards \(dictionary\.fingerprint was '[0-9a-f]{12}…', now '[0-9a-f]{12}…'\); "
        "pass another --scan or --out",
    ):
        _write(model, other, tmp_path)
    assert _files(root) == before
    import interp

    changed = interp.load(str(helpers.LLAMA))
    with torch.no_grad():
        changed.blocks[0].attn.W_Q.add_(0.01)
    with pytest.raises(ValueError, match="was written by model .*not by the model given"):
        write_dashboards(changed, tc, tmp_path / "other", Data(store=store[1]), scan="tc", settings=SETTINGS)
    assert not (tmp_path / "other").exists()


def test_another_run_is_refused_and_nothing_is_lost(model, tc, tmp_path):
    _write(model, tc, tmp_path)
    root = tmp_path / "features" / "tc"
    before = _files(root)
    with pytest.raises(
        ValueError,
        match=r"holds another run's dashboards \(settings\.top was 4, now 2\); pass another --scan",
    ):
        _write(model, tc, tmp_path, settings=dataclasses.replace(SETTINGS, top=2))
    assert _files(root) == before


def test_a_store_gives_the_dashboards_of_the_corpus(model, tc, store):
    """Shards of 7 rows split items between shards: an example's window is still whole."""
    texts, folder = store
    from_store = [
        r.to_dict()
        for r in collect(model, tc, Data(store=folder, skip_first=1), settings=SETTINGS).records(model)
    ]
    from_text = [
        r.to_dict()
        for r in collect(model, tc, Data(texts=texts, batch_size=5), settings=SETTINGS).records(model)
    ]
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
    small = collect(model, tc, Data(texts=texts, max_tokens=100), settings=SETTINGS)
    large = collect(model, tc, texts, settings=SETTINGS)
    lengths = [len(special_first(model.tokenizer, [t])[0][0]) for t in texts]
    assert large.collector.n_tokens == sum(lengths) - len(
        texts
    )  # every token after each item's special token
    started = next(i for i in range(len(lengths)) if sum(lengths[: i + 1]) >= 100) + 1
    assert small.collector.n_tokens == 100 - started  # the first 100 tokens, less the items' special tokens

    def size(c):
        return sum(t.numel() * t.element_size() for t in c.collector.state().values())

    assert size(small) == size(large)
