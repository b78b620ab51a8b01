"""Training examples as the DHR paper builds them: a positive and typed hard negatives.

Positive passage: the gold passage (the one holding the answer span) when the
question format gives one (SQuAD), else the highest-ranked BM25 passage among
the top ``depth`` that contains an answer; questions with neither are dropped
and counted. Positive document: the positive passage's document.

Examples are saved as JSON lines with the collection's corpus version, so an
interrupted or repeated training run reuses them (mining can take minutes)
and refuses them when the collection has changed.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from tqdm import tqdm

from hiera.collection import Collection
from hiera.errors import BadInputError, HieraError
from hiera.eval.questions import Question
from hiera.index.bm25 import Bm25Index
from hiera.io import write_atomic, write_json_atomic
from hiera.train import negatives as neg
from hiera.train.pool import PassagePool

TrainLevel = Literal["passage", "doc"]
LEVELS: tuple[str, ...] = ("passage", "doc")


@dataclass
class Example:
    """One question with its positive and its hard negatives (positions at ``level``)."""

    qid: str
    query: str
    answers: list[str]
    answer_mode: str
    gold_docs: list[int]
    positive_passage: int
    positive_source: str  # "gold" or "bm25"
    negatives: dict[str, list[int]] = field(default_factory=dict)

    def positive(self, pool: PassagePool, level: TrainLevel) -> int:
        return self.positive_passage if level == "passage" else int(pool.passage_doc[self.positive_passage])

    def judge(self, pool: PassagePool) -> neg.Judge:
        return neg.Judge(pool, self.answers, self.answer_mode, set(self.gold_docs))  # type: ignore[arg-type]


def check_kinds(level: TrainLevel, kinds: Sequence[str]) -> list[str]:
    """Validate a ``--negatives`` list for a level; a clear error names the valid kinds."""
    if level not in LEVELS:
        raise BadInputError(f"unknown level {level!r}; valid: {', '.join(LEVELS)}")
    valid = neg.PASSAGE_KINDS if level == "passage" else neg.DOC_KINDS
    kinds = [k.strip() for k in kinds if k.strip()]
    bad = [k for k in kinds if k not in valid]
    if bad or not kinds:
        raise BadInputError(
            f"unknown {level} negative kind(s) {', '.join(bad) or '(none given)'}; valid: {', '.join(valid)}"
        )
    return list(dict.fromkeys(kinds))


def find_positive(
    pool: PassagePool, bm25: Bm25Index, q: Question, depth: int = 100
) -> tuple[int, str] | None:
    """The positive passage position and where it came from, or ``None`` (drop the question)."""
    judge = judge_for(pool, q)
    for pid in sorted(q.gold_passages):
        pos = pool.passage_position.get(pid)
        if pos is not None and judge.passage(pos):
            return pos, "gold"
    positions, _ = bm25.search(q.text, depth)
    for pos in positions:
        if judge.passage(int(pos)):
            return int(pos), "bm25"
    return None


def judge_for(pool: PassagePool, q: Question) -> neg.Judge:
    gold = {pool.doc_position[d] for d in q.gold_docs if d in pool.doc_position}
    return neg.Judge(pool, list(q.answers), q.answer_mode, gold)


@dataclass
class BuildReport:
    questions: int = 0
    kept: int = 0
    dropped: int = 0
    positive_sources: dict[str, int] = field(default_factory=dict)
    negatives_mean: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def build_examples(
    col: Collection,
    pool: PassagePool,
    questions: Sequence[Question],
    level: TrainLevel,
    kinds: Sequence[str],
    *,
    per_kind: int = 4,
    depth: int = 100,
    seed: int = 42,
    progress: bool = True,
) -> tuple[list[Example], BuildReport]:
    """Positives and the requested negatives (except ``mined``: see :func:`add_mined`)."""
    kinds = check_kinds(level, kinds)
    bm25 = col.bm25_passages
    summary_bm25 = fulltext_bm25 = None
    if level == "doc" and "abstract" in kinds:
        summary_bm25 = Bm25Index.build(pool.doc_summary, bm25.config)
    if level == "doc" and "all-text" in kinds:
        if (col.manifest.bm25 or {}).get("doc_text") == "fulltext":
            fulltext_bm25 = col.bm25_docs
        else:
            fulltext_bm25 = Bm25Index.build(
                [pool.doc_fulltext(i) for i in range(len(pool.doc_ids))], bm25.config
            )
    rng = random.Random(seed)
    report = BuildReport(questions=len(questions))
    sources: Counter[str] = Counter()
    totals: Counter[str] = Counter()
    out: list[Example] = []
    for q in tqdm(questions, desc=f"examples ({level})", unit="q", disable=not progress, leave=False):
        found = find_positive(pool, bm25, q, depth)
        if found is None:
            report.dropped += 1
            continue
        pos, source = found
        judge = judge_for(pool, q)
        ex = Example(q.id, q.text, list(q.answers), q.answer_mode, sorted(judge.gold_docs), pos, source)
        pdoc = int(pool.passage_doc[pos])
        for kind in kinds:
            if kind == "in-batch":
                continue
            if kind == "bm25":
                ex.negatives[kind] = neg.bm25_passages(bm25, q.text, judge, pos, per_kind, depth)
            elif kind == "in-doc":
                ex.negatives[kind] = neg.in_doc(pool, judge, pos, per_kind, rng)
            elif kind == "in-sec":
                ex.negatives[kind] = neg.in_sec(pool, judge, pos, per_kind, rng)
            elif kind == "abstract":
                assert summary_bm25 is not None
                ex.negatives[kind] = neg.bm25_docs(summary_bm25, q.text, judge, pdoc, per_kind, depth)
            elif kind == "all-text":
                assert fulltext_bm25 is not None
                ex.negatives[kind] = neg.bm25_docs(fulltext_bm25, q.text, judge, pdoc, per_kind, depth)
            totals[kind] += len(ex.negatives.get(kind, []))
        sources[source] += 1
        out.append(ex)
    report.kept = len(out)
    report.positive_sources = dict(sources)
    report.negatives_mean = {k: round(v / max(1, len(out)), 2) for k, v in totals.items()}
    return out, report


def add_mined(
    examples: Sequence[Example],
    pool: PassagePool,
    encoder: Any,
    level: TrainLevel,
    *,
    per_kind: int = 4,
    depth: int = 100,
    progress: bool = True,
) -> float:
    """Iteration 2: add ``mined`` negatives ranked by ``encoder`` (an :class:`~hiera.encode.Encoder`).

    The corpus is encoded through the embedding cache, so a later ``hiera
    build`` with the same model reuses these vectors. Returns the mean number
    of mined negatives per example.
    """
    texts = pool.passage_input if level == "passage" else pool.doc_summary
    corpus = encoder.encode_document(texts, progress=progress, desc=f"mine: encode {level}s")
    queries = encoder.encode_query([ex.query for ex in examples])
    total = 0
    for start in tqdm(range(0, len(examples), 256), desc="mine: search", disable=not progress, leave=False):
        block = queries[start : start + 256] @ corpus.T
        k = min(depth, block.shape[1])
        top = np.argpartition(-block, k - 1, axis=1)[:, :k]
        for row, ex in enumerate(examples[start : start + 256]):
            order = top[row][np.argsort(-block[row, top[row]], kind="stable")]
            judge = ex.judge(pool)
            bad = judge.passage if level == "passage" else judge.doc
            ex.negatives["mined"] = neg.mined(order, bad, ex.positive(pool, level), per_kind)
            total += len(ex.negatives["mined"])
    return total / max(1, len(examples))


def choose_negatives(
    ex: Example, pool: PassagePool, level: TrainLevel, kinds: Sequence[str], n: int, rng: random.Random
) -> list[int]:
    """``n`` hard negatives for one example, taking the kinds in turn (best of each first).

    The loss needs the same number of negatives in every example, so slots the
    hard kinds cannot fill are filled with random irrelevant texts.
    """
    lists = [list(ex.negatives.get(k, [])) for k in kinds if k != "in-batch"]
    start = rng.randrange(len(lists)) if lists else 0
    lists = lists[start:] + lists[:start]
    chosen: list[int] = []
    seen = {ex.positive(pool, level)}
    depth = max((len(x) for x in lists), default=0)
    for i in range(depth):
        for lst in lists:
            if i < len(lst) and lst[i] not in seen and len(chosen) < n:
                chosen.append(lst[i])
                seen.add(lst[i])
    if len(chosen) < n:
        judge = ex.judge(pool)
        size = len(pool.passage_ids) if level == "passage" else len(pool.doc_ids)
        bad = judge.passage if level == "passage" else judge.doc
        chosen += neg.random_fill(size, bad, seen, n - len(chosen), rng)
    return chosen


# --- persistence ----------------------------------------------------------------


def save_examples(path: Path, examples: Sequence[Example], meta: dict[str, Any]) -> None:
    """JSON lines: a header with ``meta`` (corpus version, level, kinds), then one example per line."""

    def write(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps({"meta": meta}) + "\n")
            for ex in examples:
                f.write(json.dumps(asdict(ex)) + "\n")

    write_atomic(path, write)


def load_examples(path: Path, expect: dict[str, Any]) -> list[Example] | None:
    """Saved examples when their header matches ``expect``, else ``None`` (rebuild)."""
    if not path.exists():
        return None
    try:
        with open(path, encoding="utf-8") as f:
            head = json.loads(f.readline())
            if head.get("meta") != expect:
                return None
            return [Example(**json.loads(line)) for line in f if line.strip()]
    except (json.JSONDecodeError, TypeError, UnicodeDecodeError) as e:
        raise HieraError(f"{path} is corrupt ({e}); delete it to rebuild the examples") from None


def write_report(path: Path, data: dict[str, Any]) -> None:
    write_json_atomic(path, data)
