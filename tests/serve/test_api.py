"""The HTTP API through FastAPI's TestClient, on the tiny collection of conftest.py."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import quote

import helpers
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from helpers import API_KEY, BEE_SEARCH

import hiera
from hiera.backends import check_backend
from hiera.builds import open_collection
from hiera.corpus.store import CorpusStore
from hiera.encode import DEFAULT_BACKEND
from hiera.models import cuda_available
from hiera.retrieve import RETRIEVERS, get_retriever
from hiera.serve import api

HIT_FIELDS = {"rank", "score", "doc_id", "title", "passage_id", "section_path", "text", "stages", "evidence", "support", "breadcrumb", "reason"}
BEES = "What do worker bees do in the hive?"
GIANTS = "Which planets are the gas giants made of hydrogen?"


@pytest.fixture(scope="module")
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app) as c:  # runs the lifespan: warm-up before the first request
        yield c


def dhr_defaults(root: Path) -> dict[str, Any]:
    """``dhr``'s parameters on the collection at ``root``, as the Python library resolves them."""
    return get_retriever("dhr", open_collection(root)).defaults


def _search(client: TestClient, **params: Any) -> dict[str, Any]:
    r = client.get("/search", params=params)
    assert r.status_code == 200, r.text
    return r.json()


# -- /search ----------------------------------------------------------------------
class TestSearch:
    def test_dhr_hits_carry_every_field(self, client: TestClient, collection_dir: Path) -> None:
        r = client.get("/search", params={"q": BEES, "k": 5})
        assert r.status_code == 200
        assert float(r.headers["X-Process-Time-Ms"]) >= 0
        body = r.json()
        assert body["retriever"] == "dhr" and body["level"] == "passage" and body["query"] == BEES
        assert body["took_ms"] > 0
        # the parameters it ran with: the library's for this collection, "auto" resolved to the stage it chose
        assert body["params"] == dhr_defaults(collection_dir) and body["params"]["doc_stage"] == "hybrid-max"
        hits = body["hits"]
        assert len(hits) == 5
        assert [h["rank"] for h in hits] == [1, 2, 3, 4, 5]
        assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
        for h in hits:
            assert set(h) == HIT_FIELDS
            # the default hybrid passage stage shows its two parts, dense and BM25
            assert set(h["stages"]) == {"doc", "passage", "dense", "bm25"}
            for stage in h["stages"].values():
                assert set(stage) == {"score", "rank"} and stage["rank"] >= 1
            # DHR's final score is passage + λ · document.
            lam = body["params"]["lam"]
            assert h["score"] == pytest.approx(h["stages"]["passage"]["score"] + lam * h["stages"]["doc"]["score"], abs=1e-5)
            assert h["passage_id"].startswith(h["doc_id"] + "#")
            assert h["breadcrumb"] == " › ".join([h["title"], *h["section_path"]])
            assert h["reason"].startswith("doc ")
        top = hits[0]
        assert top["doc_id"] == "honey_bee" and top["title"] == "Honey bee"
        assert top["section_path"] == ["Colony", "Workers"]
        assert top["stages"]["doc"]["rank"] == 1
        assert "Worker bees are sterile females" in top["text"]
        assert [s["name"] for s in body["trace"]][-2:] == ["passage-stage", "answered-by"]
        assert all(s["ms"] >= 0 for s in body["trace"])

    def test_nested_section_path(self, client: TestClient) -> None:
        top = _search(client, q=GIANTS, k=3)["hits"][0]
        assert top["doc_id"] == "solar_system"
        assert top["section_path"] == ["Planets", "Outer planets", "Gas giants"]
        assert top["breadcrumb"] == "Solar System › Planets › Outer planets › Gas giants"

    def test_lambda_and_k1_reach_dhr(self, client: TestClient) -> None:
        body = _search(client, q=BEES, k=4, **{"lambda": 0.0}, k1=1)
        assert body["params"]["lam"] == 0.0 and body["params"]["top_docs"] == 1
        for h in body["hits"]:
            assert h["score"] == pytest.approx(h["stages"]["passage"]["score"], abs=1e-6)
            assert h["doc_id"] == "honey_bee"  # k1=1: only the best document's passages
        assert len(body["hits"]) == 4

    def test_level_doc(self, client: TestClient) -> None:
        body = _search(client, q=BEES, k=10, level="doc")
        assert body["level"] == "doc"
        ids = [h["doc_id"] for h in body["hits"]]
        assert len(ids) == len(set(ids)) == 5  # every document once, no more than exist
        assert ids[0] == "honey_bee"
        assert all(set(h["stages"]) == {"doc"} for h in body["hits"])

    @pytest.mark.parametrize("name", RETRIEVERS)
    def test_every_retriever_answers(self, client: TestClient, name: str) -> None:
        body = _search(client, q=BEES, k=3, retriever=name)
        assert body["retriever"] == name
        assert body["hits"] and body["hits"][0]["doc_id"] == "honey_bee"

    def test_ui_defaults_for_other_methods_are_ignored(self, client: TestClient) -> None:
        body = _search(client, q=BEES, k=3, retriever="bm25", **{"lambda": 2.0}, k1=5, doc_stage="mean", fusion="rrf")
        assert body["retriever"] == "bm25"
        assert "lam" not in body["params"] and "top_docs" not in body["params"]
        assert body["ignored"] == ["doc_stage", "fusion", "lam", "top_docs"]  # canonical names
        hybrid = _search(client, q=BEES, k=3, retriever="hybrid", fusion="interp", **{"lambda": 2.0})
        assert hybrid["params"]["fusion"] == "interp" and hybrid["ignored"] == ["lam"]
        assert set(hybrid["hits"][0]["stages"]) == {"bm25", "dense"}

    def test_doc_stage_parameter(self, client: TestClient) -> None:
        body = _search(client, q=BEES, k=2, doc_stage="bm25")
        assert body["params"]["doc_stage"] == "bm25"
        assert body["trace"][1]["detail"]["stage"] == "bm25" or "bm25" in str(body["trace"])


