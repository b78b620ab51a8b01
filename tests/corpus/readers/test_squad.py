from __future__ import annotations

import json
from pathlib import Path

import pytest

from hiera.corpus.readers import get_reader
from hiera.corpus.readers.squad import read_squad
from hiera.corpus.split import split_document
from hiera.errors import BadInputError, BadRecordError


@pytest.fixture(scope="module")
def squad_dev(data_dir: Path) -> Path:
    path = data_dir / "squad" / "dev-v1.1.first24.json"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    return path


def test_first24_one_document_per_article(squad_dev: Path):
    docs = list(read_squad(squad_dev))
    raw = json.loads(squad_dev.read_text(encoding="utf-8"))["data"]
    assert [d.id for d in docs] == [a["title"] for a in raw]
    assert sum(len(d.lead) for d in docs) == sum(len(a["paragraphs"]) for a in raw)
    first = docs[0]
    assert (first.id, first.title) == ("Super_Bowl_50", "Super Bowl 50")
    assert first.keep_paragraphs and not first.sections
    assert first.metadata == {"source": "squad"}
    assert next(d for d in docs if d.id == "Fresno,_California").title == "Fresno, California"


def test_every_context_is_its_own_passage(squad_dev: Path):
    raw = json.loads(squad_dev.read_text(encoding="utf-8"))
    docs = {d.id: d for d in read_squad(squad_dev)}
    for article in raw["data"]:
        doc = docs[article["title"]]
        assert doc.lead == [p["context"] for p in article["paragraphs"]]  # exact, offsets still valid
        passages = [" ".join(p.text.split()) for p in split_document(doc)]
        joined = "\n".join(passages)
        for para in article["paragraphs"]:
            context = " ".join(para["context"].split())
            if len(context.split()) <= 100:
                assert context in passages
            else:  # a long context is cut, but never merged with its neighbour
                assert context.split()[0] in joined
        assert max(len(p.split()) for p in passages) <= 100
        # no passage straddles two contexts
        contexts = [" ".join(p["context"].split()) for p in article["paragraphs"]]
        assert all(any(p in c for c in contexts) for p in passages)


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "squad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_bad_input(tmp_path: Path, collect):
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"")
    with pytest.raises(BadInputError, match="empty"):
        list(read_squad(empty))
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"data": [{"title": "Caf\xe9"}]}')
    with pytest.raises(BadInputError, match="not valid UTF-8"):
        list(read_squad(latin))
    broken = tmp_path / "broken.json"
    broken.write_text('{"data": [', encoding="utf-8")
    with pytest.raises(BadInputError, match="not valid JSON"):
        list(read_squad(broken))
    with pytest.raises(BadInputError, match="'data' list"):
        list(read_squad(_write(tmp_path, [1, 2])))


def test_malformed_article(tmp_path: Path, collect):
    good = {"title": "A_b", "paragraphs": [{"context": "One.", "qas": []}, {"context": "Two.", "qas": []}]}
    path = _write(tmp_path, {"data": [good, {"title": "Bad", "paragraphs": [{"qas": []}]}, "junk", good]})
    with pytest.raises(BadRecordError) as err:
        list(read_squad(path))
    assert err.value.path == str(path) and err.value.location == "article 1"
    docs = list(read_squad(path, on_bad=collect))
    assert [d.title for d in docs] == ["A b", "A b"]
    assert [e.location for e in collect.errors] == ["article 1", "article 2"]
    assert get_reader("squad") is read_squad
