"""The family table of ``interp models`` covers every family the loader reads, and names its GGUF architecture."""

from __future__ import annotations

from interp.load.catalog import CATALOG, format_families
from interp.load.families import FAMILIES, GGUF_FAMILIES


def test_every_family_is_listed_once():
    listed = [t for info in CATALOG for t in info.model_types]
    assert sorted(listed) == sorted(FAMILIES)


def test_the_table_names_each_gguf_architecture_and_what_is_verified():
    text = format_families()
    for architecture in GGUF_FAMILIES:
        assert f"  {architecture}" in text or f", {architecture}" in text, architecture
    gemma3 = next(line for line in text.splitlines() if line.startswith("Gemma 3 "))
    assert "gemma3_text, gemma3" in gemma3 and "  gemma3  " in gemma3 and "ln1_post" in gemma3
    assert "  Phi-3: folder; GGUF written by llama.cpp's converter (longrope, SentencePiece)" in text


def test_interp_models_prints_both_tables(capsys):
    from interp.cli import main

    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "smollm2-135m" in out and "GPT-NeoX, Pythia" in out and "gptneox" in out
