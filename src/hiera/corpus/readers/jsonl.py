"""JSON-lines sources: BEIR corpora, generic ``{id, title, text}`` and hiera-jsonl.

All three stream line by line (one record in memory), skip blank lines, and
report a bad line (invalid JSON, not an object, a missing or mistyped field)
through ``on_bad`` as ``line N``. None of them checks that ids are unique:
that would need memory proportional to the corpus, and the store rejects a
repeated id anyway.

* ``beir``: ``{"_id", "title", "text", "metadata"?}`` per line, as in BEIR's
  ``corpus.jsonl``; a BEIR dataset folder may be given instead of the file.
  Many BEIR corpora have empty titles; the id stands in, because every
  document needs a title and a made-up one would mislead title matching.
* ``jsonl`` / ``hotpotqa-pool``: ``{"id", "title", "text"}`` per line; other
  scalar fields are kept in ``metadata``. In the HotpotQA pool every record
  is one distinct (title, paragraph) and titles are unique, so record id =
  document id with nothing to merge.
* ``hiera-jsonl``: one :meth:`Document.to_dict` record per line (see
  docs/FORMATS.md), read back with :meth:`Document.from_dict`.

``text`` becomes the lead, split into paragraphs at blank lines; single
newlines are soft wraps.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hiera.corpus.readers.base import OnBad, Record, blank_line_paragraphs, raise_bad, utf8_lines
from hiera.corpus.tree import Document
from hiera.errors import BadRecordError
from hiera.io import loads_json

_Convert = Callable[[dict[str, Any]], Document]


def read_beir(path: Path, on_bad: OnBad = raise_bad) -> Iterator[Record]:
    """Documents of a BEIR ``corpus.jsonl`` (or of the dataset folder holding it)."""
    path = Path(path)
    if path.is_dir():
        path = path / "corpus.jsonl"
    return read_records(path, on_bad, _beir_record)


def read_jsonl(path: Path, on_bad: OnBad = raise_bad) -> Iterator[Record]:
    """Documents of a generic ``{id, title, text}`` JSON-lines file."""
    return read_records(Path(path), on_bad, _plain_record)


def read_hiera_jsonl(path: Path, on_bad: OnBad = raise_bad) -> Iterator[Record]:
    """Documents previously written with ``Document.to_dict``, one per line."""
    return read_records(Path(path), on_bad, Document.from_dict)


def read_records(path: Path, on_bad: OnBad, convert: _Convert) -> Iterator[Record]:
    """One converted document per JSON-object line; bad lines go to ``on_bad`` with their line number."""
    for lineno, line in utf8_lines(path):
        if not line.strip():
            continue
        try:
            record = loads_json(line)
        except json.JSONDecodeError as e:
            on_bad(BadRecordError(str(path), f"line {lineno}", f"not valid JSON: {e.msg} (column {e.colno})"))
            continue
        if not isinstance(record, dict):
            on_bad(BadRecordError(str(path), f"line {lineno}", "a record must be a JSON object"))
            continue
        try:
            doc = convert(record)
        except (ValueError, TypeError, AttributeError) as e:
            on_bad(BadRecordError(str(path), f"line {lineno}", str(e)))
            continue
        yield doc


def _required_id(record: dict[str, Any], key: str) -> str:
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, str | int) or not str(value).strip():
        raise ValueError(f"missing or empty {key!r}")
    return str(value).strip()


def _text(record: dict[str, Any]) -> str:
    text = record.get("text")
    if not isinstance(text, str):
        raise ValueError("missing 'text' (must be a string)")
    return text


def _beir_record(record: dict[str, Any]) -> Document:
    doc_id = _required_id(record, "_id")
    text = _text(record)
    title = record.get("title", "")
    if title is None:
        title = ""
    if not isinstance(title, str):
        raise ValueError("'title' must be a string")
    meta = record.get("metadata")
    metadata: dict[str, Any] = dict(meta) if isinstance(meta, dict) else {}
    metadata["source"] = "beir"
    return Document(
        id=doc_id,
        title=" ".join(title.split()) or doc_id,
        lead=blank_line_paragraphs(text),
        metadata=metadata,
    )


def _plain_record(record: dict[str, Any]) -> Document:
    doc_id = _required_id(record, "id")
    title = record.get("title")
    if not isinstance(title, str) or not title.strip():
        raise ValueError("missing or empty 'title'")
    text = _text(record)
    source = record.get("source")
    if source is None:
        source = "jsonl"
    elif not isinstance(source, str) or not source.strip():
        # a filter's ``source = wikipedia`` matches strings only: a number or list here would vanish silently
        raise ValueError("'source' must be a non-empty string when given")
    metadata: dict[str, Any] = {
        k: v
        for k, v in record.items()
        if k not in ("id", "title", "text") and isinstance(v, str | int | float | bool)
    }
    metadata["source"] = source.strip()
    return Document(
        id=doc_id, title=" ".join(title.split()), lead=blank_line_paragraphs(text), metadata=metadata
    )
