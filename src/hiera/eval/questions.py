"""Question-set loaders: every benchmark's questions as one :class:`Question` type.

Gold documents and passages are given as the ids the *corpus readers* assign,
so that evaluation can compare them with retrieved ids directly:

* ``squad``: doc id = the article ``title`` as written (``"Super_Bowl_50"``).
  Passage ids are recomputed with :func:`hiera.corpus.split.split_document`
  on the very document :func:`hiera.corpus.readers.squad.article_document` makes,
  because paragraphs longer than ``max_words`` words are cut into several
  passages; ``answer_start`` is mapped to the passage(s) the answer touches.
  The split must use the collection's own passage rules (``--max-words``),
  so callers pass ``rules=CorpusStore(root).rules``.
* ``hotpotqa``: a context's ``id`` is its position in the question ("0".."9"),
  not a corpus id. The paragraph pool (``paragraph_pool.500q.jsonl``) holds
  every distinct (title, paragraph) with ids ``hp0, hp1, …`` which the
  ``hotpotqa-pool`` reader uses as doc ids, so supporting contexts are mapped
  to pool ids by exact (title, text), falling back to whitespace-normalized text.
* ``beir``: the ``corpus-id`` of ``qrels/<split>.tsv`` (the reader uses ``_id``).
* ``quest``: gold entity titles (QUEST's corpus is keyed by title).

Questions of the answer-string formats (``nq-open``, ``dpr-tsv``, ``dpr-jsonl``,
``curated``) carry no gold ids; their id is the 0-based record number. The
``dpr-tsv`` files are read as DPR reads them (``csv`` with a tab delimiter,
so CSV quoting is undone), but the answer list is parsed with
``ast.literal_eval``, never ``eval``.

Errors: a missing, empty or non-UTF-8 file raises :class:`BadInputError`; a
malformed record raises :class:`BadRecordError` naming the line (or article).
"""

from __future__ import annotations

import ast
import csv
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any, Literal

from hiera.corpus.readers.base import check_file, json_objects, utf8_lines
from hiera.corpus.readers.squad import article_document, load_squad_articles
from hiera.corpus.split import split_document, split_words
from hiera.corpus.tree import Document, PassageRules
from hiera.errors import BadInputError, BadRecordError, HieraError, UnknownFormatError

AnswerMode = Literal["string", "regex"]


@dataclass
class Question:
    """One evaluation question with whatever gold the benchmark provides."""

    id: str
    text: str
    answers: list[str]  # answer strings, or regexes when answer_mode == "regex"
    answer_mode: AnswerMode = "string"
    gold_docs: set[str] = field(default_factory=set)  # doc ids as the corpus readers assign them
    gold_passages: set[str] = field(default_factory=set)  # passage ids when the format gives them
    qrels: dict[str, int] = field(default_factory=dict)  # BEIR-style graded judgements (doc ids)
    metadata: dict[str, Any] = field(default_factory=dict)


# --- shared helpers ---------------------------------------------------------------


def _text_field(rec: dict[str, Any], key: str, path: Path, where: str) -> str:
    val = rec.get(key)
    if not isinstance(val, str) or not val.strip():
        raise BadRecordError(str(path), where, f"'{key}' must be a non-empty string")
    return val.strip()


def _answer_list(val: Any, path: Path, where: str, key: str = "answer") -> list[str]:
    """Answers as a non-empty list of strings, deduplicated in order (a bare string is one answer)."""
    if isinstance(val, str):
        val = [val]
    if not isinstance(val, list) or not all(isinstance(a, str) for a in val):
        raise BadRecordError(str(path), where, f"'{key}' must be a list of strings")
    out = list(dict.fromkeys(val))
    if not out:
        raise BadRecordError(str(path), where, f"'{key}' is empty")
    return out


def _check_limit(limit: int | None) -> int | None:
    if limit is None:
        return None
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise BadInputError(f"limit must be a positive integer, got {limit!r}")
    return limit


# --- answer-string formats -------------------------------------------------------


def _iter_answer_jsonl(path: Path, mode: AnswerMode) -> Iterator[Question]:
    for i, (n, rec) in enumerate(json_objects(path)):
        where = f"line {n}"
        text = _text_field(rec, "question", path, where)
        key = "answer" if "answer" in rec else "answers"
        answers = _answer_list(rec.get(key), path, where, key)
        qid = str(rec["id"]) if isinstance(rec.get("id"), str | int) else str(i)
        yield Question(id=qid, text=text, answers=answers, answer_mode=mode)


