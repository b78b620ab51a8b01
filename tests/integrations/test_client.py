"""hiera.client against a real ``hiera serve`` (uvicorn on loopback): typed results, the server's errors, keys, timeouts."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import helpers
import pytest

pytest.importorskip("httpx", reason="hiera.client needs httpx (pip install 'hiera[client]')")

from hiera.builds import open_collection  # noqa: E402
from hiera.client import (  # noqa: E402
    API_KEY_ENV,
    AuthError,
    HieraClient,
    NotFoundError,
    RequestError,
    SearchTimeoutError,
    ServerError,
    UnavailableError,
)
from hiera.errors import BadInputError, HieraError  # noqa: E402
from hiera.retrieve import get_retriever  # noqa: E402

Q = "Which computer defeated Kasparov?"


@pytest.fixture
def hc(server_url: str) -> Iterator[HieraClient]:
    with HieraClient(server_url, timeout=60) as c:
        yield c


def test_search_returns_the_local_results(hc: HieraClient, shared_root: Path) -> None:
    remote = hc.search(Q, k=4, retriever="dhr", **{"lambda": 0.5, "top_docs": 3})
    local = get_retriever("dhr", open_collection(shared_root)).search(Q, k=4, lam=0.5, top_docs=3)
    assert [h.passage_id for h in remote] == [h.passage_id for h in local]
    assert [h.score for h in remote] == pytest.approx([h.score for h in local], abs=1e-5)
    top = remote[0]
    assert top.doc_id == "chess" and top.breadcrumb().startswith("Chess") and set(top.stages) >= {"doc", "passage"}
    assert remote.params["lam"] == 0.5 and remote.trace and remote.retriever == "dhr"
    docs = hc.search("magma and lava", k=2, retriever="bm25", level="doc")
    assert docs.level == "doc" and docs[0].doc_id == "volcanoes"


def test_parameters_are_checked_before_sending_and_the_server_detail_is_kept(hc: HieraClient) -> None:
    with pytest.raises(BadInputError, match="has no parameter 'lam'"):
        hc.search(Q, retriever="bm25", lam=1.0)
    with pytest.raises(BadInputError, match="lam=500 must be <= 100"):
        hc.search(Q, lam=500)
    with pytest.raises(RequestError) as e:  # a model directory is server-side: the server says so
        hc.search(Q, retriever="sets", classifier="/tmp/x")
    assert e.value.status == 422 and "server-side setting" in e.value.detail and isinstance(e.value, HieraError)
    with pytest.raises(RequestError) as e:
        hc.search(Q, k=5000)
    assert e.value.status == 422 and e.value.detail.startswith("k:")
    with pytest.raises(RequestError, match="started without a reader"):
        hc.answer(Q)


def test_documents_methods_health(hc: HieraClient) -> None:
    doc = hc.document("chess")
    assert doc["title"] == "Chess" and doc["toc"] and doc["lead_passages"][0]["id"] == "chess#0"
    assert hc.document("Python (programming language)")["id"] == "python-language"  # by title
    with pytest.raises(NotFoundError) as e:
        hc.document("no-such-doc")
    assert e.value.status == 404 and "no document with id 'no-such-doc'" in e.value.detail
    names = {m["name"]: m for m in hc.methods()}
    assert names["dhr"]["available"] and any(p["name"] == "lam" for p in names["dhr"]["params"])
    health = hc.health()
    assert health["status"] == "ok" and health["stats"]["documents"] == 6


def test_api_key(shared_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hiera.serve import create_app
    from hiera.serve.guard import API_KEY_ENV as SERVER_ENV

    assert API_KEY_ENV == SERVER_ENV
    with helpers.running_server(create_app(shared_root, warmup=False, api_key="s3cret")) as url:
        monkeypatch.delenv(API_KEY_ENV, raising=False)
        with HieraClient(url) as anon, pytest.raises(AuthError) as e:
            anon.health()
        assert e.value.status == 401
        assert HieraClient(url, api_key="s3cret").health()["status"] == "ok"
        monkeypatch.setenv(API_KEY_ENV, "s3cret")
        assert HieraClient(url).health()["status"] == "ok"


def test_timeouts_and_unreachable_servers() -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)
    held: list[socket.socket] = []
    t = threading.Thread(target=lambda: held.append(silent.accept()[0]), daemon=True)
    t.start()
    port = silent.getsockname()[1]
    try:
        with pytest.raises(SearchTimeoutError, match="no answer within 0.5 s"):
            HieraClient(f"http://127.0.0.1:{port}", timeout=0.5).health()
    finally:
        for s in held:
            s.close()
        silent.close()
    with pytest.raises(UnavailableError, match="cannot reach the server") as e:
        HieraClient(f"http://127.0.0.1:{port}", timeout=2).health()  # nothing listens there any more
    assert isinstance(e.value, ServerError) and e.value.status is None
    with pytest.raises(BadInputError, match="timeout"):
        HieraClient("http://127.0.0.1:1", timeout=0)
    with pytest.raises(BadInputError, match="http://"):
        HieraClient("127.0.0.1:8000")
