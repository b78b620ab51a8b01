"""The server behind a service: API key, CORS, body and time limits, exposure warning, graceful shutdown."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from hiera.cli.serve import exposure_warning, is_loopback
from hiera.retrieve.bm25 import Bm25Retriever
from hiera.serve import api, guard

KEY = "s3cret-key-0123456789"
SEARCH = "/search?q=worker+bees&retriever=bm25&k=3"
DATA_PATHS = [SEARCH, "/health", "/methods", "/documents/chess", "/no-such-endpoint"]
PUBLIC = ["/", "/static/app.js", "/static/style.css", "/openapi.json", "/docs"]


def _one_line_detail(r: httpx.Response) -> str:
    detail = r.json()["detail"]
    assert isinstance(detail, str) and detail and "\n" not in detail, detail
    return detail


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
            assert "API key is required" in _one_line_detail(r)
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


def test_cors_is_off_by_default(client_plain: TestClient) -> None:
    r = client_plain.get("/health", headers={"Origin": "https://evil.example"})
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers
    pre = client_plain.options("/search", headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "GET"})
    assert "access-control-allow-origin" not in pre.headers


def test_cors_allows_one_origin(collection_dir: Path) -> None:
    app = api.create_app(collection_dir, warmup=False, api_key=KEY, cors_origin="https://app.example")
    with TestClient(app) as c:
        # the preflight carries no key and must still be answered, for the one origin only
        pre = c.options("/search", headers={"Origin": "https://app.example", "Access-Control-Request-Method": "GET",
                                            "Access-Control-Request-Headers": "authorization"})
        assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == "https://app.example"
        assert "authorization" in pre.headers["access-control-allow-headers"].lower()
        r = c.get(SEARCH, headers={"Origin": "https://app.example", "X-API-Key": KEY})
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "https://app.example"
        other = c.get(SEARCH, headers={"Origin": "https://evil.example", "X-API-Key": KEY})
        assert "access-control-allow-origin" not in other.headers


@pytest.fixture(scope="module")
def client_plain(collection_dir: Path) -> Iterator[TestClient]:
    app = api.create_app(collection_dir, warmup=False, search_timeout=0.5, max_pending=2)
    with TestClient(app) as c:
        yield c


def test_request_body_limit(client_plain: TestClient) -> None:
    big = b"x" * (guard.MAX_BODY_BYTES + 1)
    r = client_plain.request("GET", SEARCH, content=big)
    assert r.status_code == 413 and "the limit is 65536" in _one_line_detail(r)

    def chunks() -> Iterator[bytes]:  # no Content-Length: read up to the limit, then refused
        for _ in range(20):
            yield b"y" * 8192

    r = client_plain.request("POST", "/search", content=chunks())
    assert r.status_code == 413, r.text
    assert client_plain.request("GET", SEARCH, content=b"small").status_code == 200
    r = client_plain.get(SEARCH, headers={"Content-Length": "nan"})
    assert r.status_code == 400


def _slow_bm25(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    real = Bm25Retriever._search

    def slow(self, *a, **k):
        time.sleep(seconds)
        return real(self, *a, **k)

    monkeypatch.setattr(Bm25Retriever, "_search", slow)


def test_a_slow_search_is_answered_504_not_held(client_plain: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    _slow_bm25(monkeypatch, 1.5)
    t = time.perf_counter()
    r = client_plain.get(SEARCH)
    assert r.status_code == 504
    assert time.perf_counter() - t < 1.4
    assert "took longer than 0.5 s" in _one_line_detail(r)
    time.sleep(1.2)  # let the abandoned search finish before the next test


def test_too_many_pending_searches_get_503(client_plain: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    _slow_bm25(monkeypatch, 0.8)
    with __import__("concurrent.futures").futures.ThreadPoolExecutor(4) as ex:
        codes = sorted(r.status_code for r in ex.map(lambda _: client_plain.get(SEARCH), range(4)))
    assert 503 in codes and set(codes) <= {503, 504}, codes
    time.sleep(1.0)
    monkeypatch.undo()
    assert client_plain.get(SEARCH).status_code == 200  # the pool drains: normal service again


def test_exposure_warning() -> None:
    for host in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"):
        assert is_loopback(host) and exposure_warning(host, None) is None
    for host in ("0.0.0.0", "::", "192.168.1.5", "example.org"):
        assert not is_loopback(host)
        msg = exposure_warning(host, None)
        assert msg is not None and "without an API key" in msg and "\n" not in msg
        assert exposure_warning(host, KEY) is None


# -- a real server process ----------------------------------------------------------------------
SERVE = textwrap.dedent(
    """
    import sys, time
    from hiera.retrieve.bm25 import Bm25Retriever
    real = Bm25Retriever._search
    def slow(self, *a, **k):
        time.sleep(float(sys.argv[2]))
        return real(self, *a, **k)
    Bm25Retriever._search = slow
    from hiera.cli import main
    sys.exit(main(["serve", *sys.argv[3:], sys.argv[1]]))
    """
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(collection_dir: Path, delay: float, *args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", SERVE, str(collection_dir), str(delay), "--no-warmup", *args],
        stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})},
    )


def _wait_up(proc: subprocess.Popen, url: str, headers: dict | None = None) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        try:
            if httpx.get(url + "health", headers=headers, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    pytest.fail("the server did not come up")


def test_sigterm_lets_the_in_flight_request_finish(collection_dir: Path) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}/"
    proc = _start(collection_dir, 1.5, "--port", str(port), "-q")
    try:
        _wait_up(proc, url)
        result: dict = {}
        th = threading.Thread(target=lambda: result.update(r=httpx.get(url + SEARCH.lstrip("/"), timeout=30)))
        th.start()
        time.sleep(0.5)  # the search is running now
        proc.send_signal(signal.SIGTERM)
        th.join(timeout=30)
        assert result["r"].status_code == 200 and result["r"].json()["hits"]
        # uvicorn finishes the request, shuts down, then re-raises SIGTERM: the exit is by that signal
        assert proc.wait(timeout=20) in (0, -signal.SIGTERM)
        assert "Traceback" not in (proc.stderr.read() if proc.stderr else "")
        with pytest.raises(httpx.ConnectError):
            httpx.get(url + "health", timeout=2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_public_bind_without_key_warns(collection_dir: Path) -> None:
    port = _free_port()
    proc = _start(collection_dir, 0, "--host", "0.0.0.0", "--port", str(port), "-q", env={"HIERA_API_KEY": ""})
    try:
        _wait_up(proc, f"http://127.0.0.1:{port}/")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    err = proc.stderr.read() if proc.stderr else ""
    assert "hiera: warning: serving on 0.0.0.0 without an API key" in err
