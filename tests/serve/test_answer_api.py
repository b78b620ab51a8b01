"""``/answer`` and the page's answer mode, against a reader trained on real SQuAD paragraphs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import helpers
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from readdata import RULES

from hiera.eval.questions import load_squad


@pytest.fixture(scope="module")
def reader_app(squad_tiny: tuple[Path, Path], tiny_reader: Path) -> FastAPI:
    from hiera.serve import create_app

    return create_app(squad_tiny[0], warmup=False, reader=tiny_reader)


@pytest.fixture(scope="module")
def client(reader_app: FastAPI) -> Iterator[TestClient]:
    with TestClient(reader_app) as c:
        yield c


@pytest.fixture(scope="module")
def question(squad_tiny: tuple[Path, Path]) -> str:
    return load_squad(squad_tiny[1], rules=RULES)[0].text


def test_answer_returns_answers_inside_their_passages(client: TestClient, question: str):
    r = client.get("/answer", params={"q": question, "retriever": "bm25", "k": 4, "answers": 3, "lam": 0.5})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["question"] == question and body["retriever"] == "bm25"
    assert len(body["passages"]) == 4 and 1 <= len(body["answers"]) <= 3
    assert body["ignored"] == ["lam"]  # bm25 has no λ: reported, not an error
    texts = {h["passage_id"]: h["text"] for h in body["passages"]}
    for a in body["answers"]:
        assert texts[a["passage_id"]][a["start"] : a["end"]] == a["text"]
        assert {"score", "doc_id", "breadcrumb", "evidence"} <= set(a)
    assert [s["name"] for s in body["trace"]][-3:] == ["read", "decode", "answered-by"]
    assert body["reader"]["params"]["answers"] == 3


def test_reader_parameters_and_bad_input(client: TestClient, question: str):
    health = client.get("/health").json()
    assert health["reader"]["name"] == "rd" and health["reader"]["params"]["max_answer_tokens"] == 30
    readers = [m for m in client.get("/methods").json() if m["kind"] == "reader"]
    assert readers and all(m["available"] for m in readers)
    cases = [
        ({"q": "  "}, 422, "empty"),
        ({"q": question, "max_answer_tokens": 0}, 422, "max_answer_tokens"),
        ({"q": question, "merge": "mean"}, 422, "merge"),
        ({"q": question, "reader": "/tmp"}, 422, "--reader"),
        ({"q": question, "retriever": "bm25-doc"}, 422, "documents only"),
        ({"q": question, "retriever": "nope"}, 422, "unknown retriever"),
        ({"q": question, "max_answer_token": 5}, 422, "unknown parameter 'max_answer_token' (did you mean"),
        ({"q": question, "level": "passage"}, 422, "unknown parameter 'level'"),
        ({"q": question, "k": 0}, 422, "k"),
    ]
    for params, status, words in cases:
        r = client.get("/answer", params={"retriever": "bm25", **params})
        assert r.status_code == status, (params, r.text)
        assert words in r.json()["detail"] and "\n" not in r.json()["detail"]


# -- the page ------------------------------------------------------------------------------------------
CHROMIUM = helpers.CHROMIUM


@pytest.mark.browser
@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed")
def test_the_page_shows_the_answer_first_highlighted_in_its_passage(reader_app: FastAPI, question: str):
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    with helpers.running_server(reader_app) as url, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=helpers.CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.set_default_timeout(20_000)
            page.goto(url)
            page.wait_for_selector("body[data-ready='1']")
            assert page.locator("#answer-wrap").is_visible()
            assert not page.locator("#reader-params").is_visible()
            page.locator("#answer").check()
            assert page.locator("#param-max_answer_tokens").is_visible()  # the reader's controls, from /methods
            assert page.locator("#param-reader").count() == 0  # a directory: server-side only
            page.fill("#q", question)
            with page.expect_response(lambda r: "/answer?" in r.url) as resp:
                page.press("#q", "Enter")
            body = resp.value.json()
            page.wait_for_selector(".answer-text")
            best = body["answers"][0]
            assert page.locator(".answer-text").text_content() == best["text"]
            assert page.locator("mark.answer-span").text_content() == best["text"]
            assert best["breadcrumb"] in page.locator("#answer-box .answer-crumb").first.text_content()
            assert page.locator(".answer-other").count() == len(body["answers"]) - 1
            assert page.locator(".hit").count() == len(body["passages"])  # the passages read, below
            assert "answer=true" in page.url  # a shared link reopens answer mode
            page.goto(page.url)
            page.wait_for_selector(".answer-text")
            assert page.locator("#answer").is_checked()
            assert not errors, errors
        finally:
            browser.close()
