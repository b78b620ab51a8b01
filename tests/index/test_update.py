"""A collection changed without a rebuild: tombstones and a delta segment, against a fresh build of the same store.

Every change here is applied with ``compact_at=1`` (the six-document
collection would otherwise cross the compaction threshold at once), so the
build under test really is base + tombstones + delta; the reference is the
same store built from scratch in another directory.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import helpers
import numpy as np
import pytest

from hiera.builds import build_collection, open_collection, remove_documents, update_collection
from hiera.corpus.ingest import ingest
from hiera.corpus.store import CorpusStore
from hiera.encode import DEFAULT_MODEL
from hiera.errors import BadInputError
from hiera.index.build import BuildOptions
from hiera.index.publish import live_build_dir
from hiera.retrieve import get_retriever
from hiera.spec import METHODS

QUERIES = ["magma chamber eruption", "chess openings and endgames", "jazz improvisation musicians",
           "light energy in plants", "roman emperors and the senate", "python programming language syntax",
           "volcano", "history"]
# every registry method that needs no trained model beyond the encoders (linking's spaCy is installed)
METHOD_NAMES = [m for m in METHODS if m not in ("linked",)]


def _change(root: Path) -> tuple[str, str]:
    """Remove one document, replace another with one section changed, add two: one transaction each."""
    remove_documents(root, ["volcanoes"], log=helpers.QUIET, compact_at=1.0, progress=False)
    chess = next(d for d in helpers.make_docs() if d.id == "chess")
    chess.sections[0].paragraphs = [*chess.sections[0].paragraphs, "Grandmasters memorise long opening lines."]
    src = helpers.write_jsonl(root.parent / "changed.jsonl", [chess, *helpers.make_extra_docs()])
    ingest([src], "hiera-jsonl", root, progress=False,
           before_commit=lambda st: update_collection(root, st, log=helpers.QUIET, compact_at=1.0, progress=False))
    return "volcanoes", "chess"


def _fresh(root: Path, dst: Path) -> Path:
    """The same store built from scratch (the reference a changed build is held to)."""
    shutil.copytree(root, dst, symlinks=True)
    build_collection(dst, _options(root), log=helpers.QUIET)
    return dst


def _options(root: Path) -> BuildOptions:
    opts = BuildOptions.from_manifest(open_collection(root).manifest)
    opts.progress = False
    return opts


def _lists(col, method: str, level: str | None = None) -> list[list[tuple[str, str | None]]]:
    r = get_retriever(method, col)
    return [[(h.doc_id, h.passage_id) for h in res.hits] for res in r.batch_search(QUERIES, k=10, level=level)]


@pytest.fixture(scope="module")
def changed(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("update")
    root = helpers.build_collection(tmp / "col", helpers.make_docs(), BuildOptions(progress=False))
    before_version = CorpusStore(root).version
    first_names_inode = (live_build_dir(root) / "names" / "keys.bin").stat().st_ino
    removed, replaced = _change(root)
    fresh = _fresh(root, tmp / "fresh")
    return {"root": root, "fresh": fresh, "removed": removed, "replaced": replaced, "before": before_version,
            "first_names_inode": first_names_inode}


def test_a_change_is_a_segment_not_a_rebuild(changed: dict) -> None:
    col = open_collection(changed["root"])
    up = col.manifest.updates
    assert up["generation"] == 2 and up["base"]["documents"] == 6
    assert up["dead"] == {"documents": 2, "passages": up["dead"]["passages"], "deleted": 1, "superseded": 1}
    assert up["delta"]["documents"] == 3  # the replaced document and the two new ones
    assert col.live is not None and col.live.n_docs == col.n_docs - 2
    # the base's index files are the previous build's, hard-linked: one inode, two names
    base = col.build_dir / "dense" / "passages.f16.npy"
    assert base.stat().st_nlink >= 1 and (col.build_dir / "delta" / "dense" / "passages.f16.npy").exists()
    assert len(col.passage_vectors) == col.n_passages == len(col.passage_rows)


@pytest.mark.parametrize("method", METHOD_NAMES)
def test_no_method_returns_a_dead_row(changed: dict, method: str) -> None:
    """Removed and superseded documents are masked everywhere; the replaced document is found in its new text."""
    col = open_collection(changed["root"])
    dead_rows = set(col.doc_rows[col.dead_docs].tolist())
    live_passages = {p.id for _, p in col.iter_passages()}
    for level in METHODS[method].levels:
        for hits in _lists(col, method, level):
            assert changed["removed"] not in {d for d, _ in hits}
            for _, pid in hits:
                assert pid is None or pid in live_passages  # a superseded passage id is not in the store any more
    assert not dead_rows & set(col.store.doc_rowids())


def test_dense_exact_equals_a_fresh_build(changed: dict) -> None:
    """Flat dense search on base + delta under the tombstones is the fresh build's, list for list."""
    col, fresh = open_collection(changed["root"]), open_collection(changed["fresh"])
    for level in ("passage", "doc"):
        assert _lists(col, "dense", level) == _lists(fresh, "dense", level)


