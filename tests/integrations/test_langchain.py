"""The LangChain retriever with the real langchain-core: documents, metadata, registry checks, LCEL, a remote source."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("langchain_core", reason="needs langchain-core (pip install 'hiera[langchain]')")

from langchain_core.documents import Document  # noqa: E402
from langchain_core.prompts import ChatPromptTemplate  # noqa: E402
from langchain_core.runnables import RunnableLambda, RunnablePassthrough  # noqa: E402

from hiera.builds import open_collection  # noqa: E402
from hiera.client import HieraClient  # noqa: E402
from hiera.errors import BadInputError  # noqa: E402
from hiera.integrations.langchain import HieraRetriever  # noqa: E402
from hiera.retrieve import get_retriever  # noqa: E402

Q = "Which piece moves in an L shape?"


def test_documents_carry_hieras_provenance(shared_root: Path) -> None:
    r = HieraRetriever(source=shared_root, method="dhr", k=3, params={"lambda": 0.5, "k1": 4})
    assert r.params == {"lam": 0.5, "top_docs": 4}  # aliases → canonical names, checked by the registry
    docs = r.invoke(Q)
    local = get_retriever("dhr", open_collection(shared_root)).search(Q, k=3, lam=0.5, top_docs=4)
    assert all(isinstance(d, Document) for d in docs) and len(docs) == 3
    assert [d.id for d in docs] == [h.passage_id for h in local]
    top, hit = docs[0], local[0]
    assert top.page_content == hit.text and "knight" in top.page_content
    m = top.metadata
    assert (m["doc_id"], m["passage_id"], m["breadcrumb"]) == ("chess", hit.passage_id, "Chess › Rules › Movement of the pieces")
    assert m["section_path"] == ["Rules", "Movement of the pieces"] and m["rank"] == 1 and m["method"] == "dhr"
    assert m["score"] == pytest.approx(hit.score)
    assert {n: s["score"] for n, s in m["stages"].items()} == pytest.approx({n: s.score for n, s in hit.stages.items()})
    # per-call overrides go through the same checks
    assert len(r.invoke(Q, k=1)) == 1
    with pytest.raises(BadInputError, match="lam=-1 must be >= 0"):
        r.invoke(Q, lam=-1)
    # an override under an alias replaces the constructor's value: the same hits as the canonical name
    by_alias = r.invoke(Q, k1=2, **{"lambda": 1.5})
    assert [d.id for d in by_alias] == [d.id for d in r.invoke(Q, top_docs=2, lam=1.5)]
    assert {d.metadata["doc_id"] for d in by_alias} <= {h.doc_id for h in get_retriever(
        "dhr", open_collection(shared_root)).search(Q, k=3, lam=1.5, top_docs=2)}


@pytest.mark.parametrize("kwargs, message", [
    ({"method": "bm25", "params": {"lam": 1}}, "has no parameter 'lam'"),
    ({"method": "dhr", "params": {"top_docs": "many"}}, "must be an integer"),
    ({"method": "bm25-doc", "level": "passage"}, "ranks docs, not passages"),
    ({"method": "dhr", "level": "para"}, "ranks passages and docs, not paras"),
    ({"method": "nope"}, "unknown retriever 'nope'"),
    ({"k": 0}, "k must be a positive integer"),
])
def test_bad_fields_are_refused_by_the_registry(shared_root: Path, kwargs: dict, message: str) -> None:
    with pytest.raises(BadInputError, match=message):
        HieraRetriever(source=shared_root, **kwargs)


def test_inside_an_lcel_chain(shared_root: Path) -> None:
    retriever = HieraRetriever(source=shared_root, method="hybrid", k=2)

    def context(docs: list[Document]) -> str:
        return "\n".join(f"[{d.metadata['breadcrumb']}] {d.page_content}" for d in docs)

    prompt = ChatPromptTemplate.from_messages([("human", "Context:\n{context}\n\nQuestion: {question}")])
    seen: list[str] = []

    def llm(value) -> str:  # stands in for a chat model: what the model would be shown
        text = value.to_messages()[0].content
        seen.append(text)
        return text.splitlines()[1]

    chain = {"context": retriever | RunnableLambda(context), "question": RunnablePassthrough()} | prompt | RunnableLambda(llm)
    first_line = chain.invoke("Who created the Python programming language?")
    assert first_line.startswith("[Python (programming language)") and "Guido van Rossum" in seen[0]
    assert len(chain.batch(["Which computer defeated Kasparov?", Q])) == 2


def test_set_queries_carry_their_evidence(shared_root: Path) -> None:
    docs = HieraRetriever(source=shared_root, method="sets", k=6).invoke("volcanoes or board games")
    members = [d for d in docs if d.metadata["in_answer_set"]]
    assert members and all(d.metadata["level"] == "doc" for d in docs)
    assert {d.metadata["doc_id"] for d in members} >= {"volcanoes", "chess"}
    for d in members:
        assert d.metadata["support"] and all(isinstance(s, str) and s for s in d.metadata["support"].values())


def test_a_remote_source_gives_the_same_documents(shared_root: Path, server_url: str) -> None:
    local = HieraRetriever(source=shared_root, method="dhr", k=3).invoke(Q)
    with HieraClient(server_url) as hc:
        remote = HieraRetriever(source=hc, method="dhr", k=3).invoke(Q)
    assert [d.id for d in remote] == [d.id for d in local]
    assert [d.metadata["breadcrumb"] for d in remote] == [d.metadata["breadcrumb"] for d in local]
    assert [d.metadata["score"] for d in remote] == pytest.approx([d.metadata["score"] for d in local], abs=1e-5)


def test_a_directory_source_follows_the_collection(col_copy: Path, tmp_path: Path) -> None:
    """Made from a directory, the retriever answers from the collection as it is now: a document added after it was
    made is found, a removed one is gone, with no error in between (as ``hiera serve`` does). Made from an opened
    collection, it keeps that collection's state."""
    import helpers

    from hiera.cli import main

    by_dir = HieraRetriever(source=col_copy, method="bm25", k=3)
    dense = HieraRetriever(source=col_copy, method="dense", k=3)
    pinned = HieraRetriever(source=open_collection(col_copy), method="bm25", k=3)
    q = "honeybee colony queen nectar pollen beeswax"
    assert all(d.metadata["doc_id"] != "honeybees" for d in by_dir.invoke(q) + dense.invoke(q) + pinned.invoke(q))
    src = helpers.write_jsonl(tmp_path / "add.jsonl", helpers.make_extra_docs())
    assert main(["add", str(col_copy), str(src), "--format", "hiera-jsonl", "-q"]) == 0
    assert by_dir.invoke(q)[0].metadata["doc_id"] == "honeybees"
    assert dense.invoke(q)[0].metadata["doc_id"] == "honeybees"  # its FAISS files are the new build's
    assert all(d.metadata["doc_id"] != "honeybees" for d in pinned.invoke(q))
    assert main(["remove", str(col_copy), "--ids", "honeybees", "-q"]) == 0
    assert all(d.metadata["doc_id"] != "honeybees" for d in by_dir.invoke(q) + dense.invoke(q))


