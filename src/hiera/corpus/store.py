"""The corpus store: one SQLite file per collection directory.

SQLite gives us one transaction per ingest for free: a bad record rolls the
whole ingest back, so the collection is exactly as it was. Documents keep
their full tree as JSON (for ``/documents/{id}`` and re-splitting); passages
are materialized rows so indexes can refer to them by integer row id.

Every successful ingest bumps ``version``; indexes record the version they
were built at, and refuse to load against a newer corpus (stale index).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hiera.corpus.dedup import DUPLICATE_MODES, Part, compose, origin_label, title_key
from hiera.corpus.readers.base import OnBad, Record, Redirect, raise_bad
from hiera.corpus.split import split_document
from hiera.corpus.tree import Document, Passage, PassageRules
from hiera.errors import (
    BadInputError,
    BadRecordError,
    HieraError,
    IndexMissingError,
    ManifestMismatchError,
    StoreBusyError,
)

STORE_FILE = "corpus.sqlite"
# A first ingest fills this file and renames it to STORE_FILE when it commits: killed before, it leaves no
# corpus.sqlite, so no empty collection that looks valid (the next first ingest clears it).
FIRST_INGEST_FILE = ".corpus.sqlite.ingesting"
# A write transaction keeps up to this many KiB of changed pages in memory. Past SQLite's default (2 MiB) it
# would write them into the file before COMMIT, which takes the exclusive lock at once: every search would then
# wait, and fail after the busy timeout, for the rest of an `add` (its build runs inside the transaction).
WRITE_CACHE_KIB = 512 * 1024
READ_CACHE_KIB = 2000  # SQLite's default, restored once the transaction ends
BUSY_TIMEOUT_S = 30.0  # how long a statement waits for another process's commit before StoreBusyError


@contextmanager
def _write_transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """A write transaction whose changes stay in memory until the block's COMMIT, so readers are not locked out.

    Any exception in the block rolls back what it wrote (unless SQLite already did, as after a full disk); the
    page cache is back to its reading size afterwards, whatever happened.
    """
    conn.execute(f"PRAGMA cache_size=-{WRITE_CACHE_KIB}")
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    finally:
        conn.execute(f"PRAGMA cache_size=-{READ_CACHE_KIB}")


class _Connection(sqlite3.Connection):
    """A connection whose statements report a lock held past the busy timeout as :class:`StoreBusyError`.

    SQLite says ``database is locked``, which as a raw ``OperationalError``
    would read as a damaged store (CLI) or an internal error (HTTP 500).
    """

    _hiera_path = ""  # the store file, for the message

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        try:
            return super().execute(sql, parameters)
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) and "busy" not in str(e):
                raise
            raise StoreBusyError(
                f"the corpus store of {Path(self._hiera_path).parent} stayed locked by another process's change for "
                f"{BUSY_TIMEOUT_S:.0f} s; try again in a moment"
            ) from None


SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    rowid INTEGER PRIMARY KEY,
    id TEXT UNIQUE NOT NULL,
    title TEXT NOT NULL,
    summary TEXT NOT NULL,
    tree TEXT NOT NULL,
    n_sections INTEGER NOT NULL,
    n_passages INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS passages (
    rowid INTEGER PRIMARY KEY,
    id TEXT UNIQUE NOT NULL,
    doc_id TEXT NOT NULL,
    ord INTEGER NOT NULL,
    section_path TEXT NOT NULL,
    text TEXT NOT NULL,
    words INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS passages_doc ON passages(doc_id, ord);
CREATE TABLE IF NOT EXISTS aliases (alias TEXT PRIMARY KEY, target TEXT NOT NULL);
"""

# Duplicates across sources (hiera.corpus.dedup): every document's title key, and the parts of merged documents.
# Created by the first ingest that needs them, so a store written before them still opens and reads as it did.
_DEDUP_SCHEMA = """
CREATE TABLE IF NOT EXISTS title_keys (doc_id TEXT PRIMARY KEY, key TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS title_keys_key ON title_keys(key);
CREATE TABLE IF NOT EXISTS doc_parts (
    part_id TEXT PRIMARY KEY,
    doc_id TEXT NOT NULL,
    ord INTEGER NOT NULL,
    origin TEXT NOT NULL,
    tree TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS doc_parts_doc ON doc_parts(doc_id, ord);
CREATE INDEX IF NOT EXISTS aliases_target ON aliases(target);
"""

# Documents' row ids that a replacement or a removal retired, with the id they had: a build that still holds
# those rows (tombstoned) tells a deleted document from a superseded one by it, and `hiera check` verifies
# tombstones against it. Created by the first writer that retires a row.
_RETIRED_SCHEMA = "CREATE TABLE IF NOT EXISTS retired (rowid INTEGER PRIMARY KEY, doc_id TEXT NOT NULL)"
_RETIRE = "INSERT OR IGNORE INTO retired SELECT rowid, id FROM documents WHERE id=?"