class TestSearchRejects:
    @pytest.mark.parametrize(
        "params, status, words",
        [
            ({"q": ""}, 422, "empty"),
            ({"q": "   \t "}, 422, "empty"),
            ({}, 422, "q: field required"),
            ({"q": "bees", "k": 0}, 422, "k: input should be greater than or equal to 1"),
            ({"q": "bees", "k": 1001}, 422, "k: input should be less than or equal to 1000"),
            ({"q": "bees", "k": -3}, 422, "k: input"),
            ({"q": "bees", "k": "ten"}, 422, "k: input should be a valid integer"),
            ({"q": "x" * 2001}, 422, "2001 characters"),
            ({"q": "bees", "lambda": -1}, 422, "lambda: input should be greater than or equal to 0"),
            ({"q": "bees", "lam": -1}, 422, "lam: input should be greater than or equal to 0"),
            ({"q": "bees", "lambda": "abc"}, 422, "lambda: input should be a valid number"),
            ({"q": "bees", "lambda": "inf"}, 422, "lambda: must be a finite number"),
            ({"q": "bees", "retriever": "hybrid", "alpha": "inf"}, 422, "alpha"),
            ({"q": "bees", "lambda": "nan"}, 422, "lambda: must be a finite number"),
            ({"q": "bees", "lam": "NaN"}, 422, "lam: must be a finite number"),
            ({"q": "bees", "lam": "1", "lambda": "2"}, 422, "lam is given under two names"),
            ({"q": "bees", "lamda": "0.3"}, 422, "unknown parameter 'lamda' (did you mean 'lambda'?)"),
            ({"q": "bees", "dhr.lam": "0.3", "zzz": "1"}, 422, "unknown parameters 'dhr.lam', 'zzz'"),
            ({"q": "bees", "max_answer_tokens": "5"}, 422, "unknown parameter 'max_answer_tokens'"),
            ({"q": "bees", "k1": 0}, 422, "k1: input should be greater than or equal to 1"),
            ({"q": "bees", "top_docs": 1.5}, 422, "top_docs: input should be a valid integer"),
            ({"q": "bees", "level": "chapter"}, 422, "level:"),
            ({"q": "bees", "doc_stage": "nope"}, 422, "doc_stage: input should be"),
            ({"q": "bees", "retriever": "hybrid", "fusion": "max"}, 422, "fusion: input should be 'rrf' or 'interp'"),
            ({"q": "bees", "retriever": "bm25-doc", "level": "passage"}, 422, "ranks docs, not passages"),
        ],
    )
    def test_bad_input(self, client: TestClient, params: dict[str, Any], status: int, words: str) -> None:
        r = client.get("/search", params=params)
        assert r.status_code == status, r.text
        detail = r.json()["detail"]
        assert isinstance(detail, str), "the web page shows detail as a sentence"
        assert words in detail.lower()

    def test_limit_is_exactly_2000_characters(self, client: TestClient) -> None:
        assert client.get("/search", params={"q": "bee " * 500, "k": 1}).status_code == 200

    def test_unknown_retriever_lists_valid_names(self, client: TestClient) -> None:
        r = client.get("/search", params={"q": "bees", "retriever": "colbert"})
        assert r.status_code == 422
        detail = r.json()["detail"]
        assert "colbert" in detail
        for name in RETRIEVERS:
            assert name in detail


