"""The search pool: a slow search is answered 504 at its deadline, too many waiting get 503, then service resumes."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient
from helpers import BEE_SEARCH, one_line_detail

from hiera.retrieve.bm25 import Bm25Retriever


def _slow_bm25(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    real = Bm25Retriever._search

    def slow(self, *a, **k):
        time.sleep(seconds)
        return real(self, *a, **k)

    monkeypatch.setattr(Bm25Retriever, "_search", slow)


def test_a_slow_search_is_answered_504_not_held(client_plain: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    _slow_bm25(monkeypatch, 1.5)
    t = time.perf_counter()
    r = client_plain.get(BEE_SEARCH)
    assert r.status_code == 504
    assert time.perf_counter() - t < 1.4
    assert "took longer than 0.5 s" in one_line_detail(r)
    time.sleep(1.2)  # let the abandoned search finish before the next test


def test_too_many_pending_searches_get_503(client_plain: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    _slow_bm25(monkeypatch, 0.8)
    with __import__("concurrent.futures").futures.ThreadPoolExecutor(4) as ex:
        codes = sorted(r.status_code for r in ex.map(lambda _: client_plain.get(BEE_SEARCH), range(4)))
    assert 503 in codes and set(codes) <= {503, 504}, codes
    time.sleep(1.0)
    monkeypatch.undo()
    assert client_plain.get(BEE_SEARCH).status_code == 200  # the pool drains: normal service again


def test_a_panic_in_a_search_is_a_json_500(client_plain: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Rust extension's panic (a BaseException, not an Exception) still gets the JSON 500 with a one-line detail."""

    class Panic(BaseException):
        pass

    def panics(self, *a, **k):
        raise Panic("'stride' must be strictly less than 'max_len'")

    monkeypatch.setattr(Bm25Retriever, "_search", panics)
    r = TestClient(client_plain.app, raise_server_exceptions=False).get(BEE_SEARCH)  # as a real client sees it
    assert r.status_code == 500
    assert one_line_detail(r) == "internal error (RuntimeError): Panic: 'stride' must be strictly less than 'max_len'"
    monkeypatch.undo()
    assert client_plain.get(BEE_SEARCH).status_code == 200
