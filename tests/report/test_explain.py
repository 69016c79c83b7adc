"""The explainer's data: token and head choice, values that match the model, bounded size, the command.

Tiny random models with a word-level tokenizer stand in for real ones, so these run without model packages;
:func:`tiny_model` is shared with the browser and view tests.
"""

from __future__ import annotations

import errno
import importlib
import json
import re
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer as Backend
from tokenizers import models, pre_tokenizers

from interp import HookedTransformer, TransformerConfig
from interp.cli import main as cli_main
from interp.report import attention_view
from interp.report.explain import SPARSE_BUDGET, TOP_K, choose_head, choose_token, explain_data
from interp.tokens import Tokenizer

SEED_TEXT = "The animal didn't cross the street because it was too tired"


def tiny_model(text: str = SEED_TEXT, *, n_ctx: int = 64, **cfg_changes) -> HookedTransformer:
    """A seeded random transformer whose word-level vocabulary holds every whitespace-separated word of
    ``text`` as one token (markup included), with that tokenizer attached."""
    words = sorted(set(text.split()))
    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(words)}}
    backend = Backend(models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    settings = dict(n_layers=2, d_model=32, n_heads=4, n_kv_heads=2, d_vocab=len(vocab), n_ctx=n_ctx)
    settings.update(positional="rotary", seed=0, name="tiny test model")
    settings.update(cfg_changes)
    model = HookedTransformer(TransformerConfig(**settings)).eval()
    model.tokenizer = Tokenizer(backend, n_ctx=n_ctx, name="tiny words")
    return model


def embedded_data(page: str) -> dict:
    """The JSON a page embeds, parsed."""
    match = re.search(r'<script type="application/json" id="explain-data">(.*?)</script>', page, re.S)
    assert match is not None
    return json.loads(match.group(1))


def test_choose_token_matches_stripped_text_ignoring_case():
    tokens = ["The", " animal", " It", " it", "."]
    assert choose_token(tokens, "it") == 2
    assert choose_token(tokens, " IT ") == 2
    assert choose_token(tokens, None) == 4
    assert choose_token(tokens, "-2") == 3
    with pytest.raises(ValueError, match=r"no token of the text is 'dog'.*0:'The', 1:' animal'"):
        choose_token(tokens, "dog")


def test_choose_head_skips_first_and_self_and_respects_fixed_choices():
    rows = torch.zeros(2, 3, 4)  # [layer, head, key]
    rows[0, 0, 0] = 0.9  # the first token: never counts
    rows[1, 2, 3] = 0.8  # the query itself: never counts
    rows[1, 1, 2] = 0.3
    rows[0, 2, 1] = 0.2
    assert choose_head(rows, 3) == (1, 1)
    assert choose_head(rows, 3, layer=0) == (0, 2)
    assert choose_head(rows, 3, head=2) == (0, 2)
    assert choose_head(rows, 3, layer=-1, head=0) == (1, 0)
    with pytest.raises(ValueError, match=r"--layer 5 is out of range; this model has layers 0..1"):
        choose_head(rows, 3, layer=5)


def test_data_match_the_model():
    model = tiny_model()
    data = explain_data(model, SEED_TEXT, token="it")
    tokens = model.to_tokens(SEED_TEXT)
    _, cache = model.run_with_cache(tokens.ids, tokens.mask)
    query, (layer, head) = 7, (data["layer"], data["head"])
    assert data["query"] == query and data["tokens"][query] == "it"
    pattern = cache["pattern", layer][0]  # [head, query, key]
    torch.testing.assert_close(data["row"][layer, head], pattern[head, query])
    assert data["pattern"]["dense"] and data["pattern"]["values"][layer].shape == pattern.shape
    # the default head sends the most weight from "it" to a token other than the first and itself
    rows = torch.stack([cache["pattern", i][0, :, query] for i in range(2)])
    rows[..., [0, query]] = -1
    assert rows[layer, head].max() == rows.max()
    # q . k / sqrt(d_head), from the embedded vectors, is the model's score
    q, k, v = data["q"][layer][head], data["k"][layer][head // 2], data["v"][layer][head // 2]
    torch.testing.assert_close(k[: query + 1] @ q / 8**0.5, data["scores"][layer][head, : query + 1])
    assert torch.isinf(data["scores"][layer][head, query + 1 :]).all()  # later keys are masked
    z = data["row"][layer, head] @ v  # the values mixed by the weights
    torch.testing.assert_close(z, data["z"][layer][head])
    # the per-source parts of the write add up to the head's result
    result = cache["result", layer][0, query, head]
    torch.testing.assert_close(data["head_norm"][layer][head], result.norm())
    assert data["src_norm"][layer][head].sum() >= result.norm() - 1e-6
    logits = model(tokens.ids)[0, query]
    assert data["lens"][-1]["tokens"][0] == model.tokenizer.to_str_tokens([int(logits.argmax())])[0]
    torch.testing.assert_close(data["lens"][-1]["probs"][0], logits.softmax(-1).max())


def sink_model() -> HookedTransformer:
    """The tiny model with attention sinks (as GPT-OSS has), each head's sink logit set apart from zero."""
    model = tiny_model(attn_sinks=True)
    with torch.no_grad():
        for block in model.blocks:
            block.attn.sinks.copy_(torch.linspace(0.5, 2.0, model.cfg.n_heads))
    return model


def test_a_sink_joins_the_softmax_of_the_scores_the_page_holds():
    model = sink_model()
    data = explain_data(model, SEED_TEXT, token="it")
    assert data["sinks"].tolist() == [torch.linspace(0.5, 2.0, 4).tolist()] * 2
    query = data["query"]
    for layer in range(2):
        for head in range(4):
            scores = data["scores"][layer][head, : query + 1]
            with_sink = torch.cat([scores, data["sinks"][layer, head].view(1)]).softmax(0)
            torch.testing.assert_close(with_sink[:-1], data["row"][layer, head, : query + 1])
            assert float(data["row"][layer, head].sum()) == pytest.approx(1 - float(with_sink[-1]), abs=1e-6)
            assert float(with_sink[-1]) > 0.05  # the sink takes a share a reader must see
    assert explain_data(tiny_model(), SEED_TEXT, token="it")["sinks"] is None


def test_pattern_is_bounded_for_long_inputs():
    words = [f"w{i}" for i in range(40)]
    text = " ".join(words[(7 * i) % 40] for i in range(512))
    model = tiny_model(text, n_ctx=512, positional="learned", n_kv_heads=None)
    view = attention_view(model, text)
    size = len(view.html.encode("utf-8"))
    assert size < 10 * 2**20, f"{size / 2**20:.2f} MiB"
    data = embedded_data(view.html)
    assert data["query"] == 511 and len(data["tokens"]) == 512
    assert data["pattern"]["dense"] is False and data["pattern"]["k"] == TOP_K <= SPARSE_BUDGET
    assert len(data["pattern"]["keys"][0][0][100]) == TOP_K
    assert len(data["row"][0][0]) == 512  # the followed token keeps its full rows
    assert all(len(pos) <= 2 * 8 + 1 for layer in data["kv_pos"] for pos in layer)
    assert data["position"]["kind"] == "learned" and len(data["position"]["norm"]) == 512


def test_page_is_deterministic():
    first = attention_view(tiny_model(), SEED_TEXT, token="it").html
    second = attention_view(tiny_model(), SEED_TEXT, token="it").html
    assert first.encode("utf-8") == second.encode("utf-8")


def test_command_writes_the_page_and_reports_bad_tokens(tmp_path, monkeypatch, capsys):
    loader = importlib.import_module("interp.load")  # the package; ``interp.load`` is also the function
    monkeypatch.setattr(loader, "load", lambda name, **kwargs: tiny_model())
    out = tmp_path / "pages" / "explain.html"
    code = cli_main(["explain", SEED_TEXT, "--token", "it", "--layer", "1", "--head", "3", "--out", str(out)])
    assert code == 0
    data = embedded_data(out.read_text(encoding="utf-8"))
    assert (data["query"], data["layer"], data["head"]) == (7, 1, 3)
    assert "wrote" in capsys.readouterr().err
    assert cli_main(["explain", SEED_TEXT, "--token", "dog", "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "no token of the text is 'dog'" in err and "7:'it'" in err
    assert cli_main(["explain", SEED_TEXT, "--head", "9", "--out", str(out), "--quiet"]) == 2
    assert "--head 9 is out of range" in capsys.readouterr().err


def test_explain_data_refuses_a_layer_or_head_out_of_range_before_the_forward(monkeypatch):
    model = tiny_model()

    def no_forward(*args, **kwargs):
        raise AssertionError("the model ran before the bad layer or head was refused")

    monkeypatch.setattr(model, "run_with_cache", no_forward)
    with pytest.raises(ValueError, match=r"^--layer 2 is out of range; this model has layers 0..1$"):
        explain_data(model, SEED_TEXT, layer=2)
    with pytest.raises(ValueError, match=r"^--head -5 is out of range; this model has heads 0..3$"):
        explain_data(model, SEED_TEXT, head=-5)


def test_a_page_cut_short_while_written_leaves_the_earlier_page_whole(tmp_path, monkeypatch):
    out = tmp_path / "view.html"
    view = attention_view(tiny_model(), SEED_TEXT, token="it")
    view.save(out)
    write_text = Path.write_text

    def disk_fills(path, text, *args, **kwargs):
        write_text(path, text[: len(text) // 2], *args, **kwargs)
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(Path, "write_text", disk_fills)
    with pytest.raises(OSError, match="No space left on device"):
        view.save(out)
    assert out.read_text(encoding="utf-8") == view.html
    assert sorted(p.name for p in tmp_path.iterdir()) == ["view.html"]
