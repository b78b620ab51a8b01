"""The served app over the page's collection (``collection_dir``, tests/conftest.py), one per session.

Loading the app's models takes a few seconds, so every test reuses one app.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient


@pytest.fixture(scope="session")
def app(collection_dir: Path) -> FastAPI:
    """One app (models loaded once); each TestClient or server runs its lifespan."""
    from hiera.serve import create_app

    return create_app(collection_dir, warmup=True)


@pytest.fixture(scope="session")
def client_plain(collection_dir: Path) -> Iterator[TestClient]:
    """An app with no key and tight limits (a 0.5 s deadline per search, 2 waiting at most)."""
    from hiera.serve import api

    app = api.create_app(collection_dir, warmup=False, search_timeout=0.5, max_pending=2)
    with TestClient(app) as c:
        yield c
