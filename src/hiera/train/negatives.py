"""Hard-negative builders, one per kind the DHR paper trains with.

Every builder returns positions (passages or documents, in index order), best
first, that are *not* relevant to the question: a passage is relevant when it
contains an answer (DPR matching), a document when any of its passages does.
Questions without answer strings (BEIR-style) fall back to their gold
documents. In-batch negatives need no builder: the loss takes every other
question's positive in the batch as a negative.

Passage level: ``bm25`` (top BM25 passages), ``in-doc`` (passages of the
positive's document), ``in-sec`` (passages of the positive's section),
``mined`` (top passages by a trained model, iteration 2).
Document level: ``abstract`` (top BM25 documents by *summary*), ``all-text``
(top BM25 documents by full text), ``mined``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from hiera.eval.match import MatchMode
from hiera.index.bm25 import Bm25Index
from hiera.train.pool import PassagePool

PASSAGE_KINDS: tuple[str, ...] = ("in-batch", "bm25", "in-doc", "in-sec", "mined")
DOC_KINDS: tuple[str, ...] = ("in-batch", "abstract", "all-text", "mined")


@dataclass
class Judge:
    """Decides relevance for one question: answer containment, else gold documents."""

    pool: PassagePool
    answers: list[str]
    mode: MatchMode = "string"
    gold_docs: set[int] = field(default_factory=set)

    def passage(self, pos: int) -> bool:
        if self.answers:
            return self.pool.passage_has(pos, self.answers, self.mode)
        return int(self.pool.passage_doc[pos]) in self.gold_docs

    def doc(self, pos: int) -> bool:
        if self.answers:
            return self.pool.doc_has(pos, self.answers, self.mode)
        return pos in self.gold_docs


def _take(candidates: Iterable[int], bad: Callable[[int], bool], exclude: set[int], n: int) -> list[int]:
    out: list[int] = []
    for c in candidates:
        c = int(c)
        if c in exclude or bad(c):
            continue
        out.append(c)
        exclude.add(c)
        if len(out) >= n:
            break
    return out


def bm25_passages(
    bm25: Bm25Index, query: str, judge: Judge, positive: int, n: int, depth: int = 100
) -> list[int]:
    """Top BM25 passages without the answer: lexically close, wrong."""
    positions, _ = bm25.search(query, depth)
    return _take(positions, judge.passage, {positive}, n)


def in_doc(pool: PassagePool, judge: Judge, positive: int, n: int, rng: random.Random) -> list[int]:
    """Passages of the positive's own document without the answer (same topic, wrong place)."""
    cands = [i for i in pool.doc_passages(int(pool.passage_doc[positive])) if i != positive]
    rng.shuffle(cands)
    return _take(cands, judge.passage, {positive}, n)


def in_sec(pool: PassagePool, judge: Judge, positive: int, n: int, rng: random.Random) -> list[int]:
    """Passages of the positive's own section without the answer: the hardest structural negatives."""
    cands = [i for i in pool.section_passages(positive) if i != positive]
    rng.shuffle(cands)
    return _take(cands, judge.passage, {positive}, n)


def bm25_docs(
    bm25: Bm25Index, query: str, judge: Judge, positive_doc: int, n: int, depth: int = 100
) -> list[int]:
    """Top BM25 documents (by whatever text ``bm25`` indexes) whose full text lacks the answer.

    With an index over summaries these are the paper's *abstract* negatives,
    with one over full texts its *all-text* negatives.
    """
    positions, _ = bm25.search(query, depth)
    return _take(positions, judge.doc, {positive_doc}, n)


def mined(ranked: np.ndarray, bad: Callable[[int], bool], positive: int, n: int) -> list[int]:
    """Top positions by a trained model's scores that are not relevant (iteration 2)."""
    return _take(ranked, bad, {positive}, n)


def random_fill(
    size: int, bad: Callable[[int], bool], exclude: set[int], n: int, rng: random.Random, tries: int = 50
) -> list[int]:
    """Random irrelevant positions: fills an example's negative slots when its hard ones run out."""
    out: list[int] = []
    for _ in range(tries):
        if len(out) >= n:
            break
        c = rng.randrange(size)
        if c not in exclude and not bad(c):
            out.append(c)
            exclude.add(c)
    return out
