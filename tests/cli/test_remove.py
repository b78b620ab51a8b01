"""``hiera remove``, ``add`` / ``ingest`` of changed documents, ``build --compact`` and ``stats``: a living collection.

The tiny collections pass ``--compact-at 1`` where a test is about segments:
one document of six is more than the default threshold's share of them, so
the change would rewrite the build instead.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import helpers
import numpy as np
import pytest

from hiera.builds import open_collection
from hiera.corpus.store import CorpusStore
from hiera.index.manifest import Manifest
from hiera.index.publish import live_build_dir
from hiera.index.segments import TOMBSTONES
from hiera.retrieve import get_retriever

SEGMENT = ("--compact-at", "1")


def _ids(root: Path, query: str, k: int = 20) -> list[str]:
    """Document ids bm25 returns for ``query`` (passage hits, by document)."""
    col = open_collection(root)
    hits = get_retriever("bm25", col).search(query, k=k)
    return list(dict.fromkeys(h.doc_id for h in hits))


def _state(root: Path) -> tuple[str, int, Path | None]:
    return helpers.export_digest(root), CorpusStore(root).version, live_build_dir(root)


def _stats(capsys, root: Path) -> dict:
    rc, out, err = helpers.run_cli(capsys, "stats", str(root), "--json")
    assert rc == 0, err
    return json.loads(out)


def test_remove_by_id_publishes_a_segment_with_tombstones(bm25_copy: Path, capsys) -> None:
    assert "volcanoes" in _ids(bm25_copy, "volcano magma lava")
    rc, _, err = helpers.run_cli(capsys, "remove", str(bm25_copy), "--ids", "volcanoes", *SEGMENT, "-q")
    assert rc == 0, err
    assert err.strip() == "removed 1 documents (7 passages); generation 1, 7 of 34 passages dead (compaction at 100%)"
    m = Manifest.read(live_build_dir(bm25_copy))
    assert m.updates["generation"] == 1 and m.updates["dead"] == {
        "documents": 1, "passages": 7, "deleted": 1, "superseded": 0}
    dead = np.load(live_build_dir(bm25_copy) / TOMBSTONES)
    assert dead.tolist() == [0]  # the first document's position
    assert CorpusStore(bm25_copy).get_document("volcanoes") is None
    assert "volcanoes" not in _ids(bm25_copy, "volcano magma lava")
    rc, out, _ = helpers.run_cli(capsys, "check", str(bm25_copy))
    assert rc == 0, out


def test_remove_selectors_are_a_union(bm25_copy: Path, tmp_path: Path, capsys) -> None:
    extra = [d.to_dict() for d in helpers.make_extra_docs()]
    for d in extra:
        d["metadata"] = {"source": "bees-and-lights"}
    src = tmp_path / "extra.jsonl"
    src.write_text("".join(json.dumps(d) + "\n" for d in extra), encoding="utf-8")
    assert helpers.run_cli(capsys, "add", str(bm25_copy), str(src), "-f", "hiera-jsonl", *SEGMENT, "-q")[0] == 0
    rc, _, err = helpers.run_cli(capsys, "remove", str(bm25_copy), "--ids", "chess", "--titles", "Jazz",
                                 "--source", "bees-and-lights", "--filter", "title = Photosynthesis",
                                 "--compact-at", "1", "-q")
    assert rc == 0, err
    assert err.startswith("removed 5 documents (")
    left = sorted(d.id for d in CorpusStore(bm25_copy).iter_docs())
    assert left == ["python-language", "roman-empire", "volcanoes"]
    assert _stats(capsys, bm25_copy)["index"]["updates"]["live_documents"] == 3
    found = set(_ids(bm25_copy, "chess jazz honeybee lighthouse photosynthesis light music bee"))
    assert found <= set(left)


def test_remove_past_the_threshold_rewrites_the_build(bm25_copy: Path, capsys) -> None:
    rc, _, err = helpers.run_cli(capsys, "remove", str(bm25_copy), "--ids", "volcanoes", "-q")
    assert rc == 0, err
    assert "the build was rewritten without dead rows (5 documents, 27 passages)" in err
    live = live_build_dir(bm25_copy)
    assert not Manifest.read(live).updates and not (live / TOMBSTONES).exists()
    assert _stats(capsys, bm25_copy)["index"]["updates"]["generation"] == 0


@pytest.mark.parametrize(("argv", "message"), [
    (("--ids", "volcanoes", "nope"), "unknown document ids: 'nope'; nothing removed"),
    (("--titles", "No Such Title"), "no document has the title or redirect 'No Such Title'; nothing removed"),
    (("--filter", "title = Nothing"), "the filter 'title = Nothing' matches no document; nothing removed"),
    (("--filter", "not title = Nothing"), "that would remove every document of"),
    ((), "name the documents to remove: --ids, --titles, --source or --filter"),
])
def test_bad_removals_are_one_line_and_change_nothing(bm25_copy: Path, capsys, argv: tuple, message: str) -> None:
    before = _state(bm25_copy)
    rc, _, err = helpers.run_cli(capsys, "remove", str(bm25_copy), *argv, *SEGMENT, "-q")
    assert rc == 2
    assert len(err.strip().splitlines()) == 1 and err.startswith("hiera: error: ") and message in err
    assert _state(bm25_copy) == before
    assert sorted(p.name for p in (bm25_copy / "builds").iterdir() if p.is_dir()) == [before[2].name]


def test_remove_needs_a_build_and_the_lock(tmp_path: Path, bm25_copy: Path, capsys) -> None:
    store_only = tmp_path / "store"
    CorpusStore(store_only, create=True).ingest(helpers.make_docs())
    rc, _, err = helpers.run_cli(capsys, "remove", str(store_only), "--ids", "chess")
    assert rc == 2 and "has no index yet" in err and len(err.strip().splitlines()) == 1
    assert CorpusStore(store_only).get_document("chess") is not None

    hold = ("import sys, time\nfrom hiera.lock import writer_lock\nwith writer_lock(sys.argv[1], 'test holder'):\n"
            "    print('locked', flush=True)\n    time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", hold, str(bm25_copy)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        before = _state(bm25_copy)
        rc, _, err = helpers.run_cli(capsys, "remove", str(bm25_copy), "--ids", "chess", *SEGMENT)
        assert rc == 2 and "collection is busy" in err and len(err.strip().splitlines()) == 1
        assert _state(bm25_copy) == before
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("value", ["0", "1.5", "x"])
def test_compact_at_must_be_a_share(bm25_copy: Path, value: str) -> None:
    from hiera.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["remove", str(bm25_copy), "--ids", "chess", "--compact-at", value])
    assert exc.value.code == 2


def test_add_of_replaced_documents_writes_a_delta(bm25_copy: Path, tmp_path: Path, capsys) -> None:
    docs = helpers.make_docs()
    jazz = next(d for d in docs if d.id == "jazz")
    jazz.lead = ["Jazz musicians improvise over chord changes with a saxophone called the zyzzyva horn."]
    src = helpers.write_jsonl(tmp_path / "more.jsonl", [jazz, *helpers.make_extra_docs()])
    rc, _, err = helpers.run_cli(capsys, "add", str(bm25_copy), str(src), "-f", "hiera-jsonl", *SEGMENT, "-q")
    assert rc == 0, err
    assert "index updated: generation 1" in err
    m = Manifest.read(live_build_dir(bm25_copy))
    assert m.updates["dead"]["superseded"] == 1 and m.updates["dead"]["deleted"] == 0
    assert m.updates["delta"]["documents"] == 3
    assert _ids(bm25_copy, "zyzzyva")[:1] == ["jazz"]
    updates = _stats(capsys, bm25_copy)["index"]["updates"]
    assert (updates["superseded"], updates["delta_documents"], updates["live_documents"]) == (1, 3, 8)
    assert updates["dead_share"] == round(m.updates["dead"]["passages"] / m.passages, 4) > 0
    assert helpers.run_cli(capsys, "check", str(bm25_copy))[0] == 0
    # the same file again changes nothing: no new version, no new build for a server to reload
    live = live_build_dir(bm25_copy)
    rc, _, err = helpers.run_cli(capsys, "add", str(bm25_copy), str(src), "-f", "hiera-jsonl", *SEGMENT, "-q")
    assert rc == 0 and "nothing changed" in err and live_build_dir(bm25_copy) == live


def test_ingest_into_a_built_collection_updates_its_build(bm25_copy: Path, tmp_path: Path, capsys) -> None:
    src = helpers.write_jsonl(tmp_path / "extra.jsonl", helpers.make_extra_docs())
    rc, _, err = helpers.run_cli(capsys, "ingest", str(src), "-f", "hiera-jsonl", "-i", str(bm25_copy), *SEGMENT, "-q")
    assert rc == 0, err
    stats = _stats(capsys, bm25_copy)
    assert stats["index"]["stale"] is False and stats["index"]["updates"]["delta_documents"] == 2
    assert "honeybees" in _ids(bm25_copy, "honeybee hive")


def test_ingest_no_index_leaves_the_build_stale(bm25_copy: Path, tmp_path: Path, capsys) -> None:
    live = live_build_dir(bm25_copy)
    src = helpers.write_jsonl(tmp_path / "extra.jsonl", helpers.make_extra_docs())
    rc, _, err = helpers.run_cli(capsys, "ingest", str(src), "-f", "hiera-jsonl", "-i", str(bm25_copy), "--no-index", "-q")
    assert rc == 0, err
    assert live_build_dir(bm25_copy) == live
    assert _stats(capsys, bm25_copy)["index"]["stale"] is True


def test_build_compact_drops_dead_rows_and_keeps_options(bm25_copy: Path, tmp_path: Path, capsys) -> None:
    src = helpers.write_jsonl(tmp_path / "extra.jsonl", helpers.make_extra_docs())
    assert helpers.run_cli(capsys, "add", str(bm25_copy), str(src), "-f", "hiera-jsonl", *SEGMENT, "-q")[0] == 0
    assert helpers.run_cli(capsys, "remove", str(bm25_copy), "--ids", "chess", *SEGMENT, "-q")[0] == 0
    changed = Manifest.read(live_build_dir(bm25_copy))
    answers = _ids(bm25_copy, "honeybee volcano lighthouse chess")
    before = live_build_dir(bm25_copy)
    rc, _, err = helpers.run_cli(capsys, "build", str(bm25_copy), "--compact", "--bm25-k1", "3", "-q")
    assert rc == 2 and len(err.strip().splitlines()) == 1, err  # an option compaction would not apply: refused
    assert "--compact keeps the live build's options: drop --bm25-k1" in err
    assert live_build_dir(bm25_copy) == before
    rc, _, err = helpers.run_cli(capsys, "build", str(bm25_copy), "--compact", "-q")
    assert rc == 0, err
    assert err.startswith(f"compacted {bm25_copy}: removed 1 dead documents ({changed.updates['dead']['passages']} "
                          "passages), merged a delta of 2 documents; 7 documents, ")
    assert "build size " in err
    live = live_build_dir(bm25_copy)
    m = Manifest.read(live)
    assert not m.updates and not (live / TOMBSTONES).exists() and not (live / "delta").exists()
    assert (m.documents, m.bm25) == (7, changed.bm25 | {"tokens": m.bm25["tokens"]})  # the live build's k1 kept
    assert _ids(bm25_copy, "honeybee volcano lighthouse chess") == answers
    assert helpers.run_cli(capsys, "check", str(bm25_copy))[0] == 0


def test_build_compact_needs_a_build(tmp_path: Path, capsys) -> None:
    root = tmp_path / "store"
    CorpusStore(root, create=True).ingest(helpers.make_docs())
    rc, _, err = helpers.run_cli(capsys, "build", str(root), "--compact")
    assert rc == 2 and "has no index to compact" in err and len(err.strip().splitlines()) == 1
    assert live_build_dir(root) is None


def test_stats_of_a_build_from_scratch_and_its_text(bm25_copy: Path, capsys) -> None:
    updates = _stats(capsys, bm25_copy)["index"]["updates"]
    assert updates == {"generation": 0, "live_documents": 6, "live_passages": 34, "deleted": 0, "superseded": 0,
                       "dead_documents": 0, "dead_passages": 0, "delta_documents": 0, "delta_passages": 0,
                       "dead_share": 0.0}
    assert helpers.run_cli(capsys, "remove", str(bm25_copy), "--ids", "chess", *SEGMENT, "-q")[0] == 0
    rc, out, _ = helpers.run_cli(capsys, "stats", str(bm25_copy))
    assert rc == 0
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("updates:"))
    assert "generation 1; 5 live documents" in line and "(1 deleted, 0 superseded)" in line


def test_dense_collection_add_then_remove_checks_clean(col_copy: Path, tmp_path: Path, capsys) -> None:
    """A delta with vectors (Flat FAISS, float16 matrices) and tombstones: dense search skips the dead."""
    src = helpers.write_jsonl(tmp_path / "extra.jsonl", helpers.make_extra_docs())
    assert helpers.run_cli(capsys, "add", str(col_copy), str(src), "-f", "hiera-jsonl", *SEGMENT, "-q")[0] == 0
    assert helpers.run_cli(capsys, "remove", str(col_copy), "--titles", "Honeybee", "Chess", *SEGMENT, "-q")[0] == 0
    rc, out, _ = helpers.run_cli(capsys, "check", str(col_copy))
    assert rc == 0, out
    assert "ok   tombstones: generation 2: 1 dead documents" in out and "ok   dense:" in out
    col = open_collection(col_copy)
    hits = get_retriever("dense", col).search("bees make honey in a hive", k=10)
    assert hits and not {"honeybees", "chess"} & {h.doc_id for h in hits}
    assert "lighthouses" in {h.doc_id for h in get_retriever("dense", col).search("lighthouse lamp for ships", k=5)}
