"""Shared fixtures: where the read-only benchmark data lives."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """``$HIERA_DATA_DIR``, default ``<repo>/../shared/data``; skips the test when absent.

    The data is never copied into the repository, so a checkout without it
    must still pass its tests.
    """
    path = Path(os.environ.get("HIERA_DATA_DIR", REPO.parent / "shared" / "data")).resolve()
    if not path.is_dir():
        pytest.skip(f"benchmark data not found at {path} (set HIERA_DATA_DIR)")
    return path
