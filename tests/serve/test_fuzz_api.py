"""Fuzzing the HTTP API's query surface: random strings and numbers for every parameter, never a 500.

Every ``/search`` query parameter (the fixed ones and every registry
parameter and alias) gets random text, numbers (huge, negative, NaN,
infinite, written oddly), booleans and empty values; ``/documents/{id}`` gets
random ids (path tricks included). Invariant: 200, or a 4xx whose ``detail``
is one line of text — never a 500, never a traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import fuzz
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st

from hiera.spec import MAX_K, all_params

NAMES = sorted({n for p in all_params().values() for n in (p.name, *p.aliases)})
FIXED = ["q", "k", "retriever", "level", "rerank", "partial"]

_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=60)
_value = st.one_of(
    _text,
    st.integers(-(10**30), 10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.sampled_from(["", " ", "nan", "NaN", "inf", "-inf", "1e309", "0x10", "1_000", "true", "false", "yes", "0",
                     "-1", str(MAX_K), str(MAX_K + 1), "dhr", "bm25", "doc", "passage", "auto", "summary",
                     "hybrid-max", "%00", "\x00", "../../etc/passwd", "a" * 3000]),
)
_query = st.one_of(st.sampled_from(["worker bees", "gas giants", "knight"]), _text, st.just("q" * 2001))


@pytest.fixture(scope="module")
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


@pytest.fixture(scope="module", autouse=True)
def _report_counts() -> Iterator[None]:
    yield
    fuzz.write_counts()


def _check(r) -> None:
    assert r.status_code == 200 or 400 <= r.status_code < 500, (r.status_code, r.text[:500])
    if r.status_code != 200:
        detail = r.json()["detail"]
        assert isinstance(detail, str) and detail.strip() and "\n" not in detail and "Traceback" not in detail, detail


def test_search_parameters(client: TestClient) -> None:
    @fuzz.fuzz_settings(60)
    @given(
        q=_query,
        fixed=st.dictionaries(st.sampled_from(FIXED[1:]), _value, max_size=4),
        method_params=st.dictionaries(st.sampled_from(NAMES + ["unknown", ""]), _value, max_size=4),
        retriever=st.sampled_from(["bm25", "bm25-doc", "dense", "dhr", "dhr-parallel", "hybrid", "bm25-dhr", "nope"]),
    )
    def run(q: str, fixed: dict, method_params: dict, retriever: str) -> None:
        fuzz.count("test_search_parameters")
        params = {"retriever": retriever, **fixed, **method_params, "q": q}
        with fuzz.time_bound(30, params):
            _check(client.get("/search", params=params))

    run()


def test_repeated_and_odd_parameters(client: TestClient) -> None:
    """The same parameter twice, a parameter with no value, raw bytes in the query string."""

    @fuzz.fuzz_settings(30)
    @given(name=st.sampled_from(FIXED + NAMES), a=_value, b=_value, raw=st.binary(max_size=40))
    def run(name: str, a: str, b: str, raw: bytes) -> None:
        fuzz.count("test_repeated_and_odd_parameters")
        qs = f"q=bees&{quote(name)}={quote(a)}&{quote(name)}={quote(b)}&{quote(name)}&x={quote(raw)}"
        with fuzz.time_bound(30, qs):
            _check(client.get("/search?" + qs))

    run()


def test_document_ids(client: TestClient, collection_dir: Path) -> None:
    @fuzz.fuzz_settings(40)
    @given(doc_id=st.one_of(_text, st.sampled_from(["../corpus.sqlite", "..%2F..%2Fetc%2Fpasswd", "%00", "AC/DC",
                                                   "chess", "/", "a" * 5000, "index/manifest.json"])))
    def run(doc_id: str) -> None:
        fuzz.count("test_document_ids")
        with fuzz.time_bound(30, doc_id):
            r = client.get("/documents/" + quote(doc_id, safe="/%"))
        if r.status_code == 200:
            assert "title" in r.json()
        else:
            _check(r)

    run()
