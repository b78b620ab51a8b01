"""``filter=`` on /search (and through ``hiera.client``): only allowed hits, 422 with one line on a bad filter."""

from __future__ import annotations

from collections.abc import Iterator

import helpers
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from hiera.client import HieraClient
from hiera.errors import HieraError


@pytest.fixture(scope="module")
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app) as c:
        yield c


@pytest.mark.parametrize("retriever", ["bm25", "dense", "hybrid", "dhr"])
def test_search_inside_a_filter(client: TestClient, retriever: str) -> None:
    r = client.get("/search", params={"q": "bees, planets, chess and rock music", "retriever": retriever, "k": 5,
                                      "filter": "not id in (honey_bee, volcano)"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["hits"] and not {h["doc_id"] for h in body["hits"]} & {"honey_bee", "volcano"}
    step = next(s for s in body["trace"] if s["name"] == "filter")
    assert step["detail"]["documents"] == 3


@pytest.mark.parametrize(("params", "message"), [
    ({"filter": "colour = red"}, "filter: unknown field 'colour'"),
    ({"filter": "title >= 3"}, "filter: field 'title' is text"),
    ({"filter": "id in (a"}, "filter: expected ',' or ')'"),
    ({"filter": "id contains", "retriever": "fetchhr"}, "filter: expected a value after 'id contains'"),
])
def test_bad_filters_are_422_in_one_line(client: TestClient, params: dict, message: str) -> None:
    r = client.get("/search", params={"q": "bees", **params})
    assert r.status_code == 422 and message in r.json()["detail"] and "\n" not in r.json()["detail"]


def test_a_filter_matching_nothing_is_an_empty_list(client: TestClient) -> None:
    r = client.get("/search", params={"q": "bees", "filter": "id = nothing"})
    assert r.status_code == 200 and r.json()["hits"] == []
    assert "allows nothing" in r.json()["trace"][0]["detail"]["note"]


def test_the_client_sends_the_filter(app: FastAPI) -> None:
    with helpers.running_server(app) as url:
        c = HieraClient(url, api_key=helpers.API_KEY)
        res = c.search("bees and honey", 3, retriever="bm25", filter="id = honey_bee")
        assert res.hits and {h.doc_id for h in res.hits} == {"honey_bee"}
        with pytest.raises(HieraError, match="unknown field 'colour'"):
            c.search("bees", filter="colour = red")
