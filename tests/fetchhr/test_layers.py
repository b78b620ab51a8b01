"""Parsing the layers FetchHR searches and the budget each one fetches."""

from __future__ import annotations

import pytest

from hiera.errors import BadInputError
from hiera.fetchhr.layers import parse_k_per_layer, parse_layers


def test_parsers_directly() -> None:
    assert parse_layers("1-3,6", range(1, 7)) == [1, 2, 3, 6]
    assert parse_layers(None, [2, 4]) == [2, 4]
    assert parse_k_per_layer(None, 6, 20) == [3, 3, 3, 3, 4, 4]
    assert parse_k_per_layer("5", 3, 99) == [5, 5, 5]
    assert parse_k_per_layer(None, 6, 60, 0.67) == [4, 4, 4, 4, 4, 40]
    assert parse_k_per_layer(None, 6, 60, 1.0) == [0, 0, 0, 0, 0, 60]
    assert parse_k_per_layer("1,2,3", 3, 60, 0.67) == [1, 2, 3]  # explicit budgets win
    assert parse_k_per_layer(None, 1, 7, 0.67) == [7]
    with pytest.raises(BadInputError, match="runs backwards"):
        parse_layers("5-2", range(1, 7))