def load_answer_jsonl(path: Path, limit: int | None = None) -> list[Question]:
    """JSON lines ``{"question", "answer": [...]}`` (NQ-open, DPR WebQuestions)."""
    return list(islice(_iter_answer_jsonl(path, "string"), limit))


def load_curated(path: Path, limit: int | None = None) -> list[Question]:
    """CuratedTREC as DPR ships it: like ``dpr-jsonl``, but each answer is a regular expression."""
    return list(islice(_iter_answer_jsonl(path, "regex"), limit))


def _iter_dpr_tsv(path: Path) -> Iterator[Question]:
    i = 0
    for n, line in utf8_lines(path):
        if not line.strip():
            continue
        where = f"line {n}"
        try:
            row = next(csv.reader([line], delimiter="\t"))
        except csv.Error as e:
            raise BadRecordError(str(path), where, f"not a valid tab-separated row ({e})") from None
        if len(row) != 2:
            raise BadRecordError(str(path), where, f"expected 2 tab-separated fields, found {len(row)}")
        question, raw = row[0].strip(), row[1].strip()
        if not question:
            raise BadRecordError(str(path), where, "the question is empty")
        try:
            answers = ast.literal_eval(raw)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            raise BadRecordError(str(path), where, "the answers are not a Python list literal") from None
        yield Question(id=str(i), text=question, answers=_answer_list(answers, path, where, "answers"))
        i += 1


def load_dpr_tsv(path: Path, limit: int | None = None) -> list[Question]:
    """``question<TAB>['answer', ...]`` (DPR's NQ and TriviaQA test sets)."""
    return list(islice(_iter_dpr_tsv(path), limit))


# --- SQuAD --------------------------------------------------------------------------


def squad_passage_spans(doc: Document, rules: PassageRules | None = None) -> list[list[tuple[int, int, str]]]:
    """For each paragraph of a squad-reader document, its passages as ``(start_char, end_char, passage_id)``.

    Passages come from :func:`split_document` (so ids are exactly the corpus
    ids). The splitter packs each paragraph's whitespace tokens into blocks,
    so every passage is a run of one paragraph's tokens and its character
    extent in the raw context (where ``answer_start`` points) can be recovered.
    Empty paragraphs get no passages, as in the splitter.
    """
    rules = rules or PassageRules()
    passages = split_document(doc, rules)
    out: list[list[tuple[int, int, str]]] = []
    cursor = 0
    for ctx in doc.lead:
        spans: list[tuple[int, int, str]] = []
        if ctx.strip():
            # token character offsets, found the way str.split() cuts them
            offsets: list[tuple[int, int]] = []
            pos = 0
            for tok in ctx.split():
                start = ctx.index(tok, pos)
                pos = start + len(tok)
                offsets.append((start, pos))
            t = 0
            for block in split_words(ctx, rules.max_words):
                p = passages[cursor]
                n_tok = len(block.split())
                if p.text != block:  # the splitter and this walk must agree, or offsets would point elsewhere
                    raise HieraError(f"{doc.id}: passage {p.id} does not match its paragraph text")
                spans.append((offsets[t][0], offsets[t + n_tok - 1][1], p.id))
                t += n_tok
                cursor += 1
        out.append(spans)
    if cursor != len(passages):
        raise HieraError(f"{doc.id}: {len(passages)} passages but {cursor} mapped to paragraphs")
    return out


