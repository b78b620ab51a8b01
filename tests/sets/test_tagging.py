"""spaCy tagging of set queries from many threads at once (the server parses each request in its own thread)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from hiera.sets import tagging
from hiera.sets.tagging import spacy_available, spacy_tags, tokenize

QUERIES = (
    "painted ceramic bowls",
    "rivers flowing through old towns",
    "dancers trained in ballet schools",
    "wooden boats built by hand",
    "comedies filmed in winter",
    "birds described in the 1990s",
)
THREADS = 12


class Watched:
    """A spaCy pipeline that records how many calls run at once (and slows each down so that overlaps show)."""

    def __init__(self, nlp: Any) -> None:
        self.nlp, self.inside, self.most = nlp, 0, 0
        self.count_lock = threading.Lock()

    def __call__(self, text: str) -> Any:
        with self.count_lock:
            self.inside += 1
            self.most = max(self.most, self.inside)
        time.sleep(0.01)
        try:
            return self.nlp(text)
        finally:
            with self.count_lock:
                self.inside -= 1


def test_threads_load_spacy_once_and_tag_one_query_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    if not spacy_available():
        pytest.skip("no spaCy English model installed")
    real = tagging._SPACY["nlp"]
    expected = {q: spacy_tags(q, tokenize(q)) for q in QUERIES}  # one thread
    assert any(expected.values())

    loads: list[Watched] = []

    def slow_load() -> Watched:  # a real load takes about a second: long enough for every thread to ask
        time.sleep(0.2)
        loads.append(Watched(real))
        return loads[-1]

    monkeypatch.setattr(tagging, "_SPACY", {})  # as in a fresh server process
    monkeypatch.setattr(tagging, "_spacy_pipeline", slow_load)
    start = threading.Barrier(THREADS)
    got: dict[int, list[dict]] = {}
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            start.wait()
            got[i] = [spacy_tags(q, tokenize(q)) for q in QUERIES[i % 3:] + QUERIES[: i % 3]]
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and len(got) == THREADS
    assert len(loads) == 1  # one pipeline for the process
    assert loads[0].most == 1  # never two taggings at once
    for i, tags in got.items():
        order = QUERIES[i % 3:] + QUERIES[: i % 3]
        assert tags == [expected[q] for q in order]
