"""Fixtures shared by the reader tests: real sources from wheels, and a counting on_bad."""

from __future__ import annotations

from pathlib import Path

import pytest

from hiera.corpus.readers.base import Record, Redirect
from hiera.corpus.readers.wikipedia_xml import gensim_dump_path
from hiera.corpus.tree import Document
from hiera.errors import BadInputError, BadRecordError


class Collect:
    """An ``on_bad`` hook that records errors and lets the reader go on (``--skip-bad``)."""

    def __init__(self) -> None:
        self.errors: list[BadRecordError] = []

    def __call__(self, err: BadRecordError) -> None:
        self.errors.append(err)


@pytest.fixture
def collect() -> Collect:
    return Collect()


@pytest.fixture(scope="session")
def gensim_dump() -> Path:
    try:
        return gensim_dump_path()
    except BadInputError as e:
        pytest.skip(str(e))


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