@dataclass
class IngestReport:
    documents: int = 0
    replaced: int = 0
    passages: int = 0
    redirects: int = 0
    merged: int = 0  # documents folded into one another source already held (--duplicates merge)
    duplicates: int = 0  # documents left out because another source already held them (--duplicates skip)
    skipped: int = 0
    skipped_examples: list[str] = field(default_factory=list)
    new_doc_ids: list[str] = field(default_factory=list)
    repeated: list[str] = field(default_factory=list)  # ids given again within one file: the last record is kept
    unchanged: int = 0  # documents given again exactly as stored: nothing written, nothing for the index to redo
    changed: bool = True  # False: nothing was written (every document unchanged or skipped), no new version


@dataclass
class RemoveReport:
    documents: int = 0
    passages: int = 0
    ids: list[str] = field(default_factory=list)
    parts: int = 0  # parts taken out of merged documents that keep their other sources (``source=``)


@dataclass(frozen=True)
class DocRow:
    """The per-document fields indexes need, without parsing the tree."""

    rowid: int
    id: str
    title: str
    summary: str


class CorpusStore:
    """Read/write access to a collection's ``corpus.sqlite``.

    Connections are per thread (the HTTP server answers requests concurrently).
    """

    def __init__(self, root: Path, *, create: bool = False, file: str = STORE_FILE) -> None:
        self.root = Path(root)
        self.path = self.root / file
        if not self.path.exists() and not create:
            raise IndexMissingError(
                f"{self.root} is not a hiera collection (no {STORE_FILE}); create it with `hiera ingest`"
            )
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._stats: dict[str, int] | None = None
        if create:
            self.root.mkdir(parents=True, exist_ok=True)
            conn = self._conn()
            conn.executescript(_SCHEMA)
            conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            conn.execute("INSERT OR IGNORE INTO meta VALUES ('version', '0')")
            conn.commit()

    # -- connections ---------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            try:
                # each thread uses only its own connection; the check is off so close_all may close every one
                conn = sqlite3.connect(self.path, isolation_level=None, timeout=BUSY_TIMEOUT_S,
                                       factory=_Connection, check_same_thread=False)
                conn._hiera_path = str(self.path)
                conn.execute("PRAGMA journal_mode=DELETE")
            except sqlite3.DatabaseError as e:
                raise HieraError(f"{self.path}: cannot open corpus store ({e})") from None
            self._local.conn = conn
            with self._conns_lock:
                self._conns.append(conn)
        return conn

    def close(self) -> None:
        """Close this thread's connection (another call opens a new one)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def close_all(self) -> None:
        """Close every thread's connection: the store is done with (a closed collection's file handles go now)."""
        with self._conns_lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            conn.close()
        self._local = threading.local()

    # -- meta ----------------------------------------------------------
    def _meta(self, key: str) -> str | None:
        row = self._conn().execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    @property
    def version(self) -> int:
        return int(self._meta("version") or 0)

    @property
    def published_build(self) -> str | None:
        """The build an ``add`` swapped in inside the transaction that last committed documents with one, if any."""
        return self._meta("published_build")

    def mark_published(self, build: str) -> None:
        """Inside an open ingest transaction: this build goes live with these documents (committed together or not)."""
        self._conn().execute("INSERT OR REPLACE INTO meta VALUES ('published_build', ?)", (build,))

    @property
    def rules(self) -> PassageRules | None:
        raw = self._meta("rules")
        return PassageRules.from_dict(json.loads(raw)) if raw else None

    @property
    def title_sep(self) -> str:
        """What joins a passage's title path to its text: the ingest's rule, or the default rule's."""
        rules = self.rules  # one read of the stored rules (each access parses them)
        return (rules or PassageRules()).title_sep

    # -- writing -------------------------------------------------------
    def ingest(
        self,
        records: Iterable[Record],
        rules: PassageRules | None = None,
        on_bad: OnBad = raise_bad,
        progress: Any = None,
        source: str | Callable[[], str] = "input",
        before_commit: Callable[[], None] | None = None,
        duplicates: str = "merge",
    ) -> IngestReport:
        """Insert or replace documents in one transaction.

        Any exception (a bad record with the default ``on_bad``, a reader
        error, Ctrl-C) rolls back everything this call wrote.
        ``before_commit`` runs inside the transaction, after the version bump,
        on this thread (so it reads the new documents through this store):
        ``hiera add`` builds the new index there, so that the documents and the
        index that serves them land together or not at all.

        ``source``: where the records come from (a callable is asked again for
        every record: the file being read). ``duplicates``: what to do with a
        new document that a *another* source already holds, found by title key
        or a stored redirect (:mod:`hiera.corpus.dedup`): ``merge`` it into that
        document (its id then resolves to it), ``keep`` both, or ``skip`` it.
        Documents of the same source file are never duplicates of each other.
        """
        if duplicates not in DUPLICATE_MODES:
            raise BadInputError(f"--duplicates must be one of {', '.join(DUPLICATE_MODES)}, got {duplicates!r}")
        existing = self.rules
        rules = rules or existing or PassageRules()
        if existing is not None and existing != rules:
            raise ManifestMismatchError(
                f"{self.root} was built with passage rules {existing.to_dict()}; "
                f"refusing to add documents split with {rules.to_dict()}"
            )
        report = IngestReport()
        conn = self._conn()
        with _write_transaction(conn):
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('rules', ?)", (json.dumps(rules.to_dict()),))
            writer = _Writer(conn, rules, report, duplicates)
            changes = conn.total_changes
            where = source if callable(source) else (lambda: source)
            for rec in records:
                writer.at(where())
                if isinstance(rec, Redirect):
                    writer.redirect(rec)
                    continue
                try:
                    writer.document(rec)
                except ValueError as e:
                    on_bad(BadRecordError(where(), f"document {rec.id!r}", str(e)))
                    report.skipped += 1
                if progress is not None:
                    progress.update(1)
            if existing is not None and conn.total_changes == changes:
                # every document unchanged or skipped: no new version, so no build is published and no server
                # reloads for nothing
                conn.execute("ROLLBACK")
                report.changed = False
                return report
            writer.finish()
            conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'version'")
            if before_commit is not None:
                before_commit()
            conn.execute("COMMIT")
        return report

    def remove(self, doc_ids: Sequence[str], before_commit: Callable[[], None] | None = None, *,
               source: str | None = None, of_source: Sequence[str] = ()) -> RemoveReport:
        """Remove documents (a merged document with every part) in one transaction; nothing changes on any refusal.

        ``of_source``: documents to remove what ``source`` contributed to: a merged document that also holds other
        sources' parts loses only that source's parts and is composed again from the rest (it keeps the id of its
        first remaining part); any other document goes whole. Unknown ids, and removing every document, are
        refused before anything is written. ``before_commit`` runs inside the transaction after the version bump,
        as in :meth:`ingest` (the live build is updated there).
        """
        if of_source and not source:
            raise ValueError("of_source names documents to take a source's parts from: give the source")
        conn = self._conn()
        report = RemoveReport()
        with _write_transaction(conn):
            wanted = list(dict.fromkeys([*doc_ids, *of_source]))
            resolved = {i: self.canonical_id(i) for i in wanted}
            unknown = [i for i, c in resolved.items() if c is None]
            if unknown:
                more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
                raise BadInputError(f"unknown document ids: {', '.join(map(repr, unknown[:5]))}{more}; nothing removed")
            ids = list(dict.fromkeys(resolved[i] for i in doc_ids if resolved[i] is not None))
            # a plain removal needs no writer: it recomposes nothing (and its set-up reads two whole tables)
            writer = _Writer(conn, self.rules or PassageRules(), IngestReport(), "merge") if of_source else None
            keep: dict[str, list[Part]] = {}  # merged documents that lose some parts → the parts they keep
            for d in dict.fromkeys(resolved[i] for i in of_source):
                if d is None or d in ids or writer is None:
                    continue
                parts = writer.parts(d)
                rest = [p for p in parts if origin_label(p.doc, p.origin) != source]
                if len(parts) > 1 and rest:
                    keep[d] = rest
                    report.parts += len(parts) - len(rest)
                else:
                    ids.append(d)
            if not ids and not keep:
                raise BadInputError("no documents to remove; nothing removed")
            total = conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
            if len(ids) >= total:
                raise BadInputError(
                    f"that would remove every document of {self.root} ({total}); nothing removed "
                    "(a collection keeps at least one document: delete its directory to drop it)"
                )
            conn.execute(_RETIRED_SCHEMA)
            merges = self._merges() or bool(keep)
            titles: list[str] = []
            for doc_id in ids:
                title = conn.execute("SELECT title FROM documents WHERE id=?", (doc_id,)).fetchone()[0]
                report.passages += conn.execute("SELECT COUNT(*) FROM passages WHERE doc_id=?", (doc_id,)).fetchone()[0]
                conn.execute(_RETIRE, (doc_id,))
                for q in ("DELETE FROM passages WHERE doc_id=?", "DELETE FROM documents WHERE id=?"):
                    conn.execute(q, (doc_id,))
                if merges:
                    conn.execute("DELETE FROM title_keys WHERE doc_id=?", (doc_id,))
                    conn.execute("DELETE FROM doc_parts WHERE doc_id=?", (doc_id,))
                titles.append(title)
            # redirects to a removed title lead nowhere now: one pass (titles are not indexed), not one per document
            for chunk in _chunks(titles, 500):
                conn.execute(f"DELETE FROM aliases WHERE target IN ({','.join('?' * len(chunk))}) "
                             "AND target NOT IN (SELECT title FROM documents)", chunk)
            if writer is not None:
                for d, rest in keep.items():
                    before = conn.execute("SELECT COUNT(*) FROM passages WHERE doc_id=?", (d,)).fetchone()[0]
                    if rest[0].id != d:  # its first part goes: the rest become one document under their first's id
                        writer.delete(d)
                    writer.recompose(rest[0].id, rest)
                    report.passages += before - conn.execute(
                        "SELECT COUNT(*) FROM passages WHERE doc_id=?", (rest[0].id,)).fetchone()[0]
                writer.finish()
            report.documents, report.ids = len(ids), ids
            conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'version'")
            if before_commit is not None:
                before_commit()
            conn.execute("COMMIT")
        return report

    def retired(self, rowids: Sequence[int]) -> dict[int, str]:
        """Document row id → the id it had, for rows a replacement or removal retired (others are left out)."""
        conn = self._conn()
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='retired'").fetchone():
            return {}
        out: dict[int, str] = {}
        for chunk in _chunks([int(r) for r in rowids], 900):
            q = f"SELECT rowid, doc_id FROM retired WHERE rowid IN ({','.join('?' * len(chunk))})"
            out.update({int(r): str(d) for r, d in conn.execute(q, chunk)})
        return out

    def passage_counts(self, rowids: Sequence[int]) -> dict[int, int]:
        """Document row id → its number of passages."""
        out: dict[int, int] = {}
        for chunk in _chunks([int(r) for r in rowids], 900):
            q = f"SELECT rowid, n_passages FROM documents WHERE rowid IN ({','.join('?' * len(chunk))})"
            out.update({int(r): int(n) for r, n in self._conn().execute(q, chunk)})
        return out

    def doc_rowids(self) -> set[int]:
        """Row ids of every document held now."""
        return {int(r) for (r,) in self._conn().execute("SELECT rowid FROM documents")}

    # -- reading -------------------------------------------------------
    def stats(self) -> dict[str, int]:
        """Counts of the corpus, computed once per corpus version.

        The sums and maxima scan every row (a quarter of a second at a
        million passages, on every ``/health``); every write bumps the
        version in its own transaction, so a cached answer for the current
        version is the current answer.
        """
        version = self.version
        cached = self._stats
        if cached is not None and cached["version"] == version:
            return dict(cached)
        conn = self._conn()
        docs, sections = conn.execute("SELECT COUNT(*), COALESCE(SUM(n_sections), 0) FROM documents").fetchone()
        passages, max_words = conn.execute("SELECT COUNT(*), COALESCE(MAX(words), 0) FROM passages").fetchone()
        aliases = conn.execute("SELECT COUNT(*) FROM aliases").fetchone()[0]
        merged = (
            conn.execute("SELECT COUNT(*) FROM doc_parts WHERE part_id != doc_id").fetchone()[0] if self._merges() else 0
        )
        out = {
            "documents": int(docs),
            "merged": int(merged),  # source documents folded into another source's (each still resolves by id)
            "sections": int(sections),
            "passages": int(passages),
            "max_passage_words": int(max_words),
            "aliases": int(aliases),
            "version": version,
        }
        self._stats = out
        return dict(out)

    def _merges(self) -> bool:
        """Whether this store has the merged-documents table (stores written before it do not)."""
        q = "SELECT 1 FROM sqlite_master WHERE type='table' AND name='doc_parts'"
        return self._conn().execute(q).fetchone() is not None

    def canonical_id(self, doc_id: str) -> str | None:
        """The id a document is stored under: itself, or for a source document merged into another, that one's."""
        conn = self._conn()
        if conn.execute("SELECT 1 FROM documents WHERE id=?", (doc_id,)).fetchone():
            return doc_id
        if self._merges():
            row = conn.execute("SELECT doc_id FROM doc_parts WHERE part_id=?", (doc_id,)).fetchone()
            if row:
                return str(row[0])
        return None

    def get_document(self, doc_id: str) -> Document | None:
        """The document with this id, or the one it was merged into (``--duplicates merge``)."""
        canonical = self.canonical_id(doc_id)
        if canonical is None:
            return None
        row = self._conn().execute("SELECT tree FROM documents WHERE id=?", (canonical,)).fetchone()
        return Document.from_dict(json.loads(row[0])) if row else None

    def resolve_title(self, title: str) -> str | None:
        """Document id for a title or redirect alias: the exact title first, else as Wikipedia compares titles
        (:func:`~hiera.corpus.dedup.title_key`: ``_`` is a space, the first letter's case does not count), which
        is how people copy titles out of URLs and sentences ("nikola_Tesla")."""
        conn = self._conn()
        target = conn.execute("SELECT target FROM aliases WHERE alias=?", (title,)).fetchone()
        name = target[0] if target else title
        row = conn.execute("SELECT id FROM documents WHERE title=?", (name,)).fetchone()
        if row:
            return row[0]
        key = title_key(title)
        target = conn.execute("SELECT target FROM aliases WHERE alias=?", (key,)).fetchone()
        for k in dict.fromkeys([key, title_key(name), *([title_key(target[0])] if target else [])]):
            try:
                row = conn.execute("SELECT d.id FROM title_keys k JOIN documents d ON d.id = k.doc_id WHERE k.key = ? "
                                   "ORDER BY d.rowid LIMIT 1", (k,)).fetchone()
            except sqlite3.OperationalError:  # a store written before title keys: one pass over the titles
                row = next(((i,) for i, t in conn.execute("SELECT id, title FROM documents ORDER BY rowid")
                            if title_key(t) == k), None)
            if row:
                return row[0]
        return None

    def find_document(self, key: str) -> Document | None:
        """The document whose id is ``key``, else the one whose title or redirect alias it is (what a person types)."""
        doc = self.get_document(key)
        if doc is None:
            resolved = self.resolve_title(key)
            doc = self.get_document(resolved) if resolved else None
        return doc

    def iter_docs(self, doc_ids: Sequence[str] | None = None) -> Iterator[DocRow]:
        """Documents in insertion (row id) order: the order every index uses."""
        conn = self._conn()
        if doc_ids is None:
            cur = conn.execute("SELECT rowid, id, title, summary FROM documents ORDER BY rowid")
            for r in cur:
                yield DocRow(*r)
        else:
            for chunk in _chunks(list(doc_ids), 500):
                q = f"SELECT rowid, id, title, summary FROM documents WHERE id IN ({','.join('?' * len(chunk))}) ORDER BY rowid"
                for r in conn.execute(q, chunk):
                    yield DocRow(*r)

    def iter_passages(self, doc_ids: Sequence[str] | None = None) -> Iterator[tuple[int, Passage]]:
        """``(passage_rowid, Passage)`` grouped by document in document row order."""
        conn = self._conn()
        base = (
            "SELECT p.rowid, p.id, p.doc_id, p.ord, p.section_path, p.text, d.title, d.rowid "
            "FROM passages p JOIN documents d ON d.id = p.doc_id"
        )
        if doc_ids is None:
            rows: Iterable[tuple] = conn.execute(base + " ORDER BY d.rowid, p.ord")
            for r in rows:
                yield r[0], _passage(r)
        else:
            for chunk in _chunks(list(doc_ids), 500):
                q = base + f" WHERE d.id IN ({','.join('?' * len(chunk))}) ORDER BY d.rowid, p.ord"
                for r in conn.execute(q, chunk):
                    yield r[0], _passage(r)

    def doc_fields(self) -> list[tuple[int, str, str, str | None, str | None]]:
        """``(rowid, id, title, metadata JSON, categories JSON)`` of every document: what search filters read.

        SQLite cuts the two fields out of each tree: parsing whole trees (their
        text included) in Python took four times as long at 1M passages.
        """
        return self._conn().execute(
            "SELECT rowid, id, title, json_extract(tree, '$.metadata'), json_extract(tree, '$.categories') "
            "FROM documents").fetchall()

    def section_paths(self) -> list[tuple[int, str]]:
        """``(passage rowid, section path JSON)`` of every passage."""
        return self._conn().execute("SELECT rowid, section_path FROM passages").fetchall()

    def passages_by_rowid(self, rowids: Sequence[int]) -> dict[int, Passage]:
        out: dict[int, Passage] = {}
        conn = self._conn()
        ids = [int(r) for r in rowids]
        for chunk in _chunks(ids, 900):
            q = (
                "SELECT p.rowid, p.id, p.doc_id, p.ord, p.section_path, p.text, d.title, d.rowid "
                f"FROM passages p JOIN documents d ON d.id = p.doc_id WHERE p.rowid IN ({','.join('?' * len(chunk))})"
            )
            for r in conn.execute(q, chunk):
                out[r[0]] = _passage(r)
        return out

    def docs_by_rowid(self, rowids: Sequence[int]) -> dict[int, DocRow]:
        out: dict[int, DocRow] = {}
        conn = self._conn()
        ids = [int(r) for r in rowids]
        for chunk in _chunks(ids, 900):
            q = f"SELECT rowid, id, title, summary FROM documents WHERE rowid IN ({','.join('?' * len(chunk))})"
            for r in conn.execute(q, chunk):
                out[r[0]] = DocRow(*r)
        return out

    def doc_fulltext(self, doc_id: str) -> str:
        """Title + every passage text, for full-text document indexes."""
        conn = self._conn()
        row = conn.execute("SELECT title FROM documents WHERE id=?", (doc_id,)).fetchone()
        texts = [r[0] for r in conn.execute("SELECT text FROM passages WHERE doc_id=? ORDER BY ord", (doc_id,))]
        return "\n".join([row[0] if row else "", *texts])

    def iter_aliases(self) -> Iterator[tuple[str, str]]:
        """``(alias, target title)`` of every stored redirect (the linking pipeline's alias index reads them)."""
        yield from self._conn().execute("SELECT alias, target FROM aliases ORDER BY alias")

    def iter_doc_links(self) -> Iterator[list[str]]:
        """The outgoing link targets of every document that has any (sources with wikilinks: wikipedia-xml)."""
        q = "SELECT json_extract(tree, '$.links') FROM documents WHERE json_array_length(tree, '$.links') > 0"
        for (raw,) in self._conn().execute(q):
            yield [str(t) for t in json.loads(raw)]