# -- /documents ---------------------------------------------------------------------
class TestDocuments:
    def test_title_tree(self, client: TestClient) -> None:
        r = client.get("/documents/solar_system")
        assert r.status_code == 200
        d = r.json()
        assert d["id"] == "solar_system" and d["title"] == "Solar System"
        assert d["summary"].startswith("Solar System\nThe Solar System is the Sun")
        assert d["lead"] == ["The Solar System is the Sun and the objects that orbit it, held together by gravity."]
        assert d["lead_passages"] == [{"id": "solar_system#0", "text": d["lead"][0]}]
        assert d["toc"] == [
            {"depth": 1, "title": "Planets", "path": ["Planets"]},
            {"depth": 2, "title": "Inner planets", "path": ["Planets", "Inner planets"]},
            {"depth": 2, "title": "Outer planets", "path": ["Planets", "Outer planets"]},
            {"depth": 3, "title": "Gas giants", "path": ["Planets", "Outer planets", "Gas giants"]},
            {"depth": 3, "title": "Ice giants", "path": ["Planets", "Outer planets", "Ice giants"]},
            {"depth": 1, "title": "Formation", "path": ["Formation"]},
        ]
        planets = d["sections"][0]
        assert (planets["title"], planets["level"], planets["path"]) == ("Planets", 1, ["Planets"])
        assert [p["id"] for p in planets["passages"]] == ["solar_system#1"]
        outer = planets["sections"][1]
        assert outer["passages"] == []  # a heading without text of its own
        gas = outer["sections"][0]
        assert gas["level"] == 3
        assert gas["passages"][0]["text"].startswith("Jupiter and Saturn")
        assert d["categories"] == ["Astronomy"]
        assert len(d["links"]) == 200 and d["links_total"] == 250
        assert "other_passages" not in d

    def test_every_passage_placed_once_even_with_duplicate_titles(self, client: TestClient) -> None:
        d = client.get("/documents/chess").json()
        notes = [s for s in d["sections"] if s["title"] == "Notes"]
        assert len(notes) == 2
        assert "fifty-move" in notes[0]["passages"][0]["text"] and len(notes[0]["passages"]) == 1
        assert "threefold" in notes[1]["passages"][0]["text"] and len(notes[1]["passages"]) == 1

        def ids(nodes: list[dict[str, Any]]) -> list[str]:
            return [p["id"] for n in nodes for p in n["passages"]] + [i for n in nodes for i in ids(n["sections"])]

        placed = [p["id"] for p in d["lead_passages"]] + ids(d["sections"])
        assert sorted(placed) == sorted(f"chess#{i}" for i in range(8))

    def test_id_with_a_slash_and_lookup_by_title(self, client: TestClient) -> None:
        r = client.get("/documents/" + quote("AC/DC", safe=""))
        assert r.status_code == 200 and r.json()["id"] == "AC/DC"
        r = client.get("/documents/AC/DC")
        assert r.status_code == 200 and r.json()["title"] == "AC/DC"
        r = client.get("/documents/" + quote("Honey bee"))
        assert r.status_code == 200 and r.json()["id"] == "honey_bee"

    def test_unknown_is_404(self, client: TestClient) -> None:
        r = client.get("/documents/no_such_document")
        assert r.status_code == 404
        assert "no_such_document" in r.json()["detail"]
        assert client.get("/documents/" + "x" * 5000).status_code == 404

    def test_path_like_ids_read_no_file(self, client: TestClient, collection_dir: Path, tmp_path: Path) -> None:
        """Ids that look like paths are only SQL parameters: 404 and no file outside the collection opened."""
        secret = tmp_path / "secret.txt"
        secret.write_text("TOP-SECRET-CONTENT")
        rel = Path("..") / ".." / secret.relative_to(secret.anchor)
        ids = [
            "../secret.txt",
            "../../../../../../etc/passwd",
            "/etc/passwd",
            str(secret),
            str(collection_dir / ".." / "secret.txt"),
            str(rel),
            "..\\..\\windows\\win.ini",
            "corpus.sqlite",
            "index/manifest.json",
            "%2e%2e%2fetc%2fpasswd",
        ]
        opened: list[str] = []
        watching = threading.Event()

        def hook(event: str, args: tuple) -> None:
            if watching.is_set() and event in ("open", "os.listdir", "os.scandir") and args and isinstance(args[0], str | bytes | Path):
                opened.append(str(args[0]))

        sys.addaudithook(hook)  # cannot be removed; it records only while `watching` is set
        watching.set()
        try:
            responses = [client.get("/documents/" + quote(i, safe="")) for i in ids]
            responses += [client.get("/documents/" + i) for i in ids if not i.startswith("%")]
            during_requests = list(opened)
            secret.read_text()  # control: the hook does see a file being opened
        finally:
            watching.clear()
        assert str(secret) in opened[len(during_requests):]
        opened = during_requests
        for resp in responses:
            assert resp.status_code == 404, resp.request.url
            assert "TOP-SECRET" not in resp.text and "root:" not in resp.text
        # FastAPI reads the endpoint's own source (hiera's package) to describe errors; nothing else may be opened.
        allowed = (str(collection_dir.resolve()), str(Path(hiera.__file__).resolve().parent), sys.prefix, sys.base_prefix)
        outside = [p for p in opened if not str(Path(p).resolve()).startswith(allowed)]
        assert outside == [], f"files opened because of a request parameter: {outside}"
        assert not any("secret" in p or "passwd" in p for p in opened)

    def test_static_files_cannot_escape_the_web_folder(self, client: TestClient) -> None:
        assert client.get("/static/app.js").status_code == 200
        for path in ("/static/..%2Fapi.py", "/static/%2e%2e/api.py", "/static/../../errors.py"):
            r = client.get(path)
            assert r.status_code == 404, path
            assert "def create_app" not in r.text