def _iter_squad(path: Path, rules: PassageRules | None) -> Iterator[Question]:
    for ai, art in enumerate(load_squad_articles(path)):
        where = f"article {ai}"
        # the document exactly as the squad corpus reader makes it, so gold ids match the corpus
        try:
            doc = article_document(art)
        except ValueError as e:
            raise BadRecordError(str(path), where, str(e)) from None
        title = doc.id
        paras = art["paragraphs"]
        spans = squad_passage_spans(doc, rules)
        for pi, para in enumerate(paras):
            for qi, qa in enumerate(para.get("qas") or []):
                qwhere = f"article {ai} paragraph {pi} question {qi}"
                if not isinstance(qa, dict):
                    raise BadRecordError(str(path), qwhere, "a question must be an object")
                if qa.get("is_impossible"):  # SQuAD 2.0 unanswerable: nothing to retrieve
                    continue
                qid = qa.get("id")
                if not isinstance(qid, str | int):
                    raise BadRecordError(str(path), qwhere, "the question needs an 'id'")
                text = _text_field(qa, "question", path, qwhere)
                raw = qa.get("answers")
                if not isinstance(raw, list) or not raw:
                    raise BadRecordError(str(path), qwhere, "'answers' must be a non-empty list")
                answers: list[str] = []
                gold_passages: set[str] = set()
                for ans in raw:
                    if (
                        not isinstance(ans, dict)
                        or not isinstance(ans.get("text"), str)
                        or not isinstance(ans.get("answer_start"), int)
                    ):
                        raise BadRecordError(
                            str(path), qwhere, "an answer needs 'text' and integer 'answer_start'"
                        )
                    answers.append(ans["text"])
                    start = ans["answer_start"]
                    end = start + max(len(ans["text"]), 1)
                    if not 0 <= start < len(para["context"]):
                        raise BadRecordError(
                            str(path), qwhere, f"answer_start {start} is outside the paragraph"
                        )
                    # every passage the answer span touches (normally exactly one)
                    gold_passages.update(pid for s, e, pid in spans[pi] if s < end and e > start)
                yield Question(
                    id=str(qid),
                    text=text,
                    answers=list(dict.fromkeys(answers)),
                    gold_docs={title},
                    gold_passages=gold_passages,
                    metadata={"title": title, "paragraph": pi},
                )


def load_squad(path: Path, limit: int | None = None, rules: PassageRules | None = None) -> list[Question]:
    """SQuAD v1.1 JSON; ``rules`` must be the passage rules the corpus was built with.

    SQuAD 2.0's unanswerable questions are left out (:func:`squad_unanswerable` counts them).
    """
    return list(islice(_iter_squad(path, rules), limit))


def squad_unanswerable(path: str | Path) -> int:
    """How many SQuAD 2.0 questions of ``path`` are marked ``is_impossible``.

    They have no answer to retrieve, so the loader leaves them out; a caller
    says how many, so a SQuAD 2.0 figure is not read as covering the file.
    """
    return sum(
        1
        for art in load_squad_articles(Path(path))
        for para in art["paragraphs"]
        for qa in para.get("qas") or []
        if isinstance(qa, dict) and qa.get("is_impossible")
    )


# --- BEIR -----------------------------------------------------------------------------


def load_beir(path: Path, limit: int | None = None, split: str = "test") -> list[Question]:
    """A BEIR folder: the queries of ``queries.jsonl`` that have judgements in ``qrels/<split>.tsv``.

    As BEIR's loader: the first qrels line is a header, columns are
    ``query-id, corpus-id, score``. ``gold_docs`` are the judged docs with score > 0.
    """
    if not path.is_dir():
        raise BadInputError(f"{path}: a BEIR dataset is a folder (queries.jsonl, qrels/{split}.tsv)")
    qrels_path = path / "qrels" / f"{split}.tsv"
    queries_path = path / "queries.jsonl"
    for p in (qrels_path, queries_path):
        check_file(p)
    qrels: dict[str, dict[str, int]] = {}
    for n, line in utf8_lines(qrels_path):
        if n == 1 or not line.strip():  # header
            continue
        row = line.split("\t")
        if len(row) < 3:
            raise BadRecordError(str(qrels_path), f"line {n}", "expected query-id, corpus-id, score")
        try:
            score = int(row[2])
        except ValueError:
            raise BadRecordError(
                str(qrels_path), f"line {n}", f"score {row[2]!r} is not an integer"
            ) from None
        judged = qrels.setdefault(row[0].strip(), {})
        doc = row[1].strip()
        if judged.get(doc, score) != score:  # which grade counts would depend on the tool reading the file
            raise BadRecordError(
                str(qrels_path), f"line {n}",
                f"query {row[0].strip()!r} judges {doc!r} again, {score} after {judged[doc]}",
            )
        judged[doc] = score
    if not qrels:
        raise BadInputError(f"{qrels_path}: no judgements")
    out: list[Question] = []
    seen: set[str] = set()
    for n, rec in json_objects(queries_path):
        qid = rec.get("_id")
        if not isinstance(qid, str | int) or str(qid).strip() == "":
            raise BadRecordError(str(queries_path), f"line {n}", "a query needs an '_id'")
        qid = str(qid).strip()
        if qid not in qrels:
            continue
        if qid in seen:  # evaluated twice it would weigh twice, and its run file would hold two blocks
            raise BadRecordError(str(queries_path), f"line {n}", f"query id {qid!r} is repeated")
        text = _text_field(rec, "text", queries_path, f"line {n}")
        rels = qrels[qid]
        meta = rec.get("metadata")
        out.append(
            Question(
                id=qid,
                text=text,
                answers=[],
                gold_docs={d for d, r in rels.items() if r > 0},
                qrels=dict(rels),
                metadata=dict(meta) if isinstance(meta, dict) else {},
            )
        )
        seen.add(qid)
        if limit is not None and len(out) >= limit:
            return out
    missing = set(qrels) - seen
    if missing:
        raise BadInputError(
            f"{qrels_path}: {len(missing)} judged queries are not in {queries_path.name} "
            f"(e.g. {sorted(missing)[0]!r})"
        )
    return out


