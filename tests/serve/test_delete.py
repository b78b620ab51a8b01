"""``DELETE /documents/{id}``: a write of the running server, refused without a key, visible to the next search.

Every test works on a private copy of the served collection (``collection_dir``)
and a real server (:func:`helpers.running_server`), so the reload after the
server's own write and the poll that sees another writer's change are the
ones production runs.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helpers
import httpx
import pytest

from hiera.builds import remove_documents
from hiera.client import AuthError, ConflictError, HieraClient, NotFoundError, RemovedDocuments
from hiera.corpus.store import CorpusStore
from hiera.index.manifest import Manifest
from hiera.index.publish import live_build_dir
from hiera.index.segments import TOMBSTONES
from hiera.serve import create_app

KEY = helpers.API_KEY
AUTH = {"Authorization": f"Bearer {KEY}"}
BEES = "worker bees sterile females hive"  # the honey_bee document's words
BEE_PARAMS = {"q": BEES, "retriever": "bm25", "k": 10}


@pytest.fixture
def root(collection_dir: Path, tmp_path: Path) -> Path:
    """A private copy of the served collection: these tests change it."""
    return helpers.copy_collection(collection_dir, tmp_path / "col")


@pytest.fixture
def server(root: Path) -> Iterator[str]:
    """A keyed server over ``root`` (warmed: the reload after a write warms the new build as production does)."""
    with helpers.running_server(create_app(root, warmup=True, api_key=KEY)) as url:
        yield url


def _doc_ids(url: str, params: dict | None = None) -> list[str]:
    r = httpx.get(url + "search", params=params or BEE_PARAMS, headers=AUTH, timeout=30)
    assert r.status_code == 200, r.text
    return [h["doc_id"] for h in r.json()["hits"]]


def test_delete_removes_the_document_and_the_next_search_does_not_find_it(root: Path, server: str) -> None:
    before = _doc_ids(server)
    assert "honey_bee" in before
    docs_before = CorpusStore(root).stats()["documents"]
    r = httpx.delete(server + "documents/honey_bee", headers=AUTH, timeout=60)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["removed"] == ["honey_bee"] and body["documents"] == 1 and body["passages"] > 0
    assert body["generation"] == CorpusStore(root).version == Manifest.read(live_build_dir(root)).corpus_version
    # no sleep: the server reloaded before answering
    assert "honey_bee" not in _doc_ids(server)
    assert httpx.get(server + "documents/honey_bee", headers=AUTH).status_code == 404
    health = httpx.get(server + "health", headers=AUTH).json()
    assert health["build"] == live_build_dir(root).name and health["stale"] is None
    assert health["stats"]["documents"] == docs_before - 1
    # a second removal of the same id: gone, 404
    again = httpx.delete(server + "documents/honey_bee", headers=AUTH)
    assert again.status_code == 404 and "honey_bee" in helpers.one_line_detail(again)


def test_an_id_with_a_slash_is_one_id(root: Path, server: str) -> None:
    r = httpx.delete(server + "documents/AC%2FDC", headers=AUTH, timeout=60)
    assert r.status_code == 200, r.text
    assert r.json()["removed"] == ["AC/DC"] and CorpusStore(root).canonical_id("AC/DC") is None


def test_refusals_change_nothing(root: Path, server: str) -> None:
    digest, build = helpers.export_digest(root), live_build_dir(root)
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"X-API-Key": KEY[:-1]}):
        r = httpx.delete(server + "documents/chess", headers=headers)
        assert r.status_code == 401 and "API key is required" in helpers.one_line_detail(r)
    r = httpx.delete(server + "documents/no-such-document", headers=AUTH)
    assert r.status_code == 404 and "no-such-document" in helpers.one_line_detail(r)
    r = httpx.delete(server + "documents/" + "x" * 2000, headers=AUTH)
    assert r.status_code == 404
    assert helpers.export_digest(root) == digest and live_build_dir(root) == build
    assert "chess" in _doc_ids(server, {"q": "chess knight board", "retriever": "bm25", "k": 10})


def test_writes_need_a_configured_key(root: Path) -> None:
    digest = helpers.export_digest(root)
    with helpers.running_server(create_app(root, warmup=False, api_key="")) as url:
        r = httpx.delete(url + "documents/chess")
        assert r.status_code == 403 and "--api-key" in helpers.one_line_detail(r)
        with HieraClient(url) as hc, pytest.raises(AuthError, match="--api-key") as e:
            hc.remove("chess")
        assert e.value.status == 403
    assert helpers.export_digest(root) == digest


def test_the_last_document_is_kept(root: Path) -> None:
    store = CorpusStore(root)
    ids = [d.id for d in store.iter_docs()]
    remove_documents(root, ids[1:], log=helpers.QUIET, progress=False)
    digest, build = helpers.export_digest(root), live_build_dir(root)
    with helpers.running_server(create_app(root, warmup=False, api_key=KEY)) as url:
        r = httpx.delete(url + f"documents/{ids[0]}", headers=AUTH)
        assert r.status_code == 409 and "every document" in helpers.one_line_detail(r)
    assert helpers.export_digest(root) == digest and live_build_dir(root) == build


def test_a_busy_collection_is_409(root: Path, server: str) -> None:
    """Another process holds the writer lock: refused at once, in one line naming the holder."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from hiera.lock import writer_lock\n"
         f"with writer_lock({str(root)!r}, 'hiera test'):\n    print('held', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        digest = helpers.export_digest(root)
        r = httpx.delete(server + "documents/chess", headers=AUTH)
        assert r.status_code == 409 and "busy" in helpers.one_line_detail(r)
        with HieraClient(server, api_key=KEY) as hc, pytest.raises(ConflictError, match="busy"):
            hc.remove("chess")
        assert helpers.export_digest(root) == digest
    finally:
        holder.communicate("", timeout=30)
    assert httpx.delete(server + "documents/chess", headers=AUTH, timeout=60).status_code == 200


