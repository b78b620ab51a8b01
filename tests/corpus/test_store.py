"""The corpus store: insert/replace semantics, statistics, rollback, look-ups."""

from __future__ import annotations

import copy
from pathlib import Path

import helpers
import pytest

from hiera.corpus.readers.base import Redirect
from hiera.corpus.split import split_document
from hiera.corpus.store import STORE_FILE, CorpusStore
from hiera.corpus.tree import Document, PassageRules, Section
from hiera.errors import BadRecordError, IndexMissingError, ManifestMismatchError

STATS_KEYS = {"documents", "merged", "sections", "passages", "max_passage_words", "aliases", "version"}


@pytest.fixture
def store(tmp_path: Path) -> CorpusStore:
    s = CorpusStore(tmp_path / "col", create=True)
    s.ingest(helpers.make_docs())
    yield s
    s.close()


def test_stats_count_what_was_ingested(store: CorpusStore) -> None:
    docs = helpers.make_docs()
    stats = store.stats()
    assert set(stats) == STATS_KEYS
    passages = [p for d in docs for p in split_document(d)]
    assert stats["documents"] == len(docs) == 6
    assert stats["sections"] == sum(d.section_count() for d in docs)
    assert stats["passages"] == len(passages)
    assert stats["max_passage_words"] == max(len(p.text.split()) for p in passages)
    assert stats["aliases"] == 0 and stats["merged"] == 0
    assert stats["version"] == 1
    assert store.rules == PassageRules()


def test_stats_follow_every_write_even_from_another_handle(store: CorpusStore) -> None:
    """Statistics are computed once per corpus version; a write by anyone is seen on the next call."""
    first = store.stats()
    assert store.stats() == first  # the cached answer
    other = CorpusStore(store.root)  # e.g. `hiera ingest` while a server holds its own handle
    extra = Document(id="zz", title="Zebra", lead=["Zebras are striped horses of Africa. " * 3])
    other.ingest([extra])
    other.close()
    now = store.stats()
    assert now["documents"] == first["documents"] + 1 and now["version"] == first["version"] + 1
    assert now["passages"] > first["passages"]


def test_empty_store_stats(tmp_path: Path) -> None:
    s = CorpusStore(tmp_path / "new", create=True)
    assert s.stats() == {k: 0 for k in STATS_KEYS}
    assert (tmp_path / "new" / STORE_FILE).is_file()


def test_opening_a_non_collection_fails_clearly(tmp_path: Path) -> None:
    with pytest.raises(IndexMissingError, match="not a hiera collection"):
        CorpusStore(tmp_path / "nowhere")
    assert not (tmp_path / "nowhere").exists()


def test_documents_round_trip(store: CorpusStore) -> None:
    for doc in helpers.make_docs():
        assert store.get_document(doc.id) == doc
    assert store.get_document("missing") is None


def test_reingest_same_id_replaces_the_document(store: CorpusStore) -> None:
    before = store.stats()
    old = store.get_document("chess")
    new = copy.deepcopy(old)
    new.lead = ["Chess is now described by an entirely different lead paragraph about grandmasters."]
    new.sections[1].paragraphs = ["Rewritten history section."]
    report = store.ingest([new])
    assert (report.documents, report.replaced, report.new_doc_ids) == (1, 1, [])

    after = store.stats()
    assert {k: after[k] for k in ("documents", "sections", "passages")} == {
        k: before[k] for k in ("documents", "sections", "passages")
    }
    assert after["version"] == before["version"] + 1
    assert store.get_document("chess") == new
    texts = [p.text for _, p in store.iter_passages(["chess"])]
    assert texts == [p.text for p in split_document(new)]
    assert "Rewritten history section." in texts
    assert not any("sixty-four squares" in t for t in texts)
    summary = next(store.iter_docs(["chess"])).summary
    assert "grandmasters" in summary and "sixty-four" not in summary


def test_replacing_with_fewer_passages_leaves_no_orphans(store: CorpusStore) -> None:
    before = store.stats()
    old_n = len(list(store.iter_passages(["volcanoes"])))
    store.ingest([Document(id="volcanoes", title="Volcanoes", lead=["Short now."])])
    after = store.stats()
    assert after["documents"] == before["documents"]
    assert after["passages"] == before["passages"] - old_n + 1
    assert after["sections"] == before["sections"] - helpers.make_docs()[0].section_count()
    n_rows = store._conn().execute("SELECT COUNT(*) FROM passages WHERE doc_id='volcanoes'").fetchone()[0]
    assert n_rows == 1


def test_new_documents_are_reported_and_appended_in_order(store: CorpusStore) -> None:
    report = store.ingest(helpers.make_extra_docs())
    assert report.new_doc_ids == ["honeybees", "lighthouses"]
    assert report.replaced == 0
    ids = [d.id for d in store.iter_docs()]
    assert ids[-2:] == ["honeybees", "lighthouses"]
    rowids = [d.rowid for d in store.iter_docs()]
    assert rowids == sorted(rowids)


