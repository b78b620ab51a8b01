"""``hiera mcp`` end to end: a real subprocess driven by the mcp SDK's own client over stdio."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="needs the mcp SDK (pip install 'hiera[mcp]')")

from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from hiera.builds import open_collection  # noqa: E402
from hiera.retrieve import get_retriever  # noqa: E402
from hiera.spec import METHODS  # noqa: E402

SRC = Path(__file__).resolve().parents[2] / "src"


def _server(*args: str) -> StdioServerParameters:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH", "")) if p)
    return StdioServerParameters(command=sys.executable, args=["-m", "hiera", "mcp", *args], env=env)


async def _session(params: StdioServerParameters, calls: list[tuple[str, dict[str, Any]]]) -> tuple[Any, list[Any]]:
    async with Client(params, read_timeout_seconds=300) as client:
        tools = await client.list_tools()
        return tools, [await client.call_tool(name, args) for name, args in calls]


def test_stdio_server_tools_results_and_errors(shared_root: Path, untrained_reader: Path) -> None:
    q = "Which computer defeated Kasparov?"
    calls = [
        ("search", {"query": q, "k": 3, "method": "dhr", "lam": 0.5}),
        ("search", {"query": "magma chamber", "k": 2, "method": "bm25", "level": "doc"}),
        ("set_query", {"query": "volcanoes or board games", "k": 6}),
        ("get_document", {"id": "Chess"}),
        ("list_methods", {}),
        ("answer", {"query": q, "k": 2, "method": "bm25", "max_answer_tokens": 5}),
        # bad arguments: tool errors, and the server goes on answering
        ("search", {"query": q, "k": 0}),
        ("search", {"query": q, "lam": "high"}),
        ("search", {"query": q, "method": "bm25", "lam": 1.0}),
        ("search", {"query": q, "classifier": "/etc"}),
        ("search", {"k": 3}),
        ("get_document", {"id": "no-such-document"}),
        ("no_such_tool", {}),
        ("search", {"query": q, "k": 1}),
        ("answer", {"query": q, "k": 2, "method": "bm25", "filter": "title = Chess"}),
    ]
    tools, res = asyncio.run(_session(_server(str(shared_root), "--reader", str(untrained_reader)), calls))

    by_name = {t.name: t for t in tools.tools}
    assert set(by_name) == {"search", "set_query", "answer", "get_document", "list_methods"}
    props = by_name["search"].input_schema["properties"]
    lam = METHODS["dhr"].param("lam")
    assert props["lam"]["type"] == "number" and (props["lam"]["minimum"], props["lam"]["maximum"]) == (lam.min, lam.max)
    assert props["doc_stage"]["enum"] == list(METHODS["dhr"].param("doc_stage").choices)
    # a method parameter has no schema default (it depends on the method and the collection); each method's is said
    assert not any("default" in props[p.name] for n in props["method"]["enum"] for p in METHODS[n].params if p.http)
    assert f"(dhr: default {lam.default};" in props["lam"]["description"]
    assert f"bm25-dhr: default {METHODS['bm25-dhr'].param('lam').default}" in props["lam"]["description"]
    assert "dhr" in props["method"]["enum"] and "sets" not in props["method"]["enum"]
    assert "classifier" not in props and "model" not in props  # directories are never tool arguments
    assert by_name["search"].input_schema["additionalProperties"] is False
    assert "candidates" in by_name["set_query"].input_schema["properties"]
    assert "max_answer_tokens" in by_name["answer"].input_schema["properties"]
    aprops = by_name["answer"].input_schema["properties"]
    assert "filter" in aprops and "doc_depth" not in aprops  # passages are read: no document-level parameter
    from hiera.read.reader import Reader

    reader_defaults = Reader(untrained_reader).defaults  # the schema's defaults are what a bare call uses
    assert all(aprops[n]["default"] == v for n, v in reader_defaults.items() if n in aprops)

    search, docs, sets, document, methods, answer = res[:6]
    assert not any(r.is_error for r in res[:6]), [r.content[0].text for r in res[:6] if r.is_error]
    local = get_retriever("dhr", open_collection(shared_root)).search(q, k=3, lam=0.5)
    hits = search.structured_content["hits"]
    assert [h["passage_id"] for h in hits] == [h.passage_id for h in local]
    assert hits[0]["breadcrumb"] == local[0].breadcrumb() and set(hits[0]["stages"]) == set(local[0].stages)
    assert search.structured_content["params"]["lam"] == 0.5
    assert local[0].breadcrumb() in search.content[0].text and "Deep Blue" in search.content[0].text
    assert docs.structured_content["level"] == "doc" and docs.structured_content["hits"][0]["doc_id"] == "volcanoes"

    members = sets.structured_content["members"]
    assert {m["doc_id"] for m in members} >= {"volcanoes", "chess"} and sets.structured_content["expression"]
    assert all(m["support"] for m in members)
    assert document.structured_content["id"] == "chess" and document.structured_content["toc"]
    assert "Chess › Computers" in document.content[0].text
    assert {m["name"] for m in methods.structured_content["methods"]} >= set(METHODS)

    ans = answer.structured_content
    passages = {p["passage_id"]: p for p in ans["passages"]}
    assert ans["answers"] and len(passages) == 2
    for a in ans["answers"]:  # untrained heads choose arbitrary spans: each must still be its passage's text
        assert passages[a["passage_id"]]["text"][a["start"]:a["end"]] == a["text"]
        assert a["breadcrumb"] == passages[a["passage_id"]]["breadcrumb"]

    errors = res[6:13]
    assert all(r.is_error for r in errors)
    texts = [r.content[0].text for r in errors]
    assert "k: 0 is less than the minimum of 1" in texts[0]
    assert "lam: 'high' is not of type 'number'" in texts[1]
    assert "retriever 'bm25' has no parameter 'lam'" in texts[2]
    assert "Additional properties are not allowed ('classifier'" in texts[3]
    assert "'query' is a required property" in texts[4]
    assert "no document with id or title 'no-such-document'" in texts[5]
    assert "unknown tool 'no_such_tool'" in texts[6]
    assert not res[13].is_error and len(res[13].structured_content["hits"]) == 1
    filtered = res[14]
    assert not filtered.is_error and {p["doc_id"] for p in filtered.structured_content["passages"]} == {"chess"}


def test_a_hiera_server_behind_the_mcp_server(server_url: str) -> None:
    tools, (search,) = asyncio.run(_session(_server(server_url), [("search", {"query": "jazz saxophone", "k": 2})]))
    assert {t.name for t in tools.tools} == {"search", "set_query", "get_document", "list_methods"}  # no reader there
    assert not search.is_error and search.structured_content["hits"][0]["doc_id"] == "jazz"


def test_cli_errors_are_one_line(tmp_path: Path, capsys) -> None:
    from hiera.cli import main

    assert main(["mcp", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err.strip()
    assert "is not a hiera collection" in err and len(err.splitlines()) == 1
    assert main(["mcp", str(tmp_path), "--http", "nohost"]) == 2
    assert "--http takes HOST:PORT" in capsys.readouterr().err


def test_streamable_http_transport(shared_root: Path) -> None:
    import socket
    import subprocess
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    params = _server(str(shared_root), "--http", f"127.0.0.1:{port}")
    proc = subprocess.Popen([params.command, *params.args], env=params.env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)

    async def ask() -> Any:
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            return await client.call_tool("search", {"query": "Which piece moves in an L shape?", "k": 1})

    try:
        deadline = time.monotonic() + 240
        while True:
            try:
                res = asyncio.run(ask())
                break
            except Exception:
                assert proc.poll() is None, proc.stderr.read().decode()
                assert time.monotonic() < deadline, "hiera mcp --http did not answer"
                time.sleep(1)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert not res.is_error and res.structured_content["hits"][0]["breadcrumb"] == "Chess › Rules › Movement of the pieces"
