"""A feature's one number: circuit-tracer's Cantor pairing, its inverse, and "3:17" parsed once."""

from __future__ import annotations

import doctest

import pytest
import torch

import interp.feature_id as feature_id_module
from interp.feature_id import FeatureId, feature_index


def test_doctests():
    result = doctest.testmod(feature_id_module)
    assert result.attempted > 0 and result.failed == 0


def test_the_index_numbers_the_diagonals_as_circuit_tracer_does_and_inverts():
    """Counted naively: walk the diagonals layer + feature = 0, 1, 2, ..., feature ascending on each."""
    naive, number = {}, 0
    for total in range(60):
        for feature in range(total + 1):
            naive[(total - feature, feature)] = number
            number += 1
    for (layer, feature), expected in naive.items():
        fid = FeatureId(layer, feature)
        assert fid.index == expected
        assert FeatureId.from_index(expected) == fid
    assert FeatureId(3, 17).index == 227  # a graph node of circuit-tracer's with layer 3, feature 17


def test_a_tensor_of_features_is_numbered_elementwise_as_one_is():
    features = torch.tensor([0, 1, 7, 1000, 65535])
    assert feature_index(5, features).tolist() == [FeatureId(5, int(f)).index for f in features]


def test_text_is_parsed_once_and_refused_in_one_line_that_names_the_flag():
    assert FeatureId.parse(" 3 : 17 ") == FeatureId(3, 17)
    assert FeatureId.parse_list("3:17, 5:2,") == [FeatureId(3, 17), FeatureId(5, 2)]
    with pytest.raises(ValueError, match=r"^feature '3-17' is not LAYER:FEATURE; write it as 3:17$"):
        FeatureId.parse("3-17")
    with pytest.raises(ValueError, match=r"^--features '5' is not LAYER:FEATURE; write it as 3:17$"):
        FeatureId.parse_list("3:1,5", "--features")
    with pytest.raises(ValueError, match=r"^--features ' , ' names no feature; give LAYER:FEATURE pairs"):
        FeatureId.parse_list(" , ")
    with pytest.raises(ValueError, match="featureIndex -1 is negative"):
        FeatureId.from_index(-1)
    with pytest.raises(ValueError, match="whole numbers from 0"):
        FeatureId(-1, 3)
