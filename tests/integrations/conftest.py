"""The shared six-document collection, served over HTTP once per session, and an untrained reader for answer tools."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import helpers
import pytest


@pytest.fixture(scope="session")
def server_url(shared_root: Path) -> Iterator[str]:
    """``hiera serve`` of the shared collection on a free loopback port (its URL, without the trailing slash)."""
    from hiera.serve import create_app

    with helpers.running_server(create_app(shared_root, warmup=False, api_key="")) as url:
        yield url.rstrip("/")


@pytest.fixture(scope="session")
def untrained_reader(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A reader directory with MiniLM's encoder and fresh (untrained) heads: the real loading and decoding code."""
    from transformers import AutoTokenizer

    from hiera.encode import resolve_model_path
    from hiera.models import quiet_transformers
    from hiera.read.model import new_reader_model, save_reader

    base = resolve_model_path("all-MiniLM-L6-v2")
    out = tmp_path_factory.mktemp("reader") / "rd"
    with quiet_transformers():
        save_reader(new_reader_model(base), AutoTokenizer.from_pretrained(str(base)), out,
                    {"max_length": 128, "stride": 32})
    return out
