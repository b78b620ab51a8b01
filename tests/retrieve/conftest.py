"""Fixtures for the retriever tests: one opened collection for the session."""

from __future__ import annotations

from pathlib import Path

import pytest

from hiera.builds import open_collection
from hiera.collection import Collection
from hiera.corpus.tree import Passage


@pytest.fixture(scope="session")
def col(shared_root: Path) -> Collection:
    """The shared collection, opened once (retrievers only read it)."""
    return open_collection(shared_root)


@pytest.fixture(scope="session")
def store_passages(col: Collection) -> dict[str, Passage]:
    """Every stored passage by id, straight from the corpus store."""
    return {p.id: p for _, p in col.store.iter_passages()}
