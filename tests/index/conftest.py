"""Fixtures for the index tests: the session's shared built collection."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the shared `helpers` module
import helpers  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _hiera_cache(tmp_path_factory: pytest.TempPathFactory):
    """Keep every embedding cache write of these tests in a session temp dir."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HIERA_CACHE_DIR", str(helpers.session_cache_dir(tmp_path_factory)))
        yield


@pytest.fixture(scope="session")
def shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The six-document collection built once per session: read it, never change it."""
    return helpers.shared_collection(tmp_path_factory)


@pytest.fixture
def col_copy(shared_root: Path, tmp_path: Path) -> Path:
    """A private copy of the shared collection that a test may change."""
    return helpers.copy_collection(shared_root, tmp_path / "col")
