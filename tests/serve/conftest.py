"""The served app over the page's collection (``collection_dir``, tests/conftest.py), shared by the API and browser tests.

Loading the app's models takes a few seconds, so every test reuses one app.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi import FastAPI


@pytest.fixture(scope="session")
def app(collection_dir: Path) -> FastAPI:
    """One app (models loaded once); each TestClient or server runs its lifespan."""
    from hiera.serve import create_app

    return create_app(collection_dir, warmup=True)
