"""Walk the registry: every parameter of every method reaches the retriever through each surface.

``hiera search --set``, ``hiera eval --set`` and ``/search`` are generated from
:mod:`hiera.spec`; a parameter that one surface drops would show here as a
value that never arrives in the results' ``params``. (The web page's
controls are walked the same way in tests/serve/test_browser.py.)
"""

from __future__ import annotations

import json
from pathlib import Path

import helpers
import pytest
from fastapi.testclient import TestClient

from hiera.builds import open_collection
from hiera.cli import main
from hiera.retrieve import get_retriever
from hiera.spec import METHODS, READERS

CASES = [(m, p) for m, spec in METHODS.items() for p in spec.params]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HIERA_CACHE_DIR", str(helpers.session_cache_dir(tmp_path_factory)))
        return helpers.shared_collection(tmp_path_factory)


@pytest.fixture(scope="module")
def defaults(root: Path) -> dict[str, dict]:
    col = open_collection(root)
    return {m: get_retriever(m, col).defaults for m in METHODS}


@pytest.fixture(scope="module")
def client(root: Path):
    from hiera.serve import create_app

    with TestClient(create_app(root, warmup=False)) as c:
        yield c


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    assert rc == 0, err
    return json.loads(out)


@pytest.mark.parametrize(("name", "param"), CASES, ids=[f"{m}.{p.name}" for m, p in CASES])
def test_search_set_reaches_the_method(root: Path, defaults: dict, capsys, name: str, param) -> None:
    value = helpers.other_value(param, defaults[name].get(param.name))
    data = _cli(capsys, "search", str(root), helpers.TOPIC_QUERIES["jazz"], "-r", name, "--json",
                "--set", f"{param.name}={value}")
    assert data["params"][param.name] == value
    assert data["params"] == {**defaults[name], param.name: value}


@pytest.mark.parametrize(("name", "param"), CASES, ids=[f"{m}.{p.name}" for m, p in CASES])
def test_api_query_parameter_reaches_the_method(client: TestClient, defaults: dict, name: str, param) -> None:
    value = helpers.other_value(param, defaults[name].get(param.name))
    if not param.http:  # a directory: never settable by a request, and saying so
        r = client.get("/search", params={"q": "jazz", "retriever": name, param.name: value})
        assert r.status_code == 422 and "server-side setting" in r.json()["detail"] and param.name in r.json()["detail"]
        return
    r = client.get("/search", params={"q": helpers.TOPIC_QUERIES["jazz"], "retriever": name, param.name: value})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["params"][param.name] == value and body["ignored"] == []
    for alias in param.aliases:
        r = client.get("/search", params={"q": "jazz", "retriever": name, alias: value})
        assert r.status_code == 200 and r.json()["params"][param.name] == value


def test_api_documents_every_parameter_in_openapi(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    query = {p["name"]: p for p in spec["paths"]["/search"]["get"]["parameters"]}
    for _, param in CASES:
        if not param.http:
            assert param.name not in query, f"{param.name} is a path: it must not be a request parameter"
            continue
        assert param.name in query, param.name
        schema = json.dumps(query[param.name]["schema"])
        if param.min is not None:
            assert "minimum" in schema
        for choice in param.choices or ():
            assert f'"{choice}"' in schema
    methods = client.get("/methods").json()
    retrievers = [m for m in methods if m["kind"] == "retriever"]
    assert [m["name"] for m in retrievers] == list(METHODS)
    assert all(m["available"] for m in retrievers)
    # readers: listed with their parameters, unavailable on a server started without --reader
    readers = [m for m in methods if m["kind"] == "reader"]
    assert [m["name"] for m in readers] == list(READERS)
    assert all(not m["available"] and m["missing"] == ["reader"] for m in readers)
    answer = {p["name"]: p for p in spec["paths"]["/answer"]["get"]["parameters"]}
    for r in READERS.values():
        for param in r.params:
            assert (param.name in answer) == param.http, param.name
    assert "lam" in answer and "k" in answer
    r = client.get("/answer", params={"q": "jazz"})
    assert r.status_code == 400 and "without a reader" in r.json()["detail"]


def test_eval_set_reaches_every_listed_method(root: Path, tmp_path: Path, defaults: dict, capsys) -> None:
    qfile = tmp_path / "qs.jsonl"
    qfile.write_text("".join(json.dumps({"question": q.text, "answer": q.answers}) + "\n" for q in helpers.tiny_questions()))
    for name, spec in METHODS.items():
        if "passage" not in spec.levels or not spec.params:
            continue
        sets = [f"{p.name}={helpers.other_value(p, defaults[name].get(p.name))}" for p in spec.params]
        out = tmp_path / name
        argv = ["eval", str(root), "--questions", str(qfile), "--format", "nq-open", "--retrievers", name,
                "--ks", "1,5", "--latency-sample", "0", "--out", str(out), "--quiet"]
        for s in sets:
            argv += ["--set", s]
        _cli(capsys, *argv, "--json")
        params = json.loads((out / "params.json").read_text())[name]
        run = json.loads((out / "run.json").read_text())  # what the figures were measured on
        assert run["questions"] == {"path": str(qfile), "format": "nq-open", "limit": None,
                                    "count": len(helpers.tiny_questions())}
        assert run["collection"]["build"] == open_collection(root).build_dir.name and run["ks"] == [1, 5]
        for p in spec.params:
            assert params[p.name] == helpers.other_value(p, defaults[name].get(p.name)), (name, p.name)
        # the same settings through Python give the same figures
        r = get_retriever(name, open_collection(root), **{p.name: params[p.name] for p in spec.params})
        hits = [r.search(q.text, k=1)[0].text for q in helpers.tiny_questions()]
        from hiera.eval.match import has_answer

        top1 = sum(has_answer(q.answers, h) for q, h in zip(helpers.tiny_questions(), hits, strict=True)) / len(hits)
        assert json.loads((out / "results.json").read_text())[name]["top1"] == pytest.approx(top1)