# --- HotpotQA (IRCoT layout) --------------------------------------------------------

DEFAULT_HOTPOT_POOL = "paragraph_pool.500q.jsonl"


def _ws(text: str) -> str:
    return " ".join(text.split())


def load_hotpot_pool(pool: Path) -> tuple[dict[tuple[str, str], str], dict[tuple[str, str], str]]:
    """``(title, text) -> pool id``, exact and whitespace-normalized."""
    exact: dict[tuple[str, str], str] = {}
    loose: dict[tuple[str, str], str] = {}
    for n, rec in json_objects(pool):
        pid, title, text = rec.get("id"), rec.get("title"), rec.get("text")
        if not isinstance(pid, str | int) or not isinstance(title, str) or not isinstance(text, str):
            raise BadRecordError(str(pool), f"line {n}", "a pool record needs 'id', 'title' and 'text'")
        exact.setdefault((title, text), str(pid))
        loose.setdefault((_ws(title), _ws(text)), str(pid))
    return exact, loose


def _iter_hotpotqa(path: Path, pool: Path) -> Iterator[Question]:
    exact, loose = load_hotpot_pool(pool)
    for n, rec in json_objects(path):
        where = f"line {n}"
        qid = rec.get("question_id")
        if not isinstance(qid, str | int):
            raise BadRecordError(str(path), where, "the question needs a 'question_id'")
        text = _text_field(rec, "question_text", path, where)
        answers: list[str] = []
        objs = rec.get("answers_objects")
        if not isinstance(objs, list):
            raise BadRecordError(str(path), where, "'answers_objects' must be a list")
        for obj in objs:
            spans = obj.get("spans") if isinstance(obj, dict) else None
            if not isinstance(spans, list) or not all(isinstance(s, str) for s in spans):
                raise BadRecordError(str(path), where, "each answers_object needs a 'spans' list of strings")
            answers.extend(spans)
            if isinstance(obj.get("number"), str) and obj["number"].strip():
                answers.append(obj["number"].strip())
        answers = [a for a in dict.fromkeys(answers) if a.strip()]
        if not answers:
            raise BadRecordError(str(path), where, "no answer spans")
        contexts = rec.get("contexts")
        if not isinstance(contexts, list):
            raise BadRecordError(str(path), where, "'contexts' must be a list")
        gold: set[str] = set()
        titles: list[str] = []
        for ci, ctx in enumerate(contexts):
            if (
                not isinstance(ctx, dict)
                or not isinstance(ctx.get("title"), str)
                or not isinstance(ctx.get("paragraph_text"), str)
            ):
                raise BadRecordError(str(path), where, f"context {ci} needs 'title' and 'paragraph_text'")
            if not ctx.get("is_supporting"):
                continue
            key = (ctx["title"], ctx["paragraph_text"])
            pid = exact.get(key) or loose.get((_ws(key[0]), _ws(key[1])))
            if pid is None:
                raise BadRecordError(
                    str(path), where, f"supporting paragraph {ctx['title']!r} is not in the pool {pool.name}"
                )
            gold.add(pid)
            titles.append(ctx["title"])
        yield Question(
            id=str(qid),
            text=text,
            answers=answers,
            gold_docs=gold,
            metadata={"supporting_titles": titles},
        )


