"""Ingest is all-or-nothing: a bad record leaves the collection exactly as it was."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import helpers
import pytest

from hiera.cli import main
from hiera.corpus.ingest import ingest
from hiera.corpus.readers import FORMATS
from hiera.corpus.store import STORE_FILE, CorpusStore
from hiera.errors import BadInputError, BadRecordError, IndexMissingError, UnknownFormatError


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _bad_file(tmp_path: Path) -> Path:
    """Line 1 a new document, line 2 a replacement, line 3 broken JSON, line 4 another new document."""
    extra = helpers.make_extra_docs()
    changed = helpers.make_docs()[1]
    changed.lead = ["A changed lead that must never reach the store."]
    path = tmp_path / "bad.jsonl"
    path.write_text(
        json.dumps(extra[0].to_dict())
        + "\n"
        + json.dumps(changed.to_dict())
        + "\n"
        + '{"id": "broken", "title": \n'
        + json.dumps(extra[1].to_dict())
        + "\n",
        encoding="utf-8",
    )
    return path


@pytest.fixture
def collection(tmp_path: Path) -> Path:
    src = helpers.write_jsonl(tmp_path / "docs.jsonl", helpers.make_docs())
    root = tmp_path / "col"
    report = ingest([src], "hiera-jsonl", root, progress=False)
    assert (report.documents, report.replaced, report.skipped) == (6, 0, 0)
    return root


def test_ingest_a_jsonl_file(collection: Path) -> None:
    store = CorpusStore(collection)
    assert store.stats()["documents"] == 6
    for doc in helpers.make_docs():
        assert store.get_document(doc.id) == doc


def test_bad_record_stops_the_ingest_and_changes_nothing(collection: Path, tmp_path: Path) -> None:
    bad = _bad_file(tmp_path)
    store = CorpusStore(collection)
    stats, digest, file_sha = store.stats(), helpers.export_digest(collection), _sha(collection / STORE_FILE)
    store.close()

    with pytest.raises(BadRecordError) as exc:
        ingest([bad], "hiera-jsonl", collection, progress=False)
    err = exc.value
    assert err.path == str(bad)
    assert err.location == "line 3"
    assert str(bad) in str(err) and "line 3" in str(err) and "JSON" in str(err)

    assert CorpusStore(collection).stats() == stats
    assert helpers.export_digest(collection) == digest
    assert _sha(collection / STORE_FILE) == file_sha  # byte for byte
    assert not (collection / (STORE_FILE + "-journal")).exists()


def test_skip_bad_skips_and_counts(collection: Path, tmp_path: Path) -> None:
    bad = _bad_file(tmp_path)
    report = ingest([bad], "hiera-jsonl", collection, skip_bad=True, progress=False)
    assert report.skipped == 1
    assert (report.documents, report.replaced) == (3, 1)
    assert report.new_doc_ids == ["honeybees", "lighthouses"]
    assert len(report.skipped_examples) == 1 and "line 3" in report.skipped_examples[0]
    store = CorpusStore(collection)
    assert store.stats()["documents"] == 8
    assert store.get_document("chess").lead == ["A changed lead that must never reach the store."]


def test_bad_record_shapes_name_their_line(tmp_path: Path) -> None:
    path = tmp_path / "shapes.jsonl"
    path.write_text(
        "\n".join(
            [
                json.dumps({"id": "ok", "title": "Fine", "lead": ["x"]}),
                "",  # blank lines are skipped, but still counted
                "[1, 2]",
                json.dumps({"id": "t", "title": ""}),
                json.dumps({"id": "s", "title": "S", "sections": [{"paragraphs": ["no title"]}]}),
                json.dumps({"id": "l", "title": "L", "sections": [{"title": "Part", "level": "one"}]}),
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    report = ingest([path], "hiera-jsonl", tmp_path / "c", skip_bad=True, progress=False)
    seen = report.skipped_examples
    assert report.skipped == 4 and report.documents == 1
    assert [s.split(": ")[1] for s in seen] == ["line 3", "line 4", "line 5", "line 6"]
    assert "section 'Part': 'level' must be a whole number >= 1, not 'one'" in seen[-1]


def test_failed_first_ingest_leaves_no_directory(tmp_path: Path) -> None:
    bad = _bad_file(tmp_path)
    root = tmp_path / "fresh"
    with pytest.raises(BadRecordError):
        ingest([bad], "hiera-jsonl", root, progress=False)
    assert not root.exists()


def test_failed_first_ingest_into_an_existing_directory_keeps_its_files(tmp_path: Path) -> None:
    bad = _bad_file(tmp_path)
    root = tmp_path / "mine"
    root.mkdir()
    (root / "notes.txt").write_text("keep me", encoding="utf-8")
    with pytest.raises(BadRecordError):
        ingest([bad], "hiera-jsonl", root, progress=False)
    assert (root / "notes.txt").read_text(encoding="utf-8") == "keep me"
    assert not (root / STORE_FILE).exists()


_KILLED_MIDWAY = """
import os, signal, sys
from pathlib import Path
import hiera.corpus.ingest as ingest_module
from hiera.corpus.readers.jsonl import read_hiera_jsonl

