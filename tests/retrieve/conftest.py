"""Fixtures for the retriever tests: one opened collection for the session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from hiera.collection import Collection
from hiera.corpus.tree import Passage

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the shared `helpers` module
import helpers  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _hiera_cache(tmp_path_factory: pytest.TempPathFactory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HIERA_CACHE_DIR", str(helpers.session_cache_dir(tmp_path_factory)))
        yield


@pytest.fixture(scope="session")
def shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return helpers.shared_collection(tmp_path_factory)


@pytest.fixture(scope="session")
def col(shared_root: Path) -> Collection:
    """The shared collection, opened once (retrievers only read it)."""
    return Collection(shared_root)


@pytest.fixture(scope="session")
def store_passages(col: Collection) -> dict[str, Passage]:
    """Every stored passage by id, straight from the corpus store."""
    return {p.id: p for _, p in col.store.iter_passages()}