def load_hotpotqa(path: Path, limit: int | None = None, pool: str | Path | None = None) -> list[Question]:
    """IRCoT-style HotpotQA JSON lines; gold docs are paragraph-pool ids.

    ``pool`` defaults to ``paragraph_pool.500q.jsonl`` beside ``path``. A
    supporting paragraph absent from the pool is an error, not a silent miss:
    it would make the question unanswerable for every retriever.
    """
    check_file(path)
    pool_path = Path(pool) if pool is not None else path.parent / DEFAULT_HOTPOT_POOL
    if not pool_path.exists():
        raise BadInputError(
            f"{pool_path}: no paragraph pool; hotpotqa gold ids are pool ids: give the pool with "
            f"--pool PATH (hiera eval/tune), or pool=PATH to load_questions"
        )
    return list(islice(_iter_hotpotqa(path, pool_path), limit))


# --- QUEST ------------------------------------------------------------------------


def _iter_quest(path: Path) -> Iterator[Question]:
    for i, (n, rec) in enumerate(json_objects(path)):
        where = f"line {n}"
        text = _text_field(rec, "query", path, where)
        docs = rec.get("docs")
        if not isinstance(docs, list) or not docs or not all(isinstance(d, str) for d in docs):
            raise BadRecordError(str(path), where, "'docs' must be a non-empty list of titles")
        meta = rec.get("metadata") or {}
        if not isinstance(meta, dict):
            raise BadRecordError(str(path), where, "'metadata' must be an object")
        metadata: dict[str, Any] = {
            "template": meta.get("template"),
            "domain": meta.get("domain"),
            "original_query": rec.get("original_query"),
        }
        yield Question(id=str(i), text=text, answers=list(docs), gold_docs=set(docs), metadata=metadata)


def load_quest(path: Path, limit: int | None = None) -> list[Question]:
    """QUEST JSON lines: ``query``, ``docs`` (gold entity titles), ``metadata.template/domain``.

    Ids are record numbers (QUEST's own script keys predictions by query
    text); ``answers`` also lists the gold titles, for display.
    """
    return list(islice(_iter_quest(path), limit))


# --- registry -------------------------------------------------------------------------

Loader = Callable[..., list[Question]]

QUESTION_FORMATS: dict[str, Loader] = {
    "squad": load_squad,
    "nq-open": load_answer_jsonl,
    "dpr-tsv": load_dpr_tsv,
    "dpr-jsonl": load_answer_jsonl,
    "curated": load_curated,
    "beir": load_beir,
    "hotpotqa": load_hotpotqa,
    "quest": load_quest,
}


def load_questions(
    path: str | Path,
    fmt: str,
    limit: int | None = None,
    *,
    rules: PassageRules | None = None,
    **options: Any,
) -> list[Question]:
    """Load the first ``limit`` questions of ``path`` in format ``fmt``.

    ``rules`` are the passage rules of the collection the questions will be
    run against (``CorpusStore(root).rules``; None means the defaults). They
    belong to the collection, not the format, so every format takes them and
    those whose gold ids are not passage ids ignore them. ``options`` go to
    the loader: ``split`` (beir), ``pool`` (hotpotqa).
    """
    try:
        loader = QUESTION_FORMATS[fmt]
    except KeyError:
        raise UnknownFormatError(
            f"unknown question format {fmt!r}; known formats: {', '.join(sorted(QUESTION_FORMATS))}"
        ) from None
    limit = _check_limit(limit)
    path = Path(path)
    if fmt != "beir":
        check_file(path)
        if path.is_dir():
            raise BadInputError(f"{path}: is a folder; the {fmt} format reads one file")
    params = inspect.signature(loader).parameters
    accepted = set(params) - {"path", "limit", "rules"}
    unknown = sorted(set(options) - accepted)
    if unknown:
        known = ", ".join(sorted(accepted)) or "none"
        raise BadInputError(f"format {fmt!r} does not take option(s) {', '.join(unknown)}; it takes: {known}")
    if "rules" in params:
        options["rules"] = rules
    questions = loader(path, limit=limit, **options)
    if not questions:  # an evaluation of nothing would print an empty table and exit 0
        raise BadInputError(f"{path}: no questions in it (read as {fmt})")
    return questions


__all__ = [
    "QUESTION_FORMATS",
    "Question",
    "load_answer_jsonl",
    "load_beir",
    "load_curated",
    "load_dpr_tsv",
    "load_hotpotqa",
    "load_questions",
    "load_quest",
    "load_squad",
    "squad_passage_spans",
]