def test_torch_exact_search_agrees_with_faiss_on_a_changed_build(changed: dict) -> None:
    faiss_col = open_collection(changed["root"])
    exact = open_collection(changed["root"], dense_search="exact", device="cpu")
    for method in ("dense", "dhr"):
        assert _lists(exact, method) == _lists(faiss_col, method)


def test_delta_bm25_scores_are_the_fresh_builds_when_nothing_died(tmp_path: Path) -> None:
    """Added documents only: the delta is scored with base + delta statistics, exactly those of a fresh build."""
    root = helpers.build_collection(tmp_path / "col", helpers.make_docs(), BuildOptions(dense=False, progress=False))
    src = helpers.write_jsonl(tmp_path / "extra.jsonl", helpers.make_extra_docs())
    ingest([src], "hiera-jsonl", root, progress=False,
           before_commit=lambda st: update_collection(root, st, log=helpers.QUIET, compact_at=1.0, progress=False))
    col = open_collection(root)
    assert col.manifest.updates["delta"]["documents"] == len(helpers.make_extra_docs())
    fresh = open_collection(_fresh(root, tmp_path / "fresh"))
    start = col.manifest.updates["base"]["passages"]
    delta = np.arange(start, col.n_passages)
    ids = [p.id for p in col.passages_at(delta)]
    where = {p.id: i for i, (_, p) in enumerate(fresh.iter_passages())}
    at_fresh = np.array([where[i] for i in ids])
    for q in QUERIES:
        np.testing.assert_allclose(col.bm25_passages.scores_at(q, delta), fresh.bm25_passages.scores_at(q, at_fresh),
                                   rtol=1e-6)


def test_compaction_gives_the_fresh_build_for_every_method(changed: dict, tmp_path: Path) -> None:
    root = helpers.copy_collection(changed["root"], tmp_path / "col")
    build_collection(root, _options(root), log=helpers.QUIET)  # compaction: the build rewritten, vectors reused
    col, fresh = open_collection(root), open_collection(changed["fresh"])
    assert not col.manifest.updates and col.live is None and not (col.build_dir / "tombstones.npy").exists()
    # the build keeps its identity: the encoders are still named as the build named them, not by their directory
    assert {lv: m["name"] for lv, m in col.manifest.models.items()} == \
        {lv: m["name"] for lv, m in fresh.manifest.models.items()} == {"doc": DEFAULT_MODEL, "passage": DEFAULT_MODEL}
    for method in METHOD_NAMES:
        for level in METHODS[method].levels:
            assert _lists(col, method, level) == _lists(fresh, method, level), (method, level)
    size = sum(col.manifest.files.values())
    assert size <= sum(fresh.manifest.files.values())


def test_past_the_threshold_a_change_rewrites_the_build(tmp_path: Path) -> None:
    root = helpers.build_collection(tmp_path / "col", helpers.make_docs(), BuildOptions(dense=False, progress=False))
    remove_documents(root, ["volcanoes", "jazz"], log=helpers.QUIET, progress=False)  # a third of the passages
    col = open_collection(root)
    assert not col.manifest.updates and col.n_docs == 4 and col.live is None


def test_a_failed_update_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = helpers.build_collection(tmp_path / "col", helpers.make_docs(), BuildOptions(dense=False, progress=False))
    version, live = CorpusStore(root).version, live_build_dir(root)
    import hiera.index.update as update

    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(update, "write_segment", boom)
    with pytest.raises(Exception, match="space"):
        remove_documents(root, ["volcanoes"], log=helpers.QUIET, compact_at=1.0, progress=False)
    assert CorpusStore(root).version == version and live_build_dir(root) == live
    assert "volcanoes" in {d.id for d in open_collection(root).iter_docs()}


@pytest.mark.parametrize("ids, why", [(["nope"], "unknown document ids"), (
    [d.id for d in helpers.make_docs()], "every document")])
def test_bad_removals_are_refused_whole(tmp_path: Path, ids: list[str], why: str) -> None:
    root = helpers.build_collection(tmp_path / "col", helpers.make_docs(), BuildOptions(dense=False, progress=False))
    version = CorpusStore(root).version
    with pytest.raises(BadInputError, match=why):
        remove_documents(root, [*ids, "chess"], log=helpers.QUIET, progress=False)
    assert CorpusStore(root).version == version and len(list(CorpusStore(root).iter_docs())) == 6


