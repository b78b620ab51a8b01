"""Fixtures for the index tests: the session's shared built collection."""

from __future__ import annotations

from pathlib import Path

import helpers
import pytest


@pytest.fixture
def col_copy(shared_root: Path, tmp_path: Path) -> Path:
    """A private copy of the shared collection that a test may change."""
    return helpers.copy_collection(shared_root, tmp_path / "col")
