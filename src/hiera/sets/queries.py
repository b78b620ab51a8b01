"""QUEST-format files: set queries in, predictions out.

Queries (QUEST's ``train/val/test.jsonl`` and hiera's ``quest-vital`` sets),
one JSON object per line::

    {"query": "shorebirds that are not sandpipers",
     "docs": ["Killdeer", ...],                      # gold entity titles
     "original_query": "<mark>Shorebirds</mark> that are not <mark>Sandpipers</mark>",
     "scores": null,
     "metadata": {"template": "_ that are not _", "domain": "animals", "atoms": [...]}}

``original_query`` marks the atomic constraints with ``<mark>``;
``metadata.atoms`` is optional (hiera's ``quest-vital`` files have it; QUEST's
own do not). :func:`load_set_queries` reads such a file into
:class:`SetQuery` values; a malformed line raises a one-line
:class:`~hiera.errors.BadRecordError` naming the file and the line.

Predictions (:func:`write_predictions`, :func:`read_predictions`) are written
in the same record shape, as QUEST's own scripts write them (``docs`` ranked,
``scores`` parallel to ``docs``), so ``run_eval.py`` and
``analyze_retriever.py`` read them unchanged: those scripts build
``ExampleMetadata(**metadata)``, so every record carries a ``metadata``
object holding only ``ExampleMetadata``'s fields (``template``, ``domain``,
...; never hiera's ``atoms``). The official scripts key predictions by query
text, so a prediction file must not repeat a query.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from hiera.corpus.readers.base import json_objects
from hiera.errors import BadInputError, BadRecordError
from hiera.io import write_atomic
from hiera.sets.expr import Expr, from_template, marked_atoms

# The fields of QUEST's ``ExampleMetadata`` (language/quest/common/example_utils.py).
QUEST_METADATA_FIELDS = (
    "template",
    "domain",
    "fluency",
    "meaning",
    "naturalness",
    "relevance_ratings",
    "evidence_ratings",
    "attributions",
)


@dataclass(frozen=True)
class SetQuery:
    """One QUEST-format query with its gold set and annotations."""

    query: str
    docs: tuple[str, ...]  # gold entity titles (may be empty in unannotated files)
    original_query: str | None = None
    template: str | None = None  # metadata.template, e.g. "_ that are not _"
    domain: str | None = None  # metadata.domain, e.g. "films"
    atoms: tuple[str, ...] = ()  # metadata.atoms when given
    marks: tuple[str, ...] = ()  # the <mark>-ed spans of original_query, in order
    metadata: Mapping[str, Any] = field(default_factory=dict)  # the whole metadata object
    line: int = 0  # 1-based line in its file

    def __post_init__(self) -> None:
        if not self.marks and self.original_query:
            object.__setattr__(self, "marks", tuple(marked_atoms(self.original_query)))

    def gold_expression(self) -> Expr:
        """The expression the record's template and marked atoms stand for.

        Uses the ``<mark>`` spans (QUEST's own atoms), else ``metadata.atoms``;
        raises :class:`BadInputError` when the template is missing or its
        number of slots does not match the atoms.
        """
        if not self.template:
            raise BadInputError(f"line {self.line}: query {self.query!r} has no metadata.template")
        texts = self.marks or self.atoms
        try:
            return from_template(self.template, texts)
        except BadInputError as e:
            raise BadInputError(f"line {self.line}: {e}") from None


def _opt_str(value: Any, what: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"{what} must be a string or null")


def _str_list(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{what} must be a list of strings")
    return tuple(value)


def _scores(value: Any, n_docs: int) -> tuple[float, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in value
    ):
        raise ValueError("'scores' must be null or a list of finite numbers")
    if len(value) != n_docs:
        raise ValueError(f"'scores' has {len(value)} entries for {n_docs} docs")
    return tuple(float(v) for v in value)


def _set_query(n: int, rec: dict[str, Any]) -> SetQuery:
    query = rec.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ValueError("missing or empty 'query'")
    docs = _str_list(rec.get("docs"), "'docs'")
    original = _opt_str(rec.get("original_query"), "'original_query'")
    _scores(rec.get("scores"), len(docs))
    meta = rec.get("metadata")
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise ValueError("'metadata' must be an object")
    atoms = meta.get("atoms")
    return SetQuery(
        query=query,
        docs=docs,
        original_query=original,
        template=_opt_str(meta.get("template"), "'metadata.template'"),
        domain=_opt_str(meta.get("domain"), "'metadata.domain'"),
        atoms=() if atoms is None else _str_list(atoms, "'metadata.atoms'"),
        marks=tuple(marked_atoms(original)) if original else (),
        metadata=dict(meta),
        line=n,
    )


def iter_set_queries(path: str | Path) -> Iterator[SetQuery]:
    """Stream the queries of a QUEST-format file (see :func:`load_set_queries`)."""
    path = Path(path)
    for n, rec in json_objects(path):
        try:
            yield _set_query(n, rec)
        except ValueError as e:
            raise BadRecordError(str(path), f"line {n}", str(e)) from None


def load_set_queries(path: str | Path, limit: int | None = None, require_docs: bool = False) -> list[SetQuery]:
    """The first ``limit`` queries of a QUEST-format file.

    With ``require_docs`` a query with an empty gold set is an error (QUEST's
    evaluation scripts refuse one too); otherwise it is kept (QUEST's paper
    examples come without gold).
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise BadInputError(f"limit must be a non-negative integer, got {limit!r}")
    out = list(islice(iter_set_queries(path), limit))
    if require_docs:
        for q in out:
            if not q.docs:
                raise BadRecordError(str(path), f"line {q.line}", "'docs' (the gold set) is empty")
    return out


# --- predictions ----------------------------------------------------------------------


@dataclass(frozen=True)
class Prediction:
    """A predicted (ranked) set for one query, in QUEST's prediction format."""

    query: str
    docs: Sequence[str]
    scores: Sequence[float] | None = None
    template: str | None = None
    domain: str | None = None
    original_query: str | None = None

    @classmethod
    def for_query(cls, q: SetQuery, ranked: Iterable[tuple[str, float]]) -> Prediction:
        """A prediction for ``q`` from ``(title, score)`` pairs, best first, keeping q's template and domain."""
        pairs = list(ranked)
        return cls(
            query=q.query,
            docs=[d for d, _ in pairs],
            scores=[s for _, s in pairs],
            template=q.template,
            domain=q.domain,
            original_query=q.original_query,
        )

    def to_record(self) -> dict[str, Any]:
        """The JSON record QUEST's ``example_utils.read_examples`` accepts."""
        if not isinstance(self.query, str) or not self.query.strip():
            raise BadInputError("a prediction needs a non-empty 'query'")
        docs = list(self.docs)
        if not all(isinstance(d, str) for d in docs):
            raise BadInputError(f"prediction for {self.query!r}: 'docs' must be strings")
        try:
            scores = _scores(None if self.scores is None else list(self.scores), len(docs))
        except ValueError as e:
            raise BadInputError(f"prediction for {self.query!r}: {e}") from None
        return {
            "query": self.query,
            "docs": docs,
            "original_query": self.original_query,
            "scores": None if scores is None else list(scores),
            "metadata": {"template": self.template, "domain": self.domain},
        }


def write_predictions(path: str | Path, preds: Iterable[Prediction]) -> int:
    """Write ``preds`` as a QUEST prediction file, atomically; returns the number written.

    Every prediction is checked before anything is written; the file is
    written beside ``path``, fsynced and renamed over it, so a reader sees the
    old file or the new one. A repeated query is an error (QUEST's scripts
    key predictions by query text).
    """
    path = Path(path)
    records = [p.to_record() for p in preds]
    seen: set[str] = set()
    for r in records:
        if r["query"] in seen:
            raise BadInputError(f"query {r['query']!r} is predicted twice (QUEST keys predictions by query text)")
        seen.add(r["query"])

    def write(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            for r in records:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    write_atomic(path, write)
    return len(records)


def read_predictions(path: str | Path) -> dict[str, Prediction]:
    """A QUEST prediction file keyed by query text; a repeated query is an error."""
    path = Path(path)
    out: dict[str, Prediction] = {}
    for n, rec in json_objects(path):
        try:
            query = rec.get("query")
            if not isinstance(query, str) or not query.strip():
                raise ValueError("missing or empty 'query'")
            docs = _str_list(rec.get("docs"), "'docs'")
            scores = _scores(rec.get("scores"), len(docs))
            meta = rec.get("metadata") or {}
            if not isinstance(meta, dict):
                raise ValueError("'metadata' must be an object")
            if query in out:
                raise ValueError(f"query {query!r} is predicted twice")
            out[query] = Prediction(
                query=query,
                docs=docs,
                scores=scores,
                template=_opt_str(meta.get("template"), "'metadata.template'"),
                domain=_opt_str(meta.get("domain"), "'metadata.domain'"),
                original_query=_opt_str(rec.get("original_query"), "'original_query'"),
            )
        except ValueError as e:
            raise BadRecordError(str(path), f"line {n}", str(e)) from None
    return out


__all__ = [
    "QUEST_METADATA_FIELDS",
    "Prediction",
    "SetQuery",
    "iter_set_queries",
    "load_set_queries",
    "read_predictions",
    "write_predictions",
]


MISSING_PREFIX = "title:"


def gold_ids(store: Any, q: SetQuery) -> tuple[set[str], int]:
    """The gold titles of ``q`` as document ids (a title the store lacks stays as ``title:…``), and how many it lacks."""
    out, missing = set(), 0
    for t in q.docs:
        d = store.resolve_title(t)
        if d is None:
            missing += 1
            out.add(MISSING_PREFIX + t)
        else:
            out.add(d)
    return out, missing
