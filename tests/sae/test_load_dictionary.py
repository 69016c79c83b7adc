"""``formats.load_dictionary``: every kind told from its files, read as the kind's own reader reads it, mapped onto
a model and checked against it; ``save_dictionary`` writes each kind so that it reads back the same."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hooks.names import UnknownHookError
from interp.sae import CrossLayerTranscoder, SAESet, TranscoderSet, load, load_transcoders, save
from interp.sae.formats import SAEFormatError, holds_transcoders, load_dictionary, save_dictionary
from tests.sae.models import random_sae, tiny_model
from tests.sae.transcoder.factories import random_clt, random_set

GOLDEN = Path(__file__).resolve().parent / "golden"


def _same_weights(a, b) -> None:
    left, right = dict(a.named_parameters()), dict(b.named_parameters())
    assert sorted(left) == sorted(right)
    for name in left:
        assert torch.equal(left[name], right[name]), name


def test_an_sae_folder_reads_as_a_set_of_one_the_sae_reader_s_sae(tmp_path):
    sae = random_sae("blocks.1.hook_resid_post")
    save(sae, tmp_path / "sae")
    assert not holds_transcoders(tmp_path / "sae")
    dictionary = load_dictionary(tmp_path / "sae", model=tiny_model())
    assert isinstance(dictionary, SAESet) and dictionary.layers == [1]
    _same_weights(dictionary.sae(1), load(tmp_path / "sae"))
    _same_weights(dictionary.sae(1), sae)
    half = load_dictionary(tmp_path / "sae", dtype=torch.float64, hook_name="blocks.0.hook_resid_post")
    assert half.sae(0).dtype == torch.float64 and half.input_hook(0) == "blocks.0.hook_resid_post"


@pytest.mark.parametrize(
    ("name", "sites"),
    [
        ("circuit_tracer_relu_skip", ("mlp.hook_in", "mlp.hook_out")),
        ("circuit_tracer_clt_jumprelu", ("hook_resid_mid", "hook_mlp_out")),
    ],
)
def test_a_transcoder_folder_reads_as_load_transcoders_reads_it(name, sites):
    folder = GOLDEN / name
    assert holds_transcoders(folder)
    got, want = load_dictionary(folder, lazy=False), load_transcoders(folder, lazy=False)
    assert type(got) is type(want) and (got.input_site, got.output_site) == sites
    _same_weights(got, want)


def test_with_a_model_hooks_are_mapped_and_the_fit_checked_before_returning(tmp_path):
    model = tiny_model()
    save_dictionary(random_set(), tmp_path / "set")
    tc = load_dictionary(tmp_path / "set", model=model)
    assert tc.input_hook(1) == "blocks.1.ln2.hook_normalized" and tc.output_hook(1) == "blocks.1.hook_mlp_out"
    save_dictionary(random_set(d_model=8), tmp_path / "narrow")
    with pytest.raises(
        ValueError, match="d_in=8 at 'blocks.0.ln2.hook_normalized', but that hook .* width 16"
    ):
        load_dictionary(tmp_path / "narrow", model=model)
    save(random_sae("blocks.1.hook_resid_psot"), tmp_path / "typo")
    with pytest.raises(UnknownHookError, match="did you mean 'blocks.1.hook_resid_post'"):
        load_dictionary(tmp_path / "typo", model=model)


def test_save_dictionary_writes_each_kind_so_it_reads_back_the_same(tmp_path):
    sae = random_sae("blocks.0.hook_resid_post")
    for made in (sae, SAESet(sae), random_set(skip=True), random_clt(activation="jumprelu")):
        folder = save_dictionary(made, tmp_path / type(made).__name__)
        again = load_dictionary(folder, lazy=False) if holds_transcoders(folder) else load_dictionary(folder)
        if isinstance(again, SAESet):
            _same_weights(again.sae(0), sae)
        else:
            assert isinstance(again, (TranscoderSet, CrossLayerTranscoder))
            _same_weights(again, made)
    with pytest.raises(ValueError, match="an SAESet of 2 SAEs .* is several folders"):
        save_dictionary(SAESet([sae, random_sae("blocks.1.hook_resid_post")]), tmp_path / "two")


def test_nothing_there_and_unknown_files_are_refused_by_name(tmp_path):
    with pytest.raises(
        FileNotFoundError, match="missing does not exist; give an SAE folder or file, or a transcoder"
    ):
        load_dictionary(tmp_path / "missing")
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "notes.txt").write_text("x")
    with pytest.raises(SAEFormatError, match="not an SAE folder of a known format .*notes.txt"):
        load_dictionary(tmp_path / "odd")
