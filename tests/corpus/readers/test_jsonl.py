from __future__ import annotations

import json
from pathlib import Path

import helpers
import pytest

from hiera.corpus.readers import get_reader
from hiera.corpus.readers.jsonl import read_beir, read_hiera_jsonl, read_jsonl
from hiera.corpus.tree import Document, Section
from hiera.errors import BadInputError, BadRecordError


@pytest.fixture(scope="module")
def scifact(data_dir: Path) -> Path:
    path = data_dir / "beir" / "scifact"
    if not (path / "corpus.jsonl").is_file():
        pytest.skip(f"{path}/corpus.jsonl not found")
    return path


@pytest.fixture(scope="module")
def hotpot_pool(data_dir: Path) -> Path:
    path = data_dir / "hotpotqa" / "paragraph_pool.500q.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    return path


def test_scifact_corpus(scifact: Path):
    docs = list(read_beir(scifact / "corpus.jsonl"))
    assert len(docs) == len({d.id for d in docs}) == helpers.nonblank_lines(scifact / "corpus.jsonl")  # each record once
    first = docs[0]
    assert first.id == "4983"
    assert first.title.startswith("Microstructural development of human newborn cerebral white matter")
    assert first.lead and first.lead[0].startswith("Alterations of the architecture of cerebral white matter")
    assert first.metadata["source"] == "beir"
    assert all(d.title and d.lead for d in docs)
    # the dataset folder is accepted too
    assert [d.id for d in read_beir(scifact)][:3] == [d.id for d in docs[:3]]


def test_hotpot_pool(hotpot_pool: Path):
    docs = list(read_jsonl(hotpot_pool))
    assert len(docs) == helpers.nonblank_lines(hotpot_pool)
    ids = [d.id for d in docs]
    assert len(set(ids)) == len(ids) and ids[0] == "hp0"
    assert docs[0].title == "Meet Corliss Archer"
    assert "  " not in docs[0].lead[0]  # double spaces between sentences are normalized
    assert get_reader("hotpotqa-pool") is read_jsonl


def test_generic_jsonl_paragraphs_and_metadata(tmp_path: Path):
    path = tmp_path / "docs.jsonl"
    records = [
        {"id": 7, "title": " Seven ", "text": "First para\nsoft wrap.\n\n\nSecond para.", "url": "http://x"},
        {"id": "b", "title": "Bee", "text": ""},
        {"id": "c", "title": "Sea", "text": "Salt.", "source": "wikipedia", "year": 2019},
    ]
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n\n", encoding="utf-8")
    docs = list(read_jsonl(path))
    assert docs[0].id == "7" and docs[0].title == "Seven"
    assert docs[0].lead == ["First para soft wrap.", "Second para."]
    assert docs[0].metadata == {"url": "http://x", "source": "jsonl"}
    assert docs[1].lead == []
    assert docs[2].metadata == {"source": "wikipedia", "year": 2019}  # the record's own source is kept


@pytest.mark.parametrize("source", [3, ["a", "b"], "  "])
def test_jsonl_source_must_be_a_string(tmp_path: Path, source):
    """A source a filter could never match is a bad line, not a silent 'jsonl'."""
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"id": "d", "title": "Dee", "text": "River.", "source": source}) + "\n")
    bad: list[BadRecordError] = []
    assert list(read_jsonl(path, on_bad=bad.append)) == []
    assert len(bad) == 1 and "'source' must be a non-empty string" in str(bad[0]) and "line 1" in str(bad[0])


def test_beir_empty_title_uses_id(tmp_path: Path):
    path = tmp_path / "corpus.jsonl"
    path.write_text('{"_id": "d1", "title": "", "text": "Body."}\n', encoding="utf-8")
    (doc,) = read_beir(tmp_path)
    assert (doc.id, doc.title, doc.lead) == ("d1", "d1", ["Body."])


