"""Fixtures for the retriever tests: the shared collection's passages (``col`` is in tests/conftest.py)."""

from __future__ import annotations

import pytest

from hiera.collection import Collection
from hiera.corpus.tree import Passage


@pytest.fixture(scope="session")
def store_passages(col: Collection) -> dict[str, Passage]:
    """Every stored passage by id, straight from the corpus store."""
    return {p.id: p for _, p in col.store.iter_passages()}
