"""The build's name table: what it holds, that lookups over it equal the in-memory table's, and that nothing is encoded
at query time."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from hiera.builds import open_collection
from hiera.encode import Encoder
from hiera.index.names import KINDS, MemoryNames, StringTable, key_hash, name_rows
from hiera.link.titles import TitleIndex
from hiera.text import name_key

TITLES = ["Kiss and Tell (1945 film)", "Shirley Temple", "The Beatles", "Kiss and Tell (play)"]


def test_string_table_round_trip_with_unicode_and_empty_strings(tmp_path: Path) -> None:
    strings = ["Beyoncé", "", "東京", "a" * 1000, "Kiss & Tell"]
    assert StringTable.write(tmp_path, "t", strings) == 5
    for mmap in (True, False):
        table = StringTable.load(tmp_path, "t", mmap=mmap)
        assert len(table) == 5 and list(table) == strings and table[-1] == "Kiss & Tell" and table[1:3] == ["", "東京"]
        with pytest.raises(IndexError):
            table[5]


def test_rows_hold_titles_base_names_aliases_and_the_link_prior() -> None:
    rows = name_rows(TITLES, aliases=[("Kiss & Tell", "Kiss and Tell (play)"), ("Nowhere", "No such title")],
                     links=[["Shirley Temple"], ["Shirley Temple", "Shirley Temple"], ["The Beatles"]])
    by = {(rows.keys[i], int(rows.doc[i])): (rows.names[i], KINDS[rows.kind[i]]) for i in range(len(rows.names))}
    assert by[("kiss and tell", 0)] == ("Kiss and Tell", "base")  # the qualifier dropped
    assert by[("kiss and tell", 3)] == ("Kiss and Tell", "base")  # both films' base names share one key
    assert by[("beatles", 2)] == ("The Beatles", "title")  # the leading article is not part of the key
    assert by[("kiss and tell play", 3)] == ("Kiss and Tell (play)", "title")
    assert not any(name == "Nowhere" for name in rows.names)  # an alias of no document is dropped
    # the alias "Kiss & Tell" has the key of the base names; the first kind seen for (key, document) wins
    assert len([i for i in range(len(rows.names)) if rows.keys[i] == "kiss and tell"]) == 2
    # Shirley Temple is linked from two documents (a repeat within one document counts once), the Beatles from one
    assert rows.prior[1] == pytest.approx(1.0) and 0 < rows.prior[2] < 1 and rows.prior[0] == 0


def test_key_hash_is_stable_across_processes() -> None:
    assert key_hash("kiss and tell") == np.uint64(int.from_bytes(
        __import__("hashlib").blake2b(b"kiss and tell", digest_size=8).digest(), "little"))


@pytest.fixture(scope="module")
def built(shared_root: Path):
    return open_collection(shared_root)


def test_the_build_writes_a_table_equal_to_the_in_memory_one(built) -> None:
    table, vectors = built.name_index()
    assert table is not None and vectors is not None
    titles = [d.title for d in built.iter_docs()]
    mem = MemoryNames(titles, built.store.iter_aliases(), built.store.iter_doc_links())
    assert list(table.titles) == titles
    got = sorted((table.keys[i], int(table.doc[i]), table.names[i], int(table.kind[i])) for i in range(len(table)))
    want = sorted((mem.keys[i], int(mem.doc[i]), mem.names[i], int(mem.kind[i])) for i in range(len(mem)))
    assert got == want
    for key in {k for k, *_ in want}:  # every key found by binary search over the hashes, and only its rows
        assert sorted(int(table.doc[r]) for r in table.rows_of(key)) == sorted(int(mem.doc[r]) for r in mem.rows_of(key))
    assert table.rows_of("no such name at all") == [] and table.rows_of("") == []
    assert built.manifest.names["rows"] == len(table) and vectors.ntotal == len(table)


def test_lookups_over_the_build_equal_the_in_memory_ones_and_encode_nothing(built, monkeypatch) -> None:
    from_build = TitleIndex.from_collection(built)
    in_memory = TitleIndex([d.title for d in built.iter_docs()], built.store.iter_aliases(), built.store.iter_doc_links())
    enc = built.doc_encoder
    q = enc.encode_query(["a question about honey bees and lighthouses"])[0]
    calls: list[int] = []
    real = Encoder.encode_document
    monkeypatch.setattr(Encoder, "encode_document", lambda self, texts, **kw: calls.append(len(texts)) or real(self, texts, **kw))
    for title in [d.title for d in built.iter_docs()]:
        assert [(m.doc, m.kind) for m in from_build.exact(title)] == [(m.doc, m.kind) for m in in_memory.exact(title)]
        word = title.split()[0]
        assert [(m.doc, m.name) for m in from_build.bm25(word)] == [(m.doc, m.name) for m in in_memory.bm25(word)]
        assert {m.doc for m in from_build.fuzzy(title[:-1])} == {m.doc for m in in_memory.fuzzy(title[:-1])}
    dense_build = from_build.dense(enc, q, k=3)
    assert calls == []  # the build's vectors: nothing encoded at query time
    dense_mem = in_memory.dense(enc, q, k=3)
    assert calls  # the in-memory table encodes its names on first use
    assert [m.doc for m in dense_build] == [m.doc for m in dense_mem]
    np.testing.assert_allclose([m.score for m in dense_build], [m.score for m in dense_mem], atol=2e-3)


def test_a_key_lookup_normalizes_like_the_builder(built) -> None:
    table, _ = built.name_index()
    title = table.titles[0]
    assert table.rows_of(name_key(title.upper()))