def test_hiera_jsonl_roundtrip(tmp_path: Path):
    doc = Document(
        id="x1",
        title="Root",
        lead=["Lead one.", "Lead two."],
        sections=[Section("A", 1, ["a text"], [Section("B", 2, ["b text"])]), Section("C", 1, ["c"])],
        categories=["Cat"],
        links=["Other"],
        aliases=["Alias"],
        metadata={"source": "test", "n": 3},
        keep_paragraphs=True,
    )
    path = tmp_path / "docs.hiera.jsonl"
    path.write_text(json.dumps(doc.to_dict()) + "\n" + json.dumps(doc.to_dict() | {"id": "x2"}) + "\n")
    back = list(read_hiera_jsonl(path))
    assert back[0] == doc
    assert back[1].id == "x2" and back[1].sections == doc.sections
    assert get_reader("hiera-jsonl") is read_hiera_jsonl


BAD_LINES = [
    '{"id": "1", "title": "One", "text": "ok"}',
    "",
    '{"id": "2", "title": "Two", "text": ',  # line 3: broken JSON
    '["not", "an", "object"]',  # line 4
    '{"id": "5", "text": "no title"}',  # line 5
    '{"id": "6", "title": "Six", "text": "ok"}',
]


@pytest.mark.parametrize(
    ("reader", "lines"),
    [
        (read_jsonl, BAD_LINES),
        (
            read_beir,
            [
                line.replace('"id"', '"_id"').replace('"5", "text"', '"5", "title": 5, "text"')
                for line in BAD_LINES
            ],
        ),
        (
            read_hiera_jsonl,
            [
                line.replace('"text": "ok"', '"lead": ["ok"]').replace('"text": "no title"', '"lead": []')
                for line in BAD_LINES
            ],
        ),
    ],
)
def test_bad_lines(tmp_path: Path, collect, reader, lines):
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(BadRecordError) as err:
        list(reader(path))
    assert err.value.path == str(path) and err.value.location == "line 3"
    assert str(err.value).startswith(f"{path}: line 3: ")
    docs = list(reader(path, on_bad=collect))
    assert [d.id for d in docs] == ["1", "6"]
    assert [e.location for e in collect.errors] == ["line 3", "line 4", "line 5"]


@pytest.mark.parametrize("reader", [read_jsonl, read_beir, read_hiera_jsonl])
def test_bad_files(tmp_path: Path, reader):
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(BadInputError, match="empty"):
        list(reader(empty))
    with pytest.raises(BadInputError, match="no such file"):
        list(reader(tmp_path / "missing.jsonl"))
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"id": "1", "_id": "1", "title": "ok", "text": "ok"}\n{"title": "Caf\xe9"}\n')
    with pytest.raises(BadInputError, match="line 2: not valid UTF-8"):
        list(reader(latin))


def test_hiera_jsonl_rejects_bad_shapes(tmp_path: Path, collect):
    path = tmp_path / "shapes.jsonl"
    rows = [
        {"id": "a", "title": "A", "sections": [{"paragraphs": []}]},
        {"id": "b", "title": "B", "lead": [1, 2]},
        {"id": "c", "title": "C", "metadata": []},
        {"id": "", "title": "D"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    assert list(read_hiera_jsonl(path, on_bad=collect)) == []
    assert [e.location for e in collect.errors] == ["line 1", "line 2", "line 3", "line 4"]


def test_hiera_jsonl_string_fields_read_alike(tmp_path: Path, collect):
    """One string stands for a list of one in every list-of-strings field (lead, a section's paragraphs,
    categories, links, aliases); a non-string item is refused, never turned into text."""
    path = tmp_path / "strings.jsonl"
    rows = [
        {"id": "a", "title": "A", "lead": "Lead.", "sections": [{"title": "S", "paragraphs": "Body."}],
         "categories": "Cat", "aliases": "Alias A"},
        {"id": "b", "title": "B", "categories": [1]},
        {"id": "c", "title": "C", "sections": [{"title": "S", "paragraphs": [["nested"]]}]},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    docs = list(read_hiera_jsonl(path, on_bad=collect))
    assert [d.id for d in docs] == ["a"]
    assert docs[0].lead == ["Lead."] and docs[0].sections[0].paragraphs == ["Body."]
    assert docs[0].categories == ["Cat"] and docs[0].aliases == ["Alias A"]
    assert [e.location for e in collect.errors] == ["line 2", "line 3"]
    assert "'categories' must be a string or a list of strings" in str(collect.errors[0])
