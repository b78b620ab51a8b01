"""Duplicates across sources: merged into one document by default, kept or skipped on request; ids stay valid."""

from __future__ import annotations

import json
from pathlib import Path

import helpers
import numpy as np
import pytest

from hiera.cli import main
from hiera.corpus.dedup import REDUNDANT, Part, compose, title_key
from hiera.corpus.ingest import ingest
from hiera.corpus.readers.base import Redirect
from hiera.corpus.split import split_document
from hiera.corpus.store import CorpusStore
from hiera.corpus.tree import Document, Section
from hiera.errors import BadInputError, BadRecordError

LEAD = ("Nikola Tesla was a Serbian-American inventor and electrical engineer best known for his contributions "
        "to the design of the modern alternating current electricity supply system.")
NOVEL = "Tesla kept pigeons in his hotel room in New York and fed them every day in the park near the library."


def _first() -> Document:
    return Document(
        id="tesla", title="Nikola Tesla", lead=[LEAD],
        sections=[Section("Early years", paragraphs=["He was born in 1856 in the village of Smiljan in the Austrian Empire."]),
                  Section("Inventions", paragraphs=["The induction motor and the Tesla coil are among his inventions."])],
        categories=["Inventors"], metadata={"source": "first"},
    )


def _second(lead: list[str] | None = None) -> Document:
    return Document(
        id="Nikola_Tesla", title="Nikola_Tesla", lead=lead if lead is not None else [LEAD, NOVEL],
        sections=[Section("Legacy", paragraphs=["The SI unit of magnetic flux density, the tesla, is named after him."])],
        categories=["Engineers"],
    )


def _jsonl(path: Path, *docs: Document) -> Path:
    return helpers.write_jsonl(path, list(docs))


def _passages(root: Path) -> dict[str, tuple[tuple[str, ...], str]]:
    store = CorpusStore(root)
    out = {p.id: (p.section_path, p.text) for _, p in store.iter_passages()}
    store.close()
    return out


def test_title_key_follows_wikipedia_titles() -> None:
    assert title_key("Nikola_Tesla") == title_key("nikola  Tesla") == "Nikola Tesla"
    assert title_key("Red dwarf") != title_key("Red Dwarf")  # only the first letter's case is folded


def test_a_second_source_is_merged_into_the_first_documents_id(tmp_path: Path) -> None:
    root = tmp_path / "c"
    alone = tmp_path / "alone"
    ingest([_jsonl(tmp_path / "a.jsonl", _first())], "hiera-jsonl", alone, progress=False)
    ingest([_jsonl(tmp_path / "a.jsonl", _first())], "hiera-jsonl", root, progress=False)
    rep = ingest([_jsonl(tmp_path / "b.jsonl", _second())], "hiera-jsonl", root, progress=False)
    assert (rep.documents, rep.merged, rep.new_doc_ids) == (0, 1, [])

    store = CorpusStore(root)
    stats = store.stats()
    assert (stats["documents"], stats["merged"], stats["version"]) == (1, 1, 2)
    doc = store.get_document("Nikola_Tesla")  # the merged-away id still resolves, to the first source's document
    assert doc is not None and doc.id == "tesla" and doc.title == "Nikola Tesla"
    assert store.canonical_id("Nikola_Tesla") == "tesla" and store.resolve_title("Nikola_Tesla") == "tesla"
    assert [s.title for s in doc.sections] == ["Early years", "Inventions", "From b.jsonl"]
    added = doc.sections[-1]
    assert added.paragraphs == [NOVEL]  # the repeated lead paragraph is not indexed twice
    assert [(c.title, c.level) for c in added.children] == [("Legacy", 2)]
    assert doc.categories == ["Inventors", "Engineers"]
    sources = doc.metadata["sources"]
    assert [(s["id"], s["paragraphs_kept"], s["paragraphs_dropped"]) for s in sources] == [
        ("tesla", 3, 0), ("Nikola_Tesla", 2, 1)]
    assert sources[1]["origin"].endswith("b.jsonl") and sources[0]["source"] == "first"

    before, after = _passages(alone), _passages(root)
    assert all(after[pid] == v for pid, v in before.items())  # the first source's passage ids did not move
    texts = [t for _, t in after.values()]
    assert sum(LEAD in t for t in texts) == 1 and any(NOVEL in t for t in texts)
    assert len(after) == len(before) + 2