class _Writer:
    """One ingest's writes: rowids never used before, title keys, and duplicates merged, kept or skipped.

    Row ids: the build copies a passage's (or document's) vector from the
    previous build when it has the same row id, so a replaced or merged
    document must never get back the row ids it had (SQLite reuses the
    largest row id once its row is deleted). The high-water marks are kept in
    ``meta`` and rows are inserted with explicit ids above them.
    """

    def __init__(self, conn: sqlite3.Connection, rules: PassageRules, report: IngestReport, mode: str) -> None:
        self.conn, self.rules, self.report, self.mode = conn, rules, report, mode
        for stmt in [*_DEDUP_SCHEMA.split(";"), _RETIRED_SCHEMA]:
            if stmt.strip():
                conn.execute(stmt)
        n_keys = conn.execute("SELECT COUNT(*) FROM title_keys").fetchone()[0]
        if n_keys != conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0]:  # a store from before title keys
            conn.create_function("hiera_title_key", 1, title_key, deterministic=True)
            conn.execute("DELETE FROM title_keys")
            conn.execute("INSERT INTO title_keys SELECT id, hiera_title_key(title) FROM documents")
        self.next_doc = self._high_water("documents") + 1
        self.next_passage = self._high_water("passages") + 1
        self.origin = ""
        self.file_start = self.next_doc  # documents from rowid file_start on were written from the current file

    def _high_water(self, table: str) -> int:
        mark = self.conn.execute("SELECT value FROM meta WHERE key=?", (f"{table}_rowid_hwm",)).fetchone()
        top = self.conn.execute(f"SELECT COALESCE(MAX(rowid), 0) FROM {table}").fetchone()[0]
        return max(int(mark[0]) if mark else 0, int(top))

    def at(self, origin: str) -> None:
        if origin != self.origin:
            self.origin, self.file_start = origin, self.next_doc

    def finish(self) -> None:
        for table, nxt in (("documents", self.next_doc), ("passages", self.next_passage)):
            self.conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (f"{table}_rowid_hwm", str(nxt - 1)))

    # -- records ---------------------------------------------------------------
    def document(self, doc: Document) -> None:
        if not doc.id or not doc.title.strip():
            raise ValueError("document has an empty id or title")
        conn, report = self.conn, self.report
        owner = doc.id if conn.execute("SELECT 1 FROM documents WHERE id=?", (doc.id,)).fetchone() else None
        if owner is None:
            row = conn.execute("SELECT doc_id FROM doc_parts WHERE part_id=?", (doc.id,)).fetchone()
            owner = row[0] if row else None
        if owner is not None:  # an update of a document, or of one part of a merged document
            rowid, earlier = conn.execute("SELECT rowid, n_passages FROM documents WHERE id=?", (owner,)).fetchone()
            parts = self.parts(owner)
            if rowid < self.file_start and any(p.id == doc.id and p.doc == doc for p in parts):
                report.unchanged += 1  # as stored: rewriting it would only retire and re-add the same passages
                return
            others = [p for p in parts if p.id != doc.id]
            if others and not self.keys(doc) & {title_key(p.doc.title) for p in others}:
                # renamed away from the article it was merged into: it leaves that one (which keeps its other
                # parts) and is placed as a document of its own, so its text and title never stay under another's
                self.detach(owner, doc.id, others)
                self.place(doc)
            elif others:
                self.recompose(owner, [Part(doc.id, self.origin, doc) if p.id == doc.id else p for p in parts])
            else:
                self.write(doc)
            if rowid >= self.file_start:  # written from this same file: a repeated id, not an update
                report.repeated.append(doc.id)
                report.passages -= earlier  # counted when the earlier record was written
                return
            report.replaced += 1
            report.documents += 1
            return
        if self.place(doc) == "written":
            report.new_doc_ids.append(doc.id)
            report.documents += 1

    def place(self, doc: Document) -> str:
        """A document no stored one holds: merged into an earlier source's duplicate, skipped, or written alone."""
        if self.mode != "keep":
            held = self.duplicate_of(doc)
            if held is not None:
                if self.mode == "skip":
                    self.report.duplicates += 1
                    return "skipped"
                self.recompose(held, [*self.parts(held), Part(doc.id, self.origin, doc)])
                self.report.merged += 1
                return "merged"
        self.write(doc)
        return "written"

    def detach(self, owner: str, part_id: str, others: list[Part]) -> None:
        """Take part ``part_id`` out of merged document ``owner``; the other parts stay one document, under the
        first part's id (``owner`` itself unless the part leaving was the first)."""
        if part_id == owner:
            self.delete(owner)
        self.recompose(others[0].id, others)

    def redirect(self, rec: Redirect) -> None:
        """Store the redirect; two documents it shows to be one (one of them from this file) are merged then."""
        self.conn.execute("INSERT OR REPLACE INTO aliases VALUES (?, ?)", (rec.alias, rec.target))
        self.report.redirects += 1
        if self.mode == "keep":
            return
        a, t = self._by_key(title_key(rec.alias)), self._by_key(title_key(rec.target))
        if a is None or t is None or a[0] == t[0] or (a[1] >= self.file_start) == (t[1] >= self.file_start):
            return
        (held, _), (dup, _) = sorted((a, t), key=lambda x: x[1])  # the earlier source's document stays
        if self.mode == "skip":
            self.delete(dup)
            self.report.duplicates += 1
        else:
            self.recompose(held, [*self.parts(held), *self.parts(dup, origin=self.origin)])
            self.delete(dup, keep_parts=True)
            self.report.merged += 1
        self.report.documents -= 1
        if dup in self.report.new_doc_ids:
            self.report.new_doc_ids.remove(dup)

    # -- duplicates ------------------------------------------------------------
    def _by_key(self, key: str) -> tuple[str, int] | None:
        row = self.conn.execute(
            "SELECT d.id, d.rowid FROM title_keys k JOIN documents d ON d.id = k.doc_id WHERE k.key = ? "
            "ORDER BY d.rowid LIMIT 1", (key,),
        ).fetchone()
        return (row[0], int(row[1])) if row else None

    def keys(self, doc: Document) -> set[str]:
        """The title keys ``doc`` is known by: its title's, its own aliases', and those a stored redirect links."""
        key = title_key(doc.title)
        keys = {key, *(title_key(a) for a in doc.aliases if a.strip())}  # its own other names count as redirects
        names = (doc.title, key)
        for (target,) in self.conn.execute("SELECT target FROM aliases WHERE alias IN (?, ?)", names):
            keys.add(title_key(target))
        for (alias,) in self.conn.execute("SELECT alias FROM aliases WHERE target IN (?, ?)", names):
            keys.add(title_key(alias))
        return keys

    def duplicate_of(self, doc: Document) -> str | None:
        """The id of a document of an earlier source with ``doc``'s title key, directly or through a redirect."""
        ks = sorted(self.keys(doc))
        row = self.conn.execute(
            f"SELECT d.id FROM title_keys k JOIN documents d ON d.id = k.doc_id WHERE k.key IN "
            f"({','.join('?' * len(ks))}) AND d.rowid < ? ORDER BY d.rowid LIMIT 1", (*ks, self.file_start),
        ).fetchone()
        return row[0] if row else None

    def parts(self, doc_id: str, origin: str = "") -> list[Part]:
        """A document's parts, first source first (a document never merged is its own one part, from ``origin``).

        Where an unmerged document was read is not stored: its provenance names its reader's ``source`` tag.
        """
        rows = self.conn.execute(
            "SELECT part_id, origin, tree FROM doc_parts WHERE doc_id=? ORDER BY ord", (doc_id,)
        ).fetchall()
        if rows:
            return [Part(pid, origin, Document.from_dict(json.loads(tree))) for pid, origin, tree in rows]
        (tree,) = self.conn.execute("SELECT tree FROM documents WHERE id=?", (doc_id,)).fetchone()
        return [Part(doc_id, origin, Document.from_dict(json.loads(tree)))]

    def recompose(self, doc_id: str, parts: list[Part]) -> None:
        """Store ``parts`` as ``doc_id``'s and write their composition; other titles become its aliases."""
        merged = compose(parts)
        self.write(merged)
        self.conn.execute("DELETE FROM doc_parts WHERE doc_id=?", (doc_id,))
        if len(parts) > 1:
            self.conn.executemany(
                "INSERT OR REPLACE INTO doc_parts VALUES (?, ?, ?, ?, ?)",
                [(p.id, doc_id, i, p.origin, json.dumps(p.doc.to_dict(), ensure_ascii=False)) for i, p in enumerate(parts)],
            )
        self.conn.executemany(
            "INSERT OR IGNORE INTO aliases VALUES (?, ?)",
            [(p.doc.title, merged.title) for p in parts[1:] if p.doc.title != merged.title],
        )

    # -- rows --------------------------------------------------------------------
    def delete(self, doc_id: str, keep_parts: bool = False) -> None:
        self.conn.execute(_RETIRE, (doc_id,))
        for q in ("DELETE FROM passages WHERE doc_id=?", "DELETE FROM documents WHERE id=?",
                  "DELETE FROM title_keys WHERE doc_id=?"):
            self.conn.execute(q, (doc_id,))
        if not keep_parts:
            self.conn.execute("DELETE FROM doc_parts WHERE doc_id=?", (doc_id,))

    def write(self, doc: Document) -> None:
        """Insert (or replace) ``doc`` and its passages, under row ids above every one used before."""
        passages = split_document(doc, self.rules)
        self.conn.execute(_RETIRE, (doc.id,))
        self.conn.execute("DELETE FROM passages WHERE doc_id=?", (doc.id,))
        self.conn.execute("DELETE FROM documents WHERE id=?", (doc.id,))
        self.conn.execute(
            "INSERT INTO documents (rowid, id, title, summary, tree, n_sections, n_passages) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                self.next_doc,
                doc.id,
                doc.title,
                doc.summary(self.rules.summary_lead_words),
                json.dumps(doc.to_dict(), ensure_ascii=False),
                doc.section_count(),
                len(passages),
            ),
        )
        self.next_doc += 1
        first = self.next_passage
        self.conn.executemany(
            "INSERT INTO passages (rowid, id, doc_id, ord, section_path, text, words) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (first + i, p.id, p.doc_id, p.order, json.dumps(list(p.section_path), ensure_ascii=False), p.text,
                 len(p.text.split()))
                for i, p in enumerate(passages)
            ],
        )
        self.next_passage += len(passages)
        self.conn.execute("INSERT OR REPLACE INTO title_keys VALUES (?, ?)", (doc.id, title_key(doc.title)))
        # its other names resolve to it as redirects do (a redirect record already stored keeps its target)
        self.conn.executemany("INSERT OR IGNORE INTO aliases VALUES (?, ?)",
                              [(a, doc.title) for a in dict.fromkeys(doc.aliases) if a.strip() and a != doc.title])
        self.report.passages += len(passages)


