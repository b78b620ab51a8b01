"""Training fixtures: the shared collection's passage pool (``col`` is in tests/conftest.py)."""

from __future__ import annotations

import pytest

from hiera.collection import Collection
from hiera.train.pool import PassagePool


@pytest.fixture(scope="session")
def pool(col: Collection) -> PassagePool:
    return PassagePool.from_collection(col)
