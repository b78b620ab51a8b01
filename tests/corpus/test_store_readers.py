"""Readers of the corpus store during another connection's large write: served until the commit, never a raw lock."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hiera.corpus.store as store_module
from hiera.corpus.ingest import ingest
from hiera.corpus.store import CorpusStore
from hiera.errors import StoreBusyError


def _docs(path: Path, n: int, start: int = 0) -> Path:
    words = " ".join(f"word{i % 997}" for i in range(160))
    path.write_text("".join(json.dumps({"id": f"d{i}", "title": f"Doc {i}", "text": f"{words} {i}"}) + "\n"
                            for i in range(start, start + n)), encoding="utf-8")
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "col"
    ingest([_docs(tmp_path / "first.jsonl", 3)], "jsonl", root, progress=False)
    return root


def test_a_large_write_leaves_readers_reading_until_it_commits(root: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT_S", 0.5)
    reader = CorpusStore(root)  # another connection, as another process's search has
    seen: list[tuple[int, int]] = []

    def read_meanwhile(store: CorpusStore) -> None:
        # several MiB of changed pages are pending here: more than SQLite's default page cache holds
        assert store.path.stat().st_size < 2 * 1024 * 1024
        seen.append((reader.version, sum(reader.get_document(d) is not None for d in ("d0", "d1", "d2", "d3"))))

    ingest([_docs(tmp_path / "big.jsonl", 4000, start=3)], "jsonl", root, progress=False, before_commit=read_meanwhile)
    assert seen == [(1, 3)]  # the state before the change, read while the change was open
    assert reader.version == 2 and CorpusStore(root).stats()["documents"] == 4003


def test_a_lock_held_past_the_busy_timeout_is_one_line(root: Path, tmp_path: Path, monkeypatch) -> None:
    """With a write cache too small for the change, the writer locks readers out: they get StoreBusyError."""
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT_S", 0.2)
    monkeypatch.setattr(store_module, "WRITE_CACHE_KIB", 256)
    reader = CorpusStore(root)
    errors: list[str] = []

    def read_meanwhile(store: CorpusStore) -> None:
        with pytest.raises(StoreBusyError) as e:
            _ = reader.version
        errors.append(str(e.value))

    ingest([_docs(tmp_path / "big.jsonl", 4000, start=3)], "jsonl", root, progress=False, before_commit=read_meanwhile)
    assert len(errors) == 1 and "\n" not in errors[0]
    assert errors[0].startswith(f"the corpus store of {root} stayed locked by another process's change")
    assert reader.version == 2  # the connection reads again once the commit is done
