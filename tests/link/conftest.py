"""The spaCy model and the rules decomposer, loaded once for the linking tests."""

from __future__ import annotations

import pytest

from hiera.link.nlp import SpacyModel
from hiera.link.rules import RulesDecomposer


@pytest.fixture(scope="session")
def nlp() -> SpacyModel:
    return SpacyModel()


@pytest.fixture(scope="session")
def rules(nlp: SpacyModel) -> RulesDecomposer:
    return RulesDecomposer(nlp)
