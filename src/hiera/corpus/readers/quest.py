"""QUEST's entity corpus: ``documents.jsonl``, one ``{"title", "text"}`` per line.

QUEST (Malaviya et al., 2023) keys its 325k Wikipedia entity documents by
title: the gold ``docs`` of its query files and the ``docs`` of its prediction
files are titles. So the document id is the ``title`` exactly as written (not
a slug), and gold titles compare with retrieved ids directly. The displayed
title is the same with whitespace runs collapsed.

``text`` is plain Wikipedia text; each newline is taken as a paragraph break
(plain-text Wikipedia has no soft wraps), so the lead is the text split at
newlines, whitespace collapsed and blank paragraphs dropped. An empty ``text`` gives a title-only document, as the
official ``Document(title, text)`` accepts it.

The file streams line by line (one record in memory); blank lines are
skipped. A bad line (invalid JSON, not an object, a missing or mistyped
``title``/``text``) is reported through ``on_bad`` as ``line N``. Fields other
than ``title`` and ``text`` are kept in ``metadata`` when scalar. Titles are
not checked for uniqueness (that would grow with the corpus; the store
rejects a repeated id).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hiera.corpus.readers.base import OnBad, Record, normalize_ws, raise_bad
from hiera.corpus.readers.jsonl import read_records
from hiera.corpus.tree import Document

SOURCE = "quest"
_NEWLINES = re.compile(r"\s*\n\s*")


def read_quest_documents(path: Path, on_bad: OnBad = raise_bad) -> Iterator[Record]:
    """One lead-only document per line of QUEST's ``documents.jsonl`` (id = title)."""
    return read_records(Path(path), on_bad, quest_document)


def quest_document(record: dict[str, Any]) -> Document:
    """The document of one ``{"title", "text"}`` record; ``ValueError`` names what is wrong."""
    title = record.get("title")
    if not isinstance(title, str) or not title.strip():
        raise ValueError("missing or empty 'title'")
    text = record.get("text")
    if not isinstance(text, str):
        raise ValueError("missing 'text' (must be a string)")
    paragraphs = [p for p in (normalize_ws(b) for b in _NEWLINES.split(text)) if p]
    metadata: dict[str, Any] = {
        k: v for k, v in record.items() if k not in ("title", "text") and isinstance(v, str | int | float | bool)
    }
    metadata["source"] = SOURCE
    return Document(id=title, title=normalize_ws(title), lead=paragraphs, metadata=metadata)
