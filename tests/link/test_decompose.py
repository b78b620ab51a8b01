"""The decomposer registry: the names the method registry offers, each building its own class."""

from __future__ import annotations

import pytest

from hiera.errors import BadInputError
from hiera.link.decompose import DECOMPOSERS, get_decomposer
from hiera.link.endpoint import EndpointDecomposer
from hiera.link.nlp import SpacyModel
from hiera.link.rules import RulesDecomposer
from hiera.spec import LINK_DECOMPOSERS


def test_decomposer_names(nlp: SpacyModel) -> None:
    assert tuple(DECOMPOSERS) == LINK_DECOMPOSERS  # the registry's choices are the implemented ones
    # each name builds its own class from the same settings, the endpoint with its URL and timeout
    assert isinstance(get_decomposer("rules", nlp), RulesDecomposer)
    endpoint = get_decomposer("endpoint", nlp, url="http://127.0.0.1:9/v1", timeout=3.0)
    assert isinstance(endpoint, EndpointDecomposer) and endpoint.timeout == 3.0
    assert isinstance(endpoint.fallback, RulesDecomposer)  # a failing endpoint falls back to the rules
    assert get_decomposer("none", nlp).decompose("Who directed Jaws and produced Jurassic Park?").sub_questions == []
    with pytest.raises(BadInputError, match="unknown decomposer 'gpt'"):
        get_decomposer("gpt", nlp)
    with pytest.raises(BadInputError, match="needs decomposer_url"):
        get_decomposer("endpoint", nlp)
