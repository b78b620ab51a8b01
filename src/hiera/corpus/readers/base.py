"""What every reader shares: the record types it yields and the bad-record hook.

A reader is a function ``read(path, on_bad) -> Iterator[Document | Redirect]``
that streams: it holds at most one record in memory, so memory does not grow
with the input. A malformed record is reported through ``on_bad`` with a
:class:`~hiera.errors.BadRecordError` naming the file and the line/record; the
hook either raises (the default: the ingest stops and rolls back) or counts and
returns (``--skip-bad``), in which case the reader goes on with the next record.
"""

from __future__ import annotations

import codecs
import json
import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from hiera.corpus.tree import Document, Section
from hiera.errors import BadInputError, BadRecordError
from hiera.io import loads_json


@dataclass(frozen=True)
class Redirect:
    """``alias`` is another name of the document titled ``target`` (not a document)."""

    alias: str
    target: str


Record = Document | Redirect
OnBad = Callable[[BadRecordError], None]


def raise_bad(err: BadRecordError) -> None:
    raise err


class Reader(Protocol):
    def __call__(self, path: Path, on_bad: OnBad = raise_bad) -> Iterator[Record]: ...


def check_file(path: Path) -> None:
    """Fail early, with one clear line, on a missing or empty source."""
    if not path.exists():
        raise BadInputError(f"{path}: no such file or directory")
    if path.is_file() and path.stat().st_size == 0:
        raise BadInputError(f"{path}: file is empty")


def utf8_lines(path: Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` decoding strictly as UTF-8 (BOM tolerated).

    Decoding is incremental so memory stays flat; a non-UTF-8 byte raises a
    :class:`BadInputError` naming the line.
    """
    check_file(path)
    decoder = codecs.getincrementaldecoder("utf-8-sig")(errors="strict")
    lineno = 0
    buf = ""
    with open(path, "rb") as fh:
        while True:
            chunk = fh.read(1 << 16)
            try:
                buf += decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as e:
                # The bad byte sits in this chunk; count the newlines before it.
                before = bytes(e.object[: e.start]).count(b"\n")
                raise BadInputError(
                    f"{path}: line {lineno + buf.count(chr(10)) + before + 1}: not valid UTF-8 ({e.reason})"
                ) from None
            *lines, buf = buf.split("\n")
            for line in lines:
                lineno += 1
                yield lineno, line.rstrip("\r")
            if not chunk:
                break
    if buf:
        yield lineno + 1, buf.rstrip("\r")


def json_objects(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line of a JSON-lines file; the first bad line stops it.

    For files read whole (question sets, predictions), where one bad line
    makes the file unusable; corpus readers report bad lines through ``on_bad`` instead.
    """
    for n, line in utf8_lines(path):
        if not line.strip():
            continue
        try:
            rec = loads_json(line)
        except json.JSONDecodeError as e:
            raise BadRecordError(str(path), f"line {n}", f"not valid JSON ({e.msg}, column {e.colno})") from None
        if not isinstance(rec, dict):
            raise BadRecordError(str(path), f"line {n}", "a record must be a JSON object")
        yield n, rec


def read_utf8(path: Path) -> str:
    """Read a whole (small, JSON) file as UTF-8 with a clear error."""
    check_file(path)
    try:
        return path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise BadInputError(f"{path}: not valid UTF-8 at byte {e.start}") from None


# --- small text helpers shared by several readers (additive) -----------------

_BLANK_LINES = re.compile(r"\n[ \t\r\f\v]*\n")
_SLUG_JUNK = re.compile(r"[\W_]+")


def normalize_ws(text: str) -> str:
    """Collapse all whitespace runs to one space: passages are split on whitespace anyway."""
    return " ".join(text.split())


def blank_line_paragraphs(text: str) -> list[str]:
    """Blank-line-separated blocks, whitespace-normalized, empty blocks dropped.

    Single newlines inside a block are soft wraps (JSON exports, markdown), so
    they do not start a new paragraph.
    """
    return [p for p in (normalize_ws(b) for b in _BLANK_LINES.split(text)) if p]


def slugify(text: str) -> str:
    """A readable, URL-safe id for sources that have titles but no ids.

    Accents are folded to ASCII so that "Dürenstein" gives "durenstein"; a
    title with no Latin letters at all keeps its Unicode word characters
    rather than collapsing to an empty id.
    """
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = _SLUG_JUNK.sub("-", folded.lower()).strip("-")
    if not slug:
        slug = _SLUG_JUNK.sub("-", text.lower()).strip("-")
    return slug or "untitled"


class UniqueIds:
    """Hand out ids unique within one read: a repeated base gets ``-2``, ``-3``...

    Remembers every id handed out (a few dozen bytes each), which is the one
    thing a title-keyed source cannot avoid keeping.
    """

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def __call__(self, base: str) -> str:
        candidate, n = base, 1
        while candidate in self._seen:
            n += 1
            candidate = f"{base}-{n}"
        self._seen.add(candidate)
        return candidate


def prune_sections(sections: list[Section]) -> list[Section]:
    """Drop sections with no text anywhere below them (tables, reflists, link lists)."""
    kept: list[Section] = []
    for s in sections:
        s.children = prune_sections(s.children)
        if s.paragraphs or s.children:
            kept.append(s)
    return kept