def test_a_sharded_build_takes_removals_as_tombstones(tmp_path: Path) -> None:
    root = helpers.build_collection(tmp_path / "col", helpers.make_docs(), BuildOptions(progress=False, shards=2))
    remove_documents(root, ["volcanoes"], log=helpers.QUIET, compact_at=1.0, progress=False)
    col = open_collection(root)
    assert col.manifest.shards and col.manifest.updates["dead"]["documents"] == 1
    for method in ("bm25", "dense", "dhr", "hybrid"):
        assert all("volcanoes" not in {d for d, _ in hits} for hits in _lists(col, method))
    # new text on a sharded build: its own writer rebuilds it (every vector reused), no delta
    src = helpers.write_jsonl(tmp_path / "extra.jsonl", helpers.make_extra_docs())
    ingest([src], "hiera-jsonl", root, progress=False,
           before_commit=lambda st: update_collection(root, st, log=helpers.QUIET, compact_at=1.0, progress=False))
    col = open_collection(root)
    assert col.manifest.shards and not col.manifest.updates and col.n_docs == 5 + len(helpers.make_extra_docs())


def test_a_sharded_build_shrinks_below_its_shard_count(tmp_path: Path) -> None:
    """Removals leave fewer documents than shards: the rewrite makes one shard per document left, no refusal."""
    root = helpers.build_collection(tmp_path / "col", helpers.make_docs(), BuildOptions(progress=False, dense=False,
                                                                                       shards=4))
    said: list[str] = []
    remove_documents(root, ["volcanoes", "jazz", "chess", "python-language"], log=said.append, progress=False)
    col = open_collection(root)
    assert col.n_docs == 2 and len(col.manifest.shards) == 2 and not col.manifest.updates
    assert any("2 shards instead of the live build's 4" in line for line in said), said
    assert get_retriever("bm25", col).search("photosynthesis light", k=3).hits


def test_a_graph_index_base_with_a_delta(tmp_path: Path) -> None:
    """HNSW base + Flat delta: the delta's documents are found, the dead ones never."""
    opts = BuildOptions(progress=False, passage_factory="HNSW32", doc_factory="HNSW32")
    root = helpers.build_collection(tmp_path / "col", helpers.make_docs(), opts)
    _change(root)
    col = open_collection(root)
    assert col.faiss_types["passage"] == "HNSW32"
    found = {d for hits in _lists(col, "dense") for d, _ in hits}
    assert "volcanoes" not in found and {d.id for d in helpers.make_extra_docs()} & found


def test_filter_fields_count_only_live_documents(changed: dict) -> None:
    from hiera.index.filters import fields_of

    col = open_collection(changed["root"])
    fields = {f["field"]: f for f in fields_of(col)}
    live = sum(1 for _ in col.iter_docs())
    assert fields["id"]["count"] == fields["title"]["count"] == live < col.n_docs
    assert fields["section"]["count"] == col.live.n_passages


def test_a_removal_keeps_the_name_table_and_its_reader_masks_the_dead_names(tmp_path: Path) -> None:
    """A change without new text links the name table; no lookup (exact, fuzzy, BM25, dense) leads to a dead document."""
    from hiera.link.titles import TitleIndex
    from hiera.text import name_key

    root = helpers.build_collection(tmp_path / "col", helpers.make_docs(), BuildOptions(progress=False))
    before = open_collection(root).manifest.checksums["names/doc.npy"]
    remove_documents(root, ["volcanoes"], log=helpers.QUIET, compact_at=1.0, progress=False)
    col = open_collection(root)
    dead = int(col.dead_docs[0])
    titles = TitleIndex.from_collection(col)
    assert col.manifest.checksums["names/doc.npy"] == before and titles.table.rows_of(name_key("Volcanoes"))
    assert titles.exact("Volcanoes") == [] and titles.exact("Chess")
    qd = col.doc_encoder.encode_query("Volcanoes")
    for found in (titles.fuzzy("Volcanos"), titles.bm25("Volcanoes", k=10), titles.dense(col.doc_encoder, qd, k=10)):
        assert dead not in {m.doc for m in found}
    hits = get_retriever("linking", col).search("Where does the magma of Volcanoes come from?", k=10).hits
    assert "volcanoes" not in {h.doc_id for h in hits}


