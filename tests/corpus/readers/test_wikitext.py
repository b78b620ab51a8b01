from __future__ import annotations

from pathlib import Path

import pytest

from hiera.corpus.readers import get_reader
from hiera.corpus.readers.wikitext import read_wikitext, restore
from hiera.corpus.split import split_document
from hiera.errors import BadInputError, BadRecordError


@pytest.fixture(scope="module")
def wikitext2(data_dir: Path) -> Path:
    path = data_dir / "wikitext2" / "wiki.test.raw"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    return path


def test_wikitext2_test_split_has_60_articles(wikitext2: Path):
    docs = list(read_wikitext(wikitext2))
    assert len(docs) == 60
    assert len({d.id for d in docs}) == 60
    assert docs[0].id == "robert-boulter" and docs[0].title == "Robert Boulter"
    assert docs[-1].title == "The Hustler ( film )"
    titles = {d.title for d in docs}
    assert "Ise-class battleship" in titles  # @-@ restored in titles too
    assert "Battle of Dürenstein" in titles
    assert next(d.id for d in docs if d.title == "Battle of Dürenstein") == "battle-of-durenstein"
    # formula remnants shaped like titles stay inside "Constant k filter"
    assert not any(t.startswith("1 ") for t in titles)
    k_filter = next(d for d in docs if d.title == "Constant k filter")
    assert any("nominal impedance k" in p for _, paras in k_filter.leaves() for p in paras)


def test_wikitext2_sections_and_cleanup(wikitext2: Path):
    docs = list(read_wikitext(wikitext2))
    assert sum(1 for d in docs if d.sections) >= 55
    assert sum(1 for d in docs if any(s.children for s in d.sections)) >= 30
    ironclad = next(d for d in docs if d.title == "Ironclad warship")
    paths = [p for p, _ in ironclad.leaves()]
    assert ("Armament and tactics", "Positioning of armament", "Broadside ironclads") in paths
    assert ironclad.sections[0].title == "The ironclad"
    assert ironclad.sections[0].children[0].level == 2
    for doc in docs:
        for _, paras in doc.leaves():
            for p in paras:
                assert " @-@ " not in p and " @,@ " not in p and " @.@ " not in p
                assert "\r" not in p and p == p.strip()
    boulter = docs[0]
    assert "guest-starring role" in boulter.lead[0]
    passages = [p for d in docs for p in split_document(d)]
    assert max(len(p.text.split()) for p in passages) <= 100


def test_restore():
    assert restore("24 @,@ 000 and 2 @.@ 5 m @-@ long") == "24,000 and 2.5 m-long"


def test_small_file_and_duplicate_titles(tmp_path: Path):
    path = tmp_path / "wiki.raw"
    path.write_bytes(
        b" = Foo = \r\n Foo is a thing . \r\n = = Part = = \r\n Part text . \r\n = = = = Deep = = = = \r\n"
        b" Deep text . \r\n = = Later = = \r\n Later text . \r\n = Foo = \r\n Foo again . \r\n = Empty = \r\n"
    )
    docs = list(read_wikitext(path))
    assert [d.id for d in docs] == ["foo", "foo-2"]  # the empty article is dropped
    foo = docs[0]
    assert [(p, paras) for p, paras in foo.leaves()] == [
        ((), ["Foo is a thing ."]),
        (("Part",), ["Part text ."]),
        (("Part", "Deep"), ["Deep text ."]),  # a skipped level still nests one deeper
        (("Later",), ["Later text ."]),
    ]
    assert foo.sections[0].children[0].level == 2
    assert get_reader("wikitext") is read_wikitext


def test_bad_input(tmp_path: Path, collect):
    empty = tmp_path / "empty.raw"
    empty.write_bytes(b"")
    with pytest.raises(BadInputError, match="empty"):
        list(read_wikitext(empty))
    latin = tmp_path / "latin.raw"
    latin.write_bytes(b" = Caf\xe9 = \r\n text \r\n")
    with pytest.raises(BadInputError, match="line 1: not valid UTF-8"):
        list(read_wikitext(latin))

    orphan = tmp_path / "orphan.raw"
    orphan.write_text(" stray text \n more stray \n = Real = \n Real text . \n", encoding="utf-8")
    with pytest.raises(BadRecordError) as err:
        list(read_wikitext(orphan))
    assert err.value.path == str(orphan) and err.value.location == "line 1"
    docs = list(read_wikitext(orphan, on_bad=collect))
    assert [d.title for d in docs] == ["Real"]
    assert [e.location for e in collect.errors] == ["line 1"]  # reported once, not per line
