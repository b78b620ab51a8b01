"""The guard in front of every request: the API key on data endpoints (the page stays public), the body limit."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import helpers
import pytest
from fastapi.testclient import TestClient

from hiera.serve import api, guard

KEY = helpers.API_KEY
SEARCH = helpers.BEE_SEARCH

DATA_PATHS = [SEARCH, "/health", "/methods", "/documents/chess", "/no-such-endpoint"]
PUBLIC = ["/", "/static/app.js", "/static/style.css", "/openapi.json", "/docs"]


@pytest.fixture(scope="module")
def keyed(collection_dir: Path) -> Iterator[TestClient]:
    app = api.create_app(collection_dir, warmup=False, api_key=KEY)
    with TestClient(app) as c:
        yield c


def test_every_data_endpoint_needs_the_key(keyed: TestClient) -> None:
    for path in DATA_PATHS:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"X-API-Key": "wrong"}, {"Authorization": "Bearer "},
                        {"Authorization": KEY}, {"X-API-Key": KEY[:-1]}):
            r = keyed.get(path, headers=headers)
            assert r.status_code == 401, (path, headers, r.status_code)
            assert "API key is required" in helpers.one_line_detail(r)
            assert r.headers["www-authenticate"].startswith("Bearer")
        for headers in ({"Authorization": f"Bearer {KEY}"}, {"authorization": f"bearer {KEY}"}, {"X-API-Key": KEY}):
            r = keyed.get(path, headers=headers)
            assert r.status_code == (404 if path == "/no-such-endpoint" else 200), (path, r.text)


def test_the_page_and_the_api_description_stay_public(keyed: TestClient) -> None:
    for path in PUBLIC:
        assert keyed.get(path).status_code == 200, path


def test_key_is_compared_in_constant_time(keyed: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = guard.hmac.compare_digest
    monkeypatch.setattr(guard.hmac, "compare_digest", lambda a, b: calls.append((a, b)) or real(a, b))
    assert keyed.get("/health", headers={"X-API-Key": "nope"}).status_code == 401
    assert calls == [(b"nope", KEY.encode())]


def test_key_from_the_environment(collection_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(guard.API_KEY_ENV, KEY)
    with TestClient(api.create_app(collection_dir, warmup=False)) as c:
        assert c.get("/health").status_code == 401
        assert c.get("/health", headers={"X-API-Key": KEY}).status_code == 200
    with TestClient(api.create_app(collection_dir, warmup=False, api_key="")) as c:  # explicitly none
        assert c.get("/health").status_code == 200


def test_request_body_limit(client_plain: TestClient) -> None:
    big = b"x" * (guard.MAX_BODY_BYTES + 1)
    r = client_plain.request("GET", SEARCH, content=big)
    assert r.status_code == 413 and f"the limit is {guard.MAX_BODY_BYTES}" in helpers.one_line_detail(r)

    def chunks() -> Iterator[bytes]:  # no Content-Length: read up to the limit, then refused
        for _ in range(20):
            yield b"y" * 8192

    r = client_plain.request("POST", "/search", content=chunks())
    assert r.status_code == 413, r.text
    assert client_plain.request("GET", SEARCH, content=b"small").status_code == 200
    r = client_plain.get(SEARCH, headers={"Content-Length": "nan"})
    assert r.status_code == 400