@pytest.mark.parametrize("mode, docs, kept", [("keep", 2, 2), ("skip", 1, 1)])
def test_keep_and_skip(tmp_path: Path, mode: str, docs: int, kept: int) -> None:
    root = tmp_path / "c"
    ingest([_jsonl(tmp_path / "a.jsonl", _first())], "hiera-jsonl", root, progress=False)
    rep = ingest([_jsonl(tmp_path / "b.jsonl", _second())], "hiera-jsonl", root, progress=False, duplicates=mode)
    assert (rep.merged, rep.duplicates) == (0, 1 if mode == "skip" else 0)
    store = CorpusStore(root)
    assert store.stats()["documents"] == docs and store.stats()["merged"] == 0
    assert (store.get_document("Nikola_Tesla") is not None) == (mode == "keep")
    assert store.get_document("tesla").sections[-1].title == "Inventions"


def test_one_sources_own_documents_are_never_merged(tmp_path: Path) -> None:
    root = tmp_path / "c"
    ingest([_jsonl(tmp_path / "a.jsonl", _first(), _second())], "hiera-jsonl", root, progress=False)
    assert CorpusStore(root).stats()["documents"] == 2


def test_redirects_find_duplicates_in_either_order(tmp_path: Path) -> None:
    amoeba = Document(id="amoeba", title="Amoeba", lead=["An amoeba is a single-celled organism that moves with pseudopods."])
    taxa = Document(id="taxa", title="AmoeboidTaxa", lead=["Amoeboid taxa crawl by extending temporary arm-like projections."])
    redirect = Redirect("AmoeboidTaxa", "Amoeba")
    # the redirect known before the duplicate arrives
    a = CorpusStore(tmp_path / "a", create=True)
    a.ingest([amoeba, redirect], source="dump")
    rep = a.ingest([taxa], source="other")
    assert rep.merged == 1 and a.stats()["documents"] == 1 and a.canonical_id("taxa") == "amoeba"
    # the duplicate first, then a source whose redirect arrives before its document
    b = CorpusStore(tmp_path / "b", create=True)
    b.ingest([taxa], source="other")
    rep = b.ingest([redirect, amoeba], source="dump")
    assert rep.merged == 1 and b.stats()["documents"] == 1 and b.canonical_id("amoeba") == "taxa"
    # ... and after its document: both are stored when the redirect shows they are one
    c = CorpusStore(tmp_path / "c", create=True)
    c.ingest([taxa], source="other")
    rep = c.ingest([amoeba, redirect], source="dump")
    assert (rep.merged, rep.documents, rep.new_doc_ids) == (1, 0, [])
    assert c.stats()["documents"] == 1 and c.canonical_id("amoeba") == "taxa"
    merged = c.get_document("amoeba")
    assert merged.sections[-1].title == "From dump" and merged.sections[-1].paragraphs == amoeba.lead


def test_reingesting_a_part_recomposes_the_merged_document(tmp_path: Path) -> None:
    root = tmp_path / "c"
    a, b = _jsonl(tmp_path / "a.jsonl", _first()), _jsonl(tmp_path / "b.jsonl", _second())
    ingest([a], "hiera-jsonl", root, progress=False)
    ingest([b], "hiera-jsonl", root, progress=False)
    changed = "Tesla worked for Thomas Edison in New York before founding his own laboratory on Houston Street."
    ingest([_jsonl(tmp_path / "b.jsonl", _second([LEAD, changed]))], "hiera-jsonl", root, progress=False)
    ingest([a], "hiera-jsonl", root, progress=False)  # the first source again: the second's text stays
    store = CorpusStore(root)
    assert (store.stats()["documents"], store.stats()["merged"]) == (1, 1)
    texts = " ".join(t for _, t in _passages(root).values())
    assert changed in texts and NOVEL not in texts