def _passage(r: tuple) -> Passage:
    return Passage(id=r[1], doc_id=r[2], order=r[3], section_path=tuple(json.loads(r[4])), text=r[5], doc_title=r[6])


def _chunks(seq: list, n: int) -> Iterator[list]:
    for i in range(0, len(seq), n):
        yield seq[i : i + n]


def remove_new_collection(root: Path, *, dir_existed: bool = False) -> None:
    """Undo a collection that a failed first ingest created.

    A directory the ingest created is removed; a directory that existed before
    (perhaps holding the user's own files) keeps everything but the store.
    """
    if not dir_existed:
        shutil.rmtree(root, ignore_errors=True)
        return
    for name in (STORE_FILE, STORE_FILE + "-journal", "writer.lock"):
        (root / name).unlink(missing_ok=True)
    clear_first_ingest(root)


def clear_first_ingest(root: Path) -> None:
    """Drop what a killed first ingest left; only under the collection's writer lock."""
    for name in (FIRST_INGEST_FILE, FIRST_INGEST_FILE + "-journal"):
        (root / name).unlink(missing_ok=True)


def publish_first_ingest(root: Path) -> None:
    """Make a committed, closed first-ingest store the collection's ``corpus.sqlite`` in one rename."""
    os.replace(root / FIRST_INGEST_FILE, root / STORE_FILE)
    fd = os.open(root, os.O_RDONLY)
    try:
        os.fsync(fd)  # the rename itself survives a power cut
    finally:
        os.close(fd)