def dies_after_two(path, on_bad):
    for n, doc in enumerate(read_hiera_jsonl(path, on_bad)):
        if n == 2:
            os.kill(os.getpid(), signal.SIGKILL)  # no cleanup runs: as a kill -9 or the OOM killer
        yield doc

ingest_module.get_reader = lambda fmt: dies_after_two
ingest_module.ingest([sys.argv[1]], "hiera-jsonl", sys.argv[2], progress=False)
"""


def test_a_first_ingest_killed_outright_leaves_no_collection(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    src = helpers.write_jsonl(tmp_path / "d.jsonl", helpers.make_docs())
    root = tmp_path / "fresh"
    proc = subprocess.run([sys.executable, "-c", _KILLED_MIDWAY, str(src), str(root)], timeout=120)
    assert proc.returncode == -signal.SIGKILL
    assert root.is_dir() and not (root / STORE_FILE).exists()  # no empty collection that looks valid
    with pytest.raises(IndexMissingError, match="is not a hiera collection"):
        CorpusStore(root)
    report = ingest([src], "hiera-jsonl", root, progress=False)  # a rerun starts afresh and clears the leftover
    assert report.documents == len(helpers.make_docs()) == CorpusStore(root).stats()["documents"]
    assert sorted(p.name for p in root.iterdir() if "ingesting" in p.name) == []


def test_unknown_format_lists_the_formats(tmp_path: Path) -> None:
    src = helpers.write_jsonl(tmp_path / "d.jsonl", helpers.make_docs()[:1])
    with pytest.raises(UnknownFormatError) as exc:
        ingest([src], "docx", tmp_path / "c", progress=False)
    msg = str(exc.value)
    assert "'docx'" in msg
    for name in FORMATS:
        assert name in msg
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize(
    ("content", "match"),
    [(b"", "empty"), (b'{"id": "a", "title": "A"}\n{"id": "b", "title": "\xff\xfe"}\n', "UTF-8")],
    ids=["empty", "not-utf8"],
)
def test_unreadable_files_are_bad_input(tmp_path: Path, content: bytes, match: str) -> None:
    src = tmp_path / "src.jsonl"
    src.write_bytes(content)
    with pytest.raises(BadInputError, match=match) as exc:
        ingest([src], "hiera-jsonl", tmp_path / "c", progress=False)
    assert str(src) in str(exc.value)
    assert not (tmp_path / "c").exists()


def test_missing_file_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="no such file"):
        ingest([tmp_path / "nope.jsonl"], "hiera-jsonl", tmp_path / "c", progress=False)


def test_several_sources_are_one_transaction(collection: Path, tmp_path: Path) -> None:
    good = helpers.write_jsonl(tmp_path / "good.jsonl", helpers.make_extra_docs())
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n", encoding="utf-8")
    digest = helpers.export_digest(collection)
    with pytest.raises(BadRecordError, match="line 1"):
        ingest([good, bad], "hiera-jsonl", collection, progress=False)
    assert helpers.export_digest(collection) == digest
    assert CorpusStore(collection).stats()["documents"] == 6


# -- the command line -----------------------------------------------------
def test_cli_ingest_bad_file_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = _bad_file(tmp_path)
    root = tmp_path / "cli"
    rc = main(["ingest", str(bad), "--format", "hiera-jsonl", "--index", str(root), "--quiet"])
    out, err = capsys.readouterr()
    assert rc == 2
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("hiera: error: ")
    assert str(bad) in lines[0] and "line 3" in lines[0]
    assert not root.exists()


def test_cli_ingest_unknown_format_and_skip_bad(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = _bad_file(tmp_path)
    root = tmp_path / "cli"
    assert main(["ingest", str(bad), "-f", "nope", "-i", str(root), "-q"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "known formats" in err and "hiera-jsonl" in err

    assert main(["ingest", str(bad), "-f", "hiera-jsonl", "-i", str(root), "-q", "--skip-bad"]) == 0
    err = capsys.readouterr().err
    assert "ingested 3 documents" in err and "skipped 1 bad records" in err and "line 3" in err
    assert CorpusStore(root).stats()["documents"] == 3


def test_an_id_repeated_within_one_file_is_reported_not_counted_as_a_replacement(collection: Path, tmp_path: Path,
                                                                                 capsys) -> None:
    a, b = helpers.make_extra_docs()[:2]
    again = helpers.make_extra_docs()[0]
    again.lead = ["The second record with this id, the one kept."]
    src = helpers.write_jsonl(tmp_path / "rep.jsonl", [a, b, again])
    changed = helpers.make_docs()[0]  # an id the collection already holds, with new text: an update, counted as replaced
    changed.lead = [*changed.lead[:-1], changed.lead[-1] + " A clause added in this version."]
    update = helpers.write_jsonl(tmp_path / "upd.jsonl", [changed])
    before = CorpusStore(collection).stats()["passages"]
    report = ingest([src, update], "hiera-jsonl", collection, progress=False)
    assert (report.documents, report.replaced, report.repeated) == (3, 1, [a.id])
    store = CorpusStore(collection)
    assert store.get_document(a.id).lead == again.lead and store.stats()["documents"] == 8
    held = {d: sum(1 for _ in store.iter_passages([d])) for d in (a.id, b.id, changed.id)}
    assert report.passages == sum(held.values())  # what the three documents now hold, the replaced record's not
    assert store.stats()["passages"] - before == held[a.id] + held[b.id]  # (the update replaced as many as it has)
    rc = main(["ingest", str(src), "--format", "hiera-jsonl", "--index", str(tmp_path / "new"), "--no-index"])
    err = capsys.readouterr().err
    assert rc == 0 and "ingested 2 documents (0 replaced)" in err
    assert f"1 record repeated an id given earlier in the same file, and the last record of each id was kept: " \
           f"'{a.id}'" in err


def test_a_file_with_no_documents_is_refused(collection: Path, tmp_path: Path) -> None:
    """A file that parses but holds no document (SQuAD's ``"data": []``, the wrong format for the file) is a
    one-line error: no empty collection is made, and an existing one is unchanged."""
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"version": "1.1", "data": []}), encoding="utf-8")
    with pytest.raises(BadInputError, match="no documents in it as --format squad"):
        ingest([empty], "squad", tmp_path / "new", progress=False)
    assert not (tmp_path / "new").exists()
    before = CorpusStore(collection).stats()
    with pytest.raises(BadInputError, match="no documents in it"):
        ingest([empty], "squad", collection, progress=False)
    assert CorpusStore(collection).stats() == before


def test_documents_given_again_unchanged_are_left_as_they_are(collection: Path, tmp_path: Path) -> None:
    """Re-ingesting what is stored writes nothing (no retired rows, no new row ids); a changed document replaces."""
    docs = helpers.make_docs()
    store = CorpusStore(collection)
    rows = {r.id: r.rowid for r in store.iter_docs()}
    store.close()
    docs[0].lead = [*docs[0].lead, "One more sentence about it, new in this version."]
    report = ingest([helpers.write_jsonl(tmp_path / "again.jsonl", docs)], "hiera-jsonl", collection, progress=False)
    assert (report.documents, report.replaced, report.unchanged) == (1, 1, len(docs) - 1)
    store = CorpusStore(collection)
    after = {r.id: r.rowid for r in store.iter_docs()}
    assert {d for d in rows if after[d] != rows[d]} == {docs[0].id}
    assert list(store.retired([rows[d.id] for d in docs])) == [rows[docs[0].id]]
    version = store.version
    store.close()
    report = ingest([helpers.write_jsonl(tmp_path / "same.jsonl", docs)], "hiera-jsonl", collection, progress=False)
    assert (report.documents, report.replaced, report.unchanged, report.changed) == (0, 0, len(docs), False)
    assert CorpusStore(collection).version == version  # nothing changed: no new version, nothing to rebuild
