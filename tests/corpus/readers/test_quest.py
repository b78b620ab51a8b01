from __future__ import annotations

import json
from pathlib import Path

import pytest

from hiera.corpus.readers import FORMATS, get_reader
from hiera.corpus.readers.quest import read_quest_documents
from hiera.corpus.tree import Document
from hiera.errors import BadInputError, BadRecordError


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_registered_under_quest_documents():
    assert "quest-documents" in FORMATS
    assert get_reader("quest-documents") is read_quest_documents


def test_documents_keyed_by_title(tmp_path: Path):
    path = _write(
        tmp_path / "documents.jsonl",
        [
            json.dumps({"title": "Kakapo", "text": "The kakapo is a parrot.\nIt is flightless.\n\n  Nocturnal, too. "}),
            "",
            json.dumps({"title": "Tom  Thumb (film)", "text": "A 1958 film.", "extra": 3, "nested": {"x": 1}}),
            json.dumps({"title": "Empty page", "text": ""}),
        ],
    )
    docs = list(read_quest_documents(path))
    assert [d.id for d in docs] == ["Kakapo", "Tom  Thumb (film)", "Empty page"]
    assert all(isinstance(d, Document) for d in docs)
    kakapo, film, empty = docs
    # every newline starts a paragraph; whitespace runs are collapsed
    assert kakapo.lead == ["The kakapo is a parrot.", "It is flightless.", "Nocturnal, too."]
    assert kakapo.title == "Kakapo" and kakapo.metadata == {"source": "quest"}
    # the id is the title exactly as QUEST's gold 'docs' spell it; the display title is normalized
    assert film.id == "Tom  Thumb (film)" and film.title == "Tom Thumb (film)"
    assert film.metadata == {"extra": 3, "source": "quest"}  # scalar extras kept, objects dropped
    assert empty.lead == [] and empty.title == "Empty page"


def test_bad_records_go_through_on_bad(tmp_path: Path, collect):
    path = _write(
        tmp_path / "documents.jsonl",
        [
            json.dumps({"title": "Good one", "text": "Fine."}),
            "{not json",
            json.dumps(["a", "list"]),
            json.dumps({"title": "  ", "text": "no title"}),
            json.dumps({"title": "No text"}),
            json.dumps({"title": "Numeric text", "text": 5}),
            json.dumps({"title": "Good two", "text": "Also fine."}),
        ],
    )
    docs = list(read_quest_documents(path, on_bad=collect))
    assert [d.id for d in docs] == ["Good one", "Good two"]
    assert [e.location for e in collect.errors] == ["line 2", "line 3", "line 4", "line 5", "line 6"]
    reasons = [e.reason for e in collect.errors]
    assert reasons[0].startswith("not valid JSON")
    assert reasons[1] == "a record must be a JSON object"
    assert reasons[2] == "missing or empty 'title'"
    assert reasons[3] == reasons[4] == "missing 'text' (must be a string)"
    assert all(str(path) in str(e) and "\n" not in str(e) for e in collect.errors)


def test_default_hook_raises_on_first_bad_line(tmp_path: Path):
    path = _write(tmp_path / "documents.jsonl", [json.dumps({"title": "A", "text": "a"}), json.dumps({"text": "b"})])
    it = read_quest_documents(path)
    assert next(it).id == "A"
    with pytest.raises(BadRecordError, match=r"line 2: missing or empty 'title'"):
        next(it)


def test_missing_and_empty_files(tmp_path: Path):
    with pytest.raises(BadInputError, match="no such file"):
        list(read_quest_documents(tmp_path / "absent.jsonl"))
    (tmp_path / "empty.jsonl").write_bytes(b"")
    with pytest.raises(BadInputError, match="file is empty"):
        list(read_quest_documents(tmp_path / "empty.jsonl"))
