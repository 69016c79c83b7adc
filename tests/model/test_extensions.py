"""The model's delegated methods reach the packages above it through the registry the package root fills."""

from __future__ import annotations

import doctest

import pytest

from interp.model import extensions


def test_the_registry_hands_out_the_implementing_functions():
    import interp.generation
    import interp.sae

    assert extensions.implementation("generate") is interp.generation.generate is interp.generate
    assert extensions.implementation("saes") is interp.sae.spliced


def test_an_unregistered_method_names_the_registered_ones():
    with pytest.raises(LookupError, match=r"model\.lens; registered: generate, saes, transcoders"):
        extensions.implementation("lens")


def test_docstring_example():
    result = doctest.testmod(extensions)
    assert result.attempted > 0 and result.failed == 0
