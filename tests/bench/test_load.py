"""bench.load talks to loopback servers only."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_url_must_be_loopback() -> None:
    from bench.load import BAD, check_loopback

    for url in ("http://127.0.0.1:8000/", "http://localhost:1/", "http://[::1]:8000/"):
        check_loopback(url)
    for url in ("http://0.0.0.0:8000/", "http://example.org/", "http://10.0.0.1:80/"):
        with pytest.raises(SystemExit, match="loopback"):
            check_loopback(url)
    assert all(400 <= status < 500 for *_, status in BAD)