# -- /health and / -------------------------------------------------------------------
class TestHealthAndPage:
    def test_health(self, client: TestClient, collection_dir: Path) -> None:
        r = client.get("/health")
        assert r.status_code == 200
        h = r.json()
        assert h["status"] == "ok" and h["warm"] is True
        stored = CorpusStore(collection_dir).stats()
        assert (h["stats"]["documents"], h["stats"]["passages"]) == (stored["documents"], stored["passages"])
        assert h["stats"]["documents"] == len(helpers.make_page_docs())
        assert h["retrievers"] == list(RETRIEVERS)
        assert h["defaults"] == {} and h["tuned"] == {}
        assert set(h["models"]) == {"doc", "passage"}
        for m in h["models"].values():
            assert m["name"] == "all-MiniLM-L6-v2" and len(m["fingerprint"]) == 12
            assert m["backend"] == check_backend(DEFAULT_BACKEND)  # what ran the encoders (the queries' too)
        gpu = cuda_available()
        assert (h["device"], h["dense_search"]) == (("cuda", "exact") if gpu else ("cpu", "faiss"))
        assert h["passage_stage"] == ("torch" if gpu else "numpy")
        assert h["retriever_params"]["dhr"] == dhr_defaults(collection_dir)
        assert h["retriever_levels"]["bm25-doc"] == ["doc"] and h["retriever_levels"]["dhr"] == ["passage", "doc"]

    def test_page_and_assets(self, client: TestClient) -> None:
        r = client.get("/")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
        for marker in ('id="q"', 'id="retriever"', 'id="search-btn"', 'id="toc"', 'id="error"', "static/app.js"):
            assert marker in r.text
        assert "http://" not in r.text and "https://" not in r.text  # no CDN: the page works offline
        js = client.get("/static/app.js")
        assert js.status_code == 200 and ".innerHTML" not in js.text
        assert client.get("/static/style.css").status_code == 200

    def test_openapi_docs(self, client: TestClient) -> None:
        for page, asset in (("/docs", "swagger-ui-bundle.js"), ("/redoc", "redoc.standalone.js")):
            r = client.get(page)
            assert r.status_code == 200 and f"/static/docs/{asset}" in r.text
            assert "https://" not in r.text and "http://" not in r.text  # no CDN: the pages work offline
            js = client.get(f"/static/docs/{asset}")
            assert js.status_code == 200 and len(js.content) > 100_000
        assert client.get("/docs/oauth2-redirect").status_code == 200
        schema = client.get("/openapi.json").json()
        assert {"/search", "/health", "/documents/{doc_id}"} <= set(schema["paths"])

    def test_every_response_is_timed(self, client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
        with caplog.at_level("INFO", logger="hiera.serve"):
            r = client.get("/documents/nope")
        assert "X-Process-Time-Ms" in r.headers
        assert any(rec.getMessage().startswith("GET /documents/nope 404 ") for rec in caplog.records)


# -- concurrency --------------------------------------------------------------------
def test_concurrent_requests_agree(client: TestClient) -> None:
    """16 overlapping searches (two questions, several methods) all succeed and match sequential answers."""
    cases = [(q, r) for q in (BEES, GIANTS) for r in ("dhr", "dense", "hybrid", "bm25-dhr")] * 2
    expected = {(q, r): _search(client, q=q, retriever=r, k=5)["hits"] for q, r in set(cases)}
    with ThreadPoolExecutor(max_workers=16) as pool:
        got = list(pool.map(lambda c: client.get("/search", params={"q": c[0], "retriever": c[1], "k": 5}), cases))
    assert all(r.status_code == 200 for r in got)
    for (q, name), r in zip(cases, got, strict=True):
        hits = r.json()["hits"]
        assert [h["passage_id"] for h in hits] == [h["passage_id"] for h in expected[(q, name)]]
        assert [h["score"] for h in hits] == pytest.approx([h["score"] for h in expected[(q, name)]], abs=1e-5)


def test_float32_vectors_serve_the_same_hits(client: TestClient, collection_dir: Path) -> None:
    """``hiera serve --vectors float32`` (matrices upcast in memory) answers exactly like the memory-mapped default."""
    from hiera.serve import create_app

    params = {"q": BEES, "retriever": "dhr", "k": 5}
    with TestClient(create_app(collection_dir, warmup=False, vectors="float32")) as c32:
        got = c32.get("/search", params=params).json()["hits"]
    want = client.get("/search", params=params).json()["hits"]
    assert [h["passage_id"] for h in got] == [h["passage_id"] for h in want] and got
    assert [h["score"] for h in got] == pytest.approx([h["score"] for h in want], abs=1e-5)


def test_an_unexpected_failure_is_json_with_one_line(collection_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure no handler names is still a JSON body with a one-line ``detail``, not a plain-text 500."""
    from hiera.retrieve.bm25 import Bm25Retriever
    from hiera.serve import create_app

    def broken(self, *a, **k):
        raise RuntimeError("the disk\nwent away")

    monkeypatch.setattr(Bm25Retriever, "batch_search", broken)
    with TestClient(create_app(collection_dir, warmup=False), raise_server_exceptions=False) as c:
        r = c.get("/search", params={"q": BEES, "retriever": "bm25"})
    assert r.status_code == 500 and r.headers["content-type"].startswith("application/json")
    assert r.json()["detail"] == "internal error (RuntimeError): the disk went away"


# -- CORS (off unless one origin is allowed) ------------------------------------------------
def test_cors_is_off_by_default(client_plain: TestClient) -> None:
    r = client_plain.get("/health", headers={"Origin": "https://evil.example"})
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers
    pre = client_plain.options("/search", headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "GET"})
    assert "access-control-allow-origin" not in pre.headers


def test_cors_allows_one_origin(collection_dir: Path) -> None:
    app = api.create_app(collection_dir, warmup=False, api_key=API_KEY, cors_origin="https://app.example")
    with TestClient(app) as c:
        # the preflight carries no key and must still be answered, for the one origin only
        pre = c.options("/search", headers={"Origin": "https://app.example", "Access-Control-Request-Method": "GET",
                                            "Access-Control-Request-Headers": "authorization"})
        assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == "https://app.example"
        assert "authorization" in pre.headers["access-control-allow-headers"].lower()
        r = c.get(BEE_SEARCH, headers={"Origin": "https://app.example", "X-API-Key": API_KEY})
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "https://app.example"
        other = c.get(BEE_SEARCH, headers={"Origin": "https://evil.example", "X-API-Key": API_KEY})
        assert "access-control-allow-origin" not in other.headers