def test_searches_during_a_delete_never_fail_nor_see_it_after(root: Path, server: str) -> None:
    """Searches run throughout the write: every one answers 200, and none sent after the DELETE returned has the document."""
    stop = threading.Event()
    seen: list[tuple[float, int, list[str]]] = []

    def search_loop() -> None:
        with httpx.Client(headers=AUTH, timeout=30) as c:
            while not stop.is_set():
                t = time.monotonic()
                r = c.get(server + "search", params=BEE_PARAMS)
                seen.append((t, r.status_code, [h["doc_id"] for h in r.json().get("hits", [])]
                             if r.status_code == 200 else [r.text]))

    threads = [threading.Thread(target=search_loop) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        time.sleep(0.3)
        r = httpx.delete(server + "documents/honey_bee", headers=AUTH, timeout=60)
        done = time.monotonic()
        time.sleep(0.3)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    assert r.status_code == 200, r.text
    assert [s for s in seen if s[1] != 200] == []
    assert any("honey_bee" in ids for t, _, ids in seen if t < done)  # the searches did overlap the write
    after = [ids for t, _, ids in seen if t > done]
    assert after and all("honey_bee" not in ids for ids in after)


def test_another_writers_change_is_served_at_the_next_search(root: Path, server: str) -> None:
    """``hiera remove`` from elsewhere while the server runs: the very next search is answered from the new build.

    The server looks at the corpus version on every search and at once when
    it moved past the served build's, not at its once-a-second poll. The
    removal keeps its tombstones (``compact_at=1.0``), so the server serves a
    base build masked by them, not a rewritten one.
    """
    assert "honey_bee" in _doc_ids(server)  # the server has just looked: its poll would wait a second
    remove_documents(root, ["honey_bee"], log=helpers.QUIET, progress=False, compact_at=1.0)
    assert (live_build_dir(root) / TOMBSTONES).exists()
    t0 = time.monotonic()
    assert "honey_bee" not in _doc_ids(server)
    assert time.monotonic() - t0 < 1.0
    assert httpx.get(server + "health", headers=AUTH).json()["build"] == live_build_dir(root).name


def test_client_remove(root: Path, server: str) -> None:
    with HieraClient(server, api_key=KEY) as hc:
        out = hc.remove("volcano")
        assert isinstance(out, RemovedDocuments)
        assert out.removed == ["volcano"] and out.documents == 1 and out.passages > 0
        assert out.generation == CorpusStore(root).version
        with pytest.raises(NotFoundError, match="volcano") as e:
            hc.remove("volcano")
        assert e.value.status == 404
    with HieraClient(server, api_key="wrong") as hc, pytest.raises(AuthError) as e:
        hc.remove("chess")
    assert e.value.status == 401


def test_a_change_committed_during_a_search_is_searched_again_not_a_500(
        root: Path, server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process removes a document after a search found it and before the search read its rows.

    The search's index predates the change, the store does not: its rows are
    gone. The server searches once more on the build of the new state instead
    of failing (a 500) or answering with rows the store no longer holds.
    """
    from hiera.collection import BuildView

    params = {**BEE_PARAMS, "q": BEES + " volcano eruption"}  # other documents match too
    assert "honey_bee" in _doc_ids(server, params)
    read = BuildView.passages_at
    calls: list[int] = []

    def removed_in_between(self: BuildView, positions: Any) -> Any:
        if not calls:  # the search has found its hits; now another writer commits
            remove_documents(root, ["honey_bee"], log=helpers.QUIET, progress=False, compact_at=1.0)
        calls.append(len(positions))
        return read(self, positions)

    monkeypatch.setattr(BuildView, "passages_at", removed_in_between)
    r = httpx.get(server + "search", params=params, headers=AUTH, timeout=60)
    assert r.status_code == 200, r.text
    assert len(calls) == 2  # the first search found honey_bee's rows gone; the second ran on the new build
    ids = [h["doc_id"] for h in r.json()["hits"]]
    assert ids and "honey_bee" not in ids
