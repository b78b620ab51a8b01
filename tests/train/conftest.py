"""Training fixtures: the shared six-document collection, its pool, and questions on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from hiera.builds import open_collection
from hiera.collection import Collection
from hiera.train.pool import PassagePool


@pytest.fixture(scope="session")
def col(shared_root: Path) -> Collection:
    return open_collection(shared_root)


@pytest.fixture(scope="session")
def pool(col: Collection) -> PassagePool:
    return PassagePool.from_collection(col)