def test_a_directory_source_follows_a_rebuild_and_searches_again_after_a_removal(col_copy: Path, monkeypatch) -> None:
    """A rebuild changes no corpus version, yet its defaults are what the CLI now searches with; and a removal
    that lands while a search runs is answered from the next build, not raised."""
    import helpers

    from hiera.cli import main
    from hiera.errors import CollectionChangedError
    from hiera.retrieve.base import BaseRetriever

    by_dir = HieraRetriever(source=col_copy, method="dhr", k=3)
    pinned = HieraRetriever(source=open_collection(col_copy), method="dhr", k=3)
    q = helpers.TOPIC_QUERIES["jazz"]
    before = by_dir.invoke(q)
    assert main(["build", str(col_copy), "--set", "dhr.lam=0.1", "-q"]) == 0
    after = by_dir.invoke(q)
    cli = get_retriever("dhr", open_collection(col_copy)).search(q, k=3)
    assert cli.params["lam"] == 0.1
    assert [d.metadata["score"] for d in after] == pytest.approx([h.score for h in cli.hits], abs=1e-6)
    assert [d.metadata["score"] for d in after] != pytest.approx([d.metadata["score"] for d in before], abs=1e-6)

    real, calls = BaseRetriever.batch_search, []

    def removed_midway(self, *args, **kwargs):
        calls.append(self.col.build_dir)
        if len(calls) == 1:
            raise CollectionChangedError("removed while it ran")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(BaseRetriever, "batch_search", removed_midway)
    assert [d.id for d in by_dir.invoke(q)] == [d.id for d in after] and len(calls) == 2
    with pytest.raises(CollectionChangedError):  # an opened collection is a snapshot: it says so
        calls.clear()
        pinned.invoke(q)
