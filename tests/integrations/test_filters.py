"""A filter through every adapter: the MCP search tool, LangChain's and LlamaIndex's retrievers, local and remote."""

from __future__ import annotations

from pathlib import Path

import pytest

from hiera.errors import HieraError
from hiera.integrations.source import open_source

Q = "lava, chess engines and jazz"
FILTER = "not categories = Geology"


def test_the_mcp_search_tool_takes_a_filter(shared_root: Path) -> None:
    pytest.importorskip("mcp", reason="needs the mcp SDK (pip install 'hiera[mcp]')")
    from hiera.integrations.mcp import call, tool_schemas

    source = open_source(shared_root)
    schemas = tool_schemas(source.available(), False)
    assert schemas["search"][1]["properties"]["filter"]["type"] == "string"
    out, _ = call(source, "search", {"query": Q, "k": 5, "method": "dense", "filter": FILTER}, schemas)
    assert out["hits"] and all(h["doc_id"] != "volcanoes" for h in out["hits"])
    out, _ = call(source, "search", {"query": Q, "filter": "id = nothing"}, schemas)
    assert out["hits"] == []
    for args, message in (({"filter": "colour = red"}, "unknown field 'colour'"),
                          ({"filter": "id < 3", "method": "bm25"}, "field 'id' is list")):
        with pytest.raises(HieraError, match=message):
            call(source, "search", {"query": Q, **args}, schemas)


@pytest.mark.parametrize("remote", [False, True])
def test_langchain_and_llamaindex_retrievers_filter(shared_root: Path, server_url: str, remote: bool) -> None:
    source = server_url if remote else shared_root
    lc = pytest.importorskip("hiera.integrations.langchain", reason="needs langchain-core")
    docs = lc.HieraRetriever(source=source, method="dense", k=4, filter=FILTER).invoke(Q)
    assert docs and all(d.metadata["doc_id"] != "volcanoes" for d in docs)
    li = pytest.importorskip("hiera.integrations.llamaindex", reason="needs llama-index-core")
    nodes = li.HieraRetriever(source, method="dense", k=4, filter=FILTER).retrieve(Q)
    assert nodes and all(n.node.metadata["doc_id"] != "volcanoes" for n in nodes)