def test_a_failed_merging_ingest_changes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "c"
    ingest([_jsonl(tmp_path / "a.jsonl", _first())], "hiera-jsonl", root, progress=False)
    digest = helpers.export_digest(root)
    bad = tmp_path / "b.jsonl"
    bad.write_text(json.dumps(_second().to_dict()) + "\n{broken\n", encoding="utf-8")
    with pytest.raises(BadRecordError):
        ingest([bad], "hiera-jsonl", root, progress=False)
    assert helpers.export_digest(root) == digest and CorpusStore(root).stats()["merged"] == 0
    with pytest.raises(BadInputError, match="--duplicates"):
        ingest([bad], "hiera-jsonl", root, progress=False, duplicates="fold")


def test_compose_drops_only_redundant_paragraphs() -> None:
    half = " ".join(LEAD.split()[: len(LEAD.split()) // 3]) + " and then many other words follow here today"
    merged = compose([Part("tesla", "", _first()), Part("x", "x.jsonl", _second([half, LEAD]))])
    kept = merged.sections[-1].paragraphs
    assert LEAD not in kept and (half in kept) == (REDUNDANT > 0.3)
    assert merged.aliases == ["Nikola_Tesla"]


def test_replaced_and_merged_documents_never_reuse_row_ids(tmp_path: Path) -> None:
    """The build copies a vector by row id: a rewritten document's rows must be new ones (SQLite reuses the top id)."""
    store = CorpusStore(tmp_path / "c", create=True)
    store.ingest(helpers.make_docs())
    top = max(r for r, _ in store.iter_passages())
    last = helpers.make_docs()[-1]
    last.lead = ["Quokkas are small marsupials that live on Rottnest Island near Perth."]
    store.ingest([last])
    rows = [r for r, p in store.iter_passages([last.id])]
    assert min(rows) > top and len(rows) == len(split_document(last))


def test_hiera_add_merges_into_an_indexed_document(shared_root: Path, tmp_path: Path, capsys) -> None:
    """``hiera add`` of an article the collection holds: one document, reindexed with the new text's vector."""
    from hiera.builds import open_collection
    from hiera.retrieve import get_retriever

    col_dir = helpers.copy_collection(shared_root, tmp_path / "col")
    novel = "The Sicilian Defence is the most popular reply to the king's pawn opening in tournament chess."
    dup = Document(id="chess-2", title="chess", lead=[novel])
    replaced = helpers.make_docs()[-1]  # the last document: its rows had the largest row ids
    replaced.lead = ["Quokkas are small marsupials that live on Rottnest Island near Perth."]
    src = helpers.write_jsonl(tmp_path / "more.jsonl", [dup, replaced])
    assert main(["add", str(col_dir), str(src), "--format", "hiera-jsonl", "-q"]) == 0
    assert "merged 1 documents" in capsys.readouterr().err
    assert main(["stats", str(col_dir), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert (stats["documents"], stats["merged"], stats["index"]["stale"]) == (6, 1, False)
    assert main(["check", str(col_dir), "--quick"]) == 0
    capsys.readouterr()

    col = open_collection(col_dir)
    hit = get_retriever("dense", col).search(novel, k=1)[0]
    assert (hit.doc_id, hit.section_path, hit.text) == ("chess", ("From more.jsonl",), novel)
    enc = col.passage_encoder
    for text, doc_id in ((novel, "chess"), (replaced.lead[0], replaced.id)):
        row = next(r for r, p in col.store.iter_passages([doc_id]) if p.text == text)
        i = int(np.flatnonzero(col.passage_rows == row)[0])
        titled = next(p for r, p in col.store.iter_passages([doc_id]) if r == row).titled_text(col.store.title_sep)
        expected = enc.encode_document([titled])[0]
        assert float(np.dot(col.passage_vectors[i].astype(np.float32), expected)) > 0.99


def test_eval_finds_a_merged_away_gold_document(tmp_path: Path) -> None:
    """A question whose gold id is a document merged into another still counts, as that document."""
    from hiera.builds import open_collection
    from hiera.eval.questions import Question
    from hiera.eval.run import evaluate_retriever
    from hiera.index.build import BuildOptions, build

    root = tmp_path / "c"
    ingest([_jsonl(tmp_path / "a.jsonl", _first(), *helpers.make_docs()[:2])], "hiera-jsonl", root, progress=False)
    ingest([_jsonl(tmp_path / "b.jsonl", _second())], "hiera-jsonl", root, progress=False)
    build(root, BuildOptions(dense=False, progress=False), log=helpers.QUIET)
    q = Question("q", "Which unit of magnetic flux density is named after Tesla?", ["tesla"], gold_docs={"Nikola_Tesla"})
    run = evaluate_retriever(open_collection(root), "bm25", [q], [1], latency_sample=0, progress=False)
    assert run.metrics["doc_top1"] == 1.0


def test_check_reports_parts_of_a_missing_document(tmp_path: Path, capsys) -> None:
    import sqlite3

    root = tmp_path / "c"
    ingest([_jsonl(tmp_path / "a.jsonl", _first())], "hiera-jsonl", root, progress=False)
    ingest([_jsonl(tmp_path / "b.jsonl", _second())], "hiera-jsonl", root, progress=False)
    assert main(["check", str(root)]) == 0  # merged, no index yet: a warning, no error
    out = capsys.readouterr().out
    assert "store: integrity_check ok; 1 documents" in out and "merged documents" not in out
    with sqlite3.connect(root / "corpus.sqlite") as conn:
        conn.execute("DELETE FROM passages WHERE doc_id='tesla'")
        conn.execute("DELETE FROM documents WHERE id='tesla'")
    assert main(["check", str(root)]) == 1
    assert "2 parts of merged documents belong to no document" in capsys.readouterr().out


def test_ingest_command_line(tmp_path: Path, capsys) -> None:
    root = str(tmp_path / "c")
    a, b = _jsonl(tmp_path / "a.jsonl", _first()), _jsonl(tmp_path / "b.jsonl", _second())
    assert main(["ingest", str(a), "--format", "hiera-jsonl", "--index", root, "-q"]) == 0
    assert main(["ingest", str(b), "--format", "hiera-jsonl", "--index", root, "-q", "--duplicates", "skip"]) == 0
    assert "skipped 1 documents another source already held" in capsys.readouterr().err
    assert main(["ingest", str(b), "--format", "hiera-jsonl", "--index", root, "-q"]) == 0
    assert "merged 1 documents into the one another source already held" in capsys.readouterr().err
    assert main(["stats", root, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["merged"] == 1
    with pytest.raises(SystemExit):
        main(["ingest", str(b), "--format", "hiera-jsonl", "--index", root, "--duplicates", "fold"])


def test_a_documents_own_aliases_resolve_to_it_and_find_its_duplicates(tmp_path: Path) -> None:
    """hiera-jsonl's ``aliases`` are the document's redirects: they resolve to it, and a later source's document
    under one of those names is the same document (merged), as through a stored redirect."""
    root = tmp_path / "c"
    first = Document(id="anarchism", title="Anarchism", lead=["Anarchism is a political philosophy."],
                     aliases=["Anarchist", "Anarchy (philosophy)"])
    ingest([_jsonl(tmp_path / "a.jsonl", first)], "hiera-jsonl", root, progress=False)
    store = CorpusStore(root)
    assert store.stats()["aliases"] == 2
    assert store.resolve_title("Anarchist") == "anarchism" and store.resolve_title("anarchy_(philosophy)") == "anarchism"
    assert store.find_document("Anarchist").id == "anarchism"
    store.close()
    later = Document(id="Anarchist", title="Anarchist", lead=["Anarchists reject involuntary hierarchy."])
    rep = ingest([_jsonl(tmp_path / "b.jsonl", later)], "hiera-jsonl", root, progress=False)
    assert (rep.documents, rep.merged) == (0, 1)
    assert CorpusStore(root).canonical_id("Anarchist") == "anarchism"


@pytest.mark.parametrize("renamed", ["second", "first"])
def test_a_part_renamed_away_leaves_the_merged_document(tmp_path: Path, renamed: str) -> None:
    """A merged part re-ingested under a title that no longer names the article becomes its own document: its text
    does not stay under the other source's article, its title resolves to it alone, and removing it by that title
    leaves the other source's document whole."""
    root = tmp_path / "c"
    first, second = _first(), _second()
    ingest([_jsonl(tmp_path / "a.jsonl", first)], "hiera-jsonl", root, progress=False)
    ingest([_jsonl(tmp_path / "b.jsonl", second)], "hiera-jsonl", root, progress=False)
    store = CorpusStore(root)
    assert (store.stats()["documents"], store.stats()["merged"]) == (1, 1)
    store.close()
    text = "Snarfblatt widgets are assembled in Oslo by a cooperative of clockmakers."
    moved = first if renamed == "first" else second
    stays = second if renamed == "first" else first
    new = Document(id=moved.id, title="Snarfblatt widgets", lead=[text], metadata=dict(moved.metadata))
    ingest([_jsonl(tmp_path / "c.jsonl", new)], "hiera-jsonl", root, progress=False)
    store = CorpusStore(root)
    assert (store.stats()["documents"], store.stats()["merged"]) == (2, 0)
    assert store.resolve_title("Snarfblatt widgets") == moved.id
    assert store.canonical_id(stays.id) == stays.id
    kept = store.get_document(stays.id)
    assert kept is not None and "Snarfblatt" not in kept.text() and "Snarfblatt widgets" not in kept.aliases
    assert text in " ".join(p.text for _, p in store.iter_passages([moved.id]))
    removed = store.remove([store.resolve_title("Snarfblatt widgets")])
    assert removed.documents == 1
    after = store.get_document(stays.id)
    assert after is not None and [p for _, p in store.iter_passages([stays.id])]
    store.close()


@pytest.mark.parametrize("source", ["second", "first"])
def test_removing_a_source_keeps_the_other_sources_parts(tmp_path: Path, source: str) -> None:
    """``remove --source S`` takes what S contributed: its own documents whole, and its parts of documents merged
    with another source's, which are composed again from what remains (under their first remaining part's id)."""
    root = tmp_path / "c"
    first = _first()
    only_first = Document(id="lone1", title="Lone first", lead=["Only the first source has this."],
                          metadata={"source": "first"})
    second = _second()
    second.metadata = {"source": "second"}
    only_second = Document(id="lone2", title="Lone second", lead=["Only the second source has this."],
                           metadata={"source": "second"})
    ingest([_jsonl(tmp_path / "a.jsonl", first, only_first)], "hiera-jsonl", root, progress=False)
    ingest([_jsonl(tmp_path / "b.jsonl", second, only_second)], "hiera-jsonl", root, progress=False)
    store = CorpusStore(root)
    assert (store.stats()["documents"], store.stats()["merged"]) == (3, 1)
    report = store.remove([], source=source, of_source=["tesla", "lone1" if source == "first" else "lone2"])
    assert (report.documents, report.parts) == (1, 1)
    assert store.stats()["documents"] == 2 and store.stats()["merged"] == 0
    kept_id, gone_text, kept_text = (("tesla", NOVEL, LEAD) if source == "second"
                                     else ("Nikola_Tesla", "Smiljan", NOVEL))
    assert store.canonical_id("tesla" if source == "second" else "Nikola_Tesla") == kept_id
    texts = " ".join(p.text for _, p in store.iter_passages([kept_id]))
    assert kept_text in texts and gone_text not in texts
    assert [s["source"] for s in store.get_document(kept_id).metadata.get("sources", [])] in ([], [
        "first" if source == "second" else "second"])
    store.close()
