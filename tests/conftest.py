"""Shared fixtures: where the read-only benchmark data lives."""

from __future__ import annotations

import os
from pathlib import Path

import helpers
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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``slow`` tests (real data at benchmark scale) run only with HIERA_SLOW=1 or ``-m slow``."""
    if os.environ.get("HIERA_SLOW") == "1" or "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow test: set HIERA_SLOW=1 (or make test-all) to run it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _hiera_cache(tmp_path_factory: pytest.TempPathFactory):
    """Keep every embedding-cache write of the test session in a temp dir, never in ~/.cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HIERA_CACHE_DIR", str(helpers.session_cache_dir(tmp_path_factory)))
        yield


@pytest.fixture(scope="session")
def shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The six-document collection built once per session: read it, never change it."""
    return helpers.shared_collection(tmp_path_factory)