def _name_lookups(col) -> dict[str, list]:
    """Every live title looked up exactly and densely, as document ids (positions differ between builds)."""
    from hiera.link.titles import TitleIndex

    titles = TitleIndex.from_collection(col)
    ids = [d.id if d is not None else None for d in col.docs_by_position()]
    live = [d for d in col.docs_by_position() if d is not None and d.id in {x.id for x in col.iter_docs()}]
    out: dict[str, list] = {}
    for d in live:
        qd = col.doc_encoder.encode_query(d.title)
        out[d.title] = [sorted(ids[m.doc] for m in titles.exact(d.title)),
                        [ids[m.doc] for m in titles.dense(col.doc_encoder, qd, k=3)]]
    return out


def test_new_text_extends_the_name_table_with_a_delta_and_links_the_base(changed: dict) -> None:
    """A change that adds text writes names for the delta's documents only; lookups equal a fresh build's."""
    from hiera.check import check_collection
    from hiera.link.titles import TitleIndex

    col, fresh = open_collection(changed["root"]), open_collection(changed["fresh"])
    base_dir = col.build_dir
    assert col.manifest.updates["names"]["documents"] == col.manifest.updates["delta"]["documents"]
    assert (base_dir / "delta" / "names" / "doc.npy").exists()
    assert col.manifest.names["documents"] == col.manifest.updates["base"]["documents"]
    # the base table is the first build's, linked (the new build was written while the first one existed)
    assert (base_dir / "names" / "keys.bin").stat().st_ino == changed["first_names_inode"]
    assert _name_lookups(col) == _name_lookups(fresh)
    titles = TitleIndex.from_collection(col)
    honeybee = titles.bm25("Honeybee", k=1)
    assert honeybee and col.docs_by_position()[honeybee[0].doc].id == "honeybees"
    assert titles.exact("Volcanoes") == []  # removed: its base rows are masked
    findings = check_collection(changed["root"])
    assert any(f.check == "names" and "base and delta" in f.detail for f in findings)
    assert [f for f in findings if f.status == "error"] == []


def test_a_delta_whose_documents_have_no_name_key(tmp_path: Path) -> None:
    """New text whose title normalizes to nothing adds no name: lookups still answer from the base table."""
    from hiera.check import check_collection
    from hiera.corpus.tree import Document
    from hiera.link.titles import TitleIndex

    root = helpers.build_collection(tmp_path / "col", helpers.make_docs(), BuildOptions(progress=False))
    odd = Document(id="odd", title="!!!", lead=["Glaciers carve valleys as they slowly move downhill under ice."])
    src = helpers.write_jsonl(tmp_path / "odd.jsonl", [odd])
    ingest([src], "hiera-jsonl", root, progress=False,
           before_commit=lambda st: update_collection(root, st, log=helpers.QUIET, compact_at=1.0, progress=False))
    col = open_collection(root)
    assert col.manifest.updates["names"]["rows"] == 0 and col.manifest.updates["delta"]["documents"] == 1
    titles = TitleIndex.from_collection(col)
    ids = [d.id if d is not None else None for d in col.docs_by_position()]
    assert [ids[m.doc] for m in titles.exact("Chess")] == ["chess"]
    assert ids[titles.bm25("Chess", k=1)[0].doc] == "chess"
    assert ids[titles.dense(col.doc_encoder, col.doc_encoder.encode_query("Chess"), k=1)[0].doc] == "chess"
    assert [f for f in check_collection(root) if f.status == "error"] == []


def test_damaged_vectors_are_never_copied_into_a_new_build(tmp_path: Path) -> None:
    """A rebuild (what `hiera check` advises) takes nothing from a live build whose files fail their checksums,
    and an update refuses a live build whose files changed size, as searches do."""
    from hiera.errors import ManifestMismatchError

    root = helpers.build_collection(tmp_path / "col", helpers.make_docs(), BuildOptions(progress=False))
    remove_documents(root, ["volcanoes"], log=helpers.QUIET, compact_at=1.0, progress=False)  # a segmented build
    before = _lists(open_collection(root), "dense")
    matrix = np.load(live_build_dir(root) / "dense" / "passages.f16.npy", mmap_mode="r+")
    matrix[:] = 0.01  # same size: only the checksum tells
    matrix.flush()
    del matrix
    said: list[str] = []
    build_collection(root, _options(root), log=said.append)
    assert any("no longer match the checksums" in line for line in said), said
    assert _lists(open_collection(root), "dense") == before

    version, live = CorpusStore(root).version, live_build_dir(root)
    with open(live / "dense" / "passages.faiss", "r+b") as fh:
        fh.truncate(1000)
    with pytest.raises(ManifestMismatchError, match="index files changed"):
        remove_documents(root, ["jazz"], log=helpers.QUIET, compact_at=1.0, progress=False)
    assert CorpusStore(root).version == version and live_build_dir(root) == live
