"""The LlamaIndex retriever with the real llama-index-core: NodeWithScore, metadata, checks, a remote source."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("llama_index.core", reason="needs llama-index-core (pip install 'hiera[llamaindex]')")

from llama_index.core.schema import MetadataMode, NodeWithScore  # noqa: E402

from hiera.builds import open_collection  # noqa: E402
from hiera.client import HieraClient  # noqa: E402
from hiera.errors import BadInputError  # noqa: E402
from hiera.integrations.llamaindex import HieraRetriever  # noqa: E402
from hiera.retrieve import get_retriever  # noqa: E402

Q = "Which enzyme fixes carbon dioxide in the Calvin cycle?"


def test_nodes_with_scores_and_provenance(shared_root: Path) -> None:
    r = HieraRetriever(shared_root, method="dhr", k=3, params={"lam": 0.7})
    nodes = r.retrieve(Q)
    local = get_retriever("dhr", open_collection(shared_root)).search(Q, k=3, lam=0.7)
    assert all(isinstance(n, NodeWithScore) for n in nodes)
    assert [n.node.node_id for n in nodes] == [h.passage_id for h in local]
    assert [n.score for n in nodes] == pytest.approx([h.score for h in local])
    top = nodes[0]
    assert "RuBisCO" in top.node.get_content() and top.node.metadata["breadcrumb"] == "Photosynthesis › Calvin cycle"
    assert set(top.node.metadata["stages"]) == set(local[0].stages)
    llm_view = top.node.get_content(metadata_mode=MetadataMode.LLM)
    assert "Photosynthesis › Calvin cycle" in llm_view and "stages" not in llm_view  # bulky metadata kept out
    shown = {line.split(": ")[0] for line in llm_view.split("\n\n")[0].splitlines()}  # the metadata block
    assert shown == {"title", "breadcrumb"}, shown  # no ids or scores either
    assert top.node.get_content(metadata_mode=MetadataMode.EMBED) == llm_view
    assert [n.node.node_id for n in asyncio.run(r.aretrieve(Q))] == [n.node.node_id for n in nodes]


def test_bad_parameters_are_refused(shared_root: Path) -> None:
    with pytest.raises(BadInputError, match="doc_alpha=2 must be <= 1"):
        HieraRetriever(shared_root, method="dhr", params={"doc_alpha": 2})
    with pytest.raises(BadInputError, match="has no parameter 'fusion'"):
        HieraRetriever(shared_root, method="dense", params={"fusion": "rrf"})


def test_documents_and_set_members(shared_root: Path) -> None:
    docs = HieraRetriever(shared_root, method="bm25-doc", k=2).retrieve("legions emperor senate")
    assert docs[0].node.metadata["doc_id"] == "roman-empire" and docs[0].node.metadata["level"] == "doc"
    sets = HieraRetriever(shared_root, method="sets", k=6).retrieve("volcanoes or board games")
    members = [n for n in sets if n.node.metadata["in_answer_set"]]
    assert members and all(n.node.metadata["support"] for n in members)


def test_a_remote_source(shared_root: Path, server_url: str) -> None:
    local = HieraRetriever(shared_root, method="hybrid", k=4).retrieve(Q)
    remote = HieraRetriever(HieraClient(server_url), method="hybrid", k=4).retrieve(Q)
    assert [n.node.node_id for n in remote] == [n.node.node_id for n in local]
    assert [n.score for n in remote] == pytest.approx([n.score for n in local], abs=1e-5)