def test_an_exception_mid_ingest_rolls_everything_back(store: CorpusStore) -> None:
    before = store.stats()
    digest = helpers.export_digest(store.root)

    def records():
        yield helpers.make_extra_docs()[0]
        yield Document(id="chess", title="Chess", lead=["Replaced."])
        raise BadRecordError("src.jsonl", "line 3", "boom")

    with pytest.raises(BadRecordError, match="src.jsonl: line 3: boom"):
        store.ingest(records())
    assert store.stats() == before
    assert helpers.export_digest(store.root) == digest
    # the store is still writable afterwards
    store.ingest([helpers.make_extra_docs()[1]])
    assert store.stats()["documents"] == before["documents"] + 1


def test_a_bad_document_goes_through_on_bad(store: CorpusStore) -> None:
    seen: list[BadRecordError] = []
    report = store.ingest(
        [Document(id="", title="No id"), helpers.make_extra_docs()[0]], on_bad=seen.append, source="mem"
    )
    assert report.skipped == 1 and report.documents == 1
    assert len(seen) == 1 and seen[0].path == "mem"
    before = store.stats()
    with pytest.raises(BadRecordError):
        store.ingest([Document(id="x", title="   ")])
    assert store.stats() == before


def test_other_passage_rules_are_refused(store: CorpusStore) -> None:
    with pytest.raises(ManifestMismatchError, match="passage rules"):
        store.ingest(helpers.make_extra_docs(), rules=PassageRules(max_words=50))
    store.ingest(helpers.make_extra_docs(), rules=PassageRules())  # the same rules are fine


def test_rules_of_the_first_ingest_are_used(tmp_path: Path) -> None:
    s = CorpusStore(tmp_path / "c", create=True)
    rules = PassageRules(max_words=10, title_sep=" | ")
    s.ingest(helpers.make_docs()[:1], rules=rules)
    assert s.rules == rules
    s.ingest(helpers.make_docs()[1:2])  # no rules given: the stored ones apply
    assert s.stats()["max_passage_words"] <= 10


def test_passage_lookups_agree(store: CorpusStore) -> None:
    rows = list(store.iter_passages())
    # grouped by document in document row order, passages in order
    doc_order = [d.id for d in store.iter_docs()]
    seen_docs = list(dict.fromkeys(p.doc_id for _, p in rows))
    assert seen_docs == doc_order
    for d in doc_order:
        orders = [p.order for _, p in rows if p.doc_id == d]
        assert orders == list(range(len(orders)))
    by_row = store.passages_by_rowid([r for r, _ in rows[::3]])
    assert by_row == {r: p for r, p in rows[::3]}
    docs = store.docs_by_rowid([d.rowid for d in store.iter_docs()])
    assert sorted(d.id for d in docs.values()) == sorted(doc_order)
    # section paths come back as tuples
    assert all(isinstance(p.section_path, tuple) for _, p in rows)
    assert any(p.section_path == ("Types of volcanoes", "Shield volcanoes") for _, p in rows)


def test_fulltext_and_aliases(store: CorpusStore) -> None:
    text = store.doc_fulltext("jazz")
    assert text.startswith("Jazz\n")
    assert "Charlie Parker" in text
    store.ingest([Redirect(alias="Jazz music", target="Jazz")])
    assert store.stats()["aliases"] == 1
    assert store.resolve_title("Jazz music") == "jazz"
    assert store.resolve_title("Jazz") == "jazz"
    assert store.resolve_title("Blues") is None


def test_find_document_takes_an_id_a_title_or_a_redirect(store: CorpusStore) -> None:
    store.ingest([Redirect(alias="Jazz music", target="Jazz")])
    for key in ("jazz", "Jazz", "Jazz music"):
        found = store.find_document(key)
        assert found is not None and found.id == "jazz", key
    assert store.find_document("Blues") is None


def test_titles_resolve_as_wikipedia_compares_them(store: CorpusStore) -> None:
    """Underscores are spaces and the first letter's case does not count; other letters' case does."""
    store.ingest([Redirect(alias="Jazz music", target="Jazz")])
    for typed, want in [("python_(programming_language)", "python-language"), ("Roman_Empire", "roman-empire"),
                        ("roman  Empire", "roman-empire"), ("jazz_music", "jazz"), ("chess", "chess")]:
        assert store.resolve_title(typed) == want, typed
    assert store.resolve_title("Roman empire") is None and store.resolve_title("Roman_Empires") is None
    with store._conn() as conn:  # a store written before the title-key table: the same answers, by one pass
        conn.execute("DROP TABLE title_keys")
    assert store.resolve_title("roman_Empire") == "roman-empire" and store.resolve_title("Roman empire") is None


def test_nested_sections_are_counted(tmp_path: Path) -> None:
    s = CorpusStore(tmp_path / "c", create=True)
    doc = Document(
        id="n", title="N", sections=[Section("A", children=[Section("B", level=2, children=[Section("C", level=3)])])]
    )
    s.ingest([doc])
    assert s.stats()["sections"] == 3
    assert s.stats()["passages"] == 0
