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
import shutil
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hiera.corpus.readers.base import OnBad, Record, Redirect, raise_bad
from hiera.corpus.split import split_document
from hiera.corpus.tree import Document, Passage, PassageRules
from hiera.errors import BadRecordError, HieraError, IndexMissingError, ManifestMismatchError

STORE_FILE = "corpus.sqlite"
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


@dataclass
class IngestReport:
    documents: int = 0
    replaced: int = 0
    passages: int = 0
    redirects: int = 0
    skipped: int = 0
    skipped_examples: list[str] = field(default_factory=list)
    new_doc_ids: list[str] = field(default_factory=list)


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

    def __init__(self, root: Path, *, create: bool = False) -> None:
        self.root = Path(root)
        self.path = self.root / STORE_FILE
        if not self.path.exists() and not create:
            raise IndexMissingError(
                f"{self.root} is not a hiera collection (no {STORE_FILE}); create it with `hiera ingest`"
            )
        self._local = threading.local()
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
                conn = sqlite3.connect(self.path, isolation_level=None)
                conn.execute("PRAGMA journal_mode=DELETE")
            except sqlite3.DatabaseError as e:
                raise HieraError(f"{self.path}: cannot open corpus store ({e})") from None
            self._local.conn = conn
        return conn

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # -- meta ----------------------------------------------------------
    def _meta(self, key: str) -> str | None:
        row = self._conn().execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    @property
    def version(self) -> int:
        return int(self._meta("version") or 0)

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
        source: str = "input",
        before_commit: Callable[[], None] | None = None,
    ) -> IngestReport:
        """Insert or replace documents in one transaction.

        Any exception (a bad record with the default ``on_bad``, a reader
        error, Ctrl-C) rolls back everything this call wrote.
        ``before_commit`` runs inside the transaction, after the version bump,
        on this thread (so it reads the new documents through this store):
        ``hiera add`` builds the new index there, so that the documents and the
        index that serves them land together or not at all.
        """
        existing = self.rules
        rules = rules or existing or PassageRules()
        if existing is not None and existing != rules:
            raise ManifestMismatchError(
                f"{self.root} was built with passage rules {existing.to_dict()}; "
                f"refusing to add documents split with {rules.to_dict()}"
            )
        report = IngestReport()
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('rules', ?)", (json.dumps(rules.to_dict()),))
            for rec in records:
                if isinstance(rec, Redirect):
                    conn.execute("INSERT OR REPLACE INTO aliases VALUES (?, ?)", (rec.alias, rec.target))
                    report.redirects += 1
                    continue
                try:
                    self._write_document(conn, rec, rules, report)
                except ValueError as e:
                    on_bad(BadRecordError(source, f"document {rec.id!r}", str(e)))
                    report.skipped += 1
                if progress is not None:
                    progress.update(1)
            conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'version'")
            if before_commit is not None:
                before_commit()
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # SQLite already rolled back after some errors (disk full)
                conn.execute("ROLLBACK")
            raise
        return report

    def _write_document(self, conn: sqlite3.Connection, doc: Document, rules: PassageRules, report: IngestReport) -> None:
        if not doc.id or not doc.title.strip():
            raise ValueError("document has an empty id or title")
        passages = split_document(doc, rules)
        old = conn.execute("SELECT 1 FROM documents WHERE id=?", (doc.id,)).fetchone()
        if old:
            conn.execute("DELETE FROM passages WHERE doc_id=?", (doc.id,))
            conn.execute("DELETE FROM documents WHERE id=?", (doc.id,))
            report.replaced += 1
        else:
            report.new_doc_ids.append(doc.id)
        conn.execute(
            "INSERT INTO documents (id, title, summary, tree, n_sections, n_passages) VALUES (?, ?, ?, ?, ?, ?)",
            (
                doc.id,
                doc.title,
                doc.summary(rules.summary_lead_words),
                json.dumps(doc.to_dict(), ensure_ascii=False),
                doc.section_count(),
                len(passages),
            ),
        )
        conn.executemany(
            "INSERT INTO passages (id, doc_id, ord, section_path, text, words) VALUES (?, ?, ?, ?, ?, ?)",
            [
                (p.id, p.doc_id, p.order, json.dumps(list(p.section_path), ensure_ascii=False), p.text, len(p.text.split()))
                for p in passages
            ],
        )
        report.documents += 1
        report.passages += len(passages)

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
        out = {
            "documents": int(docs),
            "sections": int(sections),
            "passages": int(passages),
            "max_passage_words": int(max_words),
            "aliases": int(aliases),
            "version": version,
        }
        self._stats = out
        return dict(out)

    def get_document(self, doc_id: str) -> Document | None:
        row = self._conn().execute("SELECT tree FROM documents WHERE id=?", (doc_id,)).fetchone()
        return Document.from_dict(json.loads(row[0])) if row else None

    def resolve_title(self, title: str) -> str | None:
        """Document id for a title or redirect alias (exact match)."""
        conn = self._conn()
        target = conn.execute("SELECT target FROM aliases WHERE alias=?", (title,)).fetchone()
        name = target[0] if target else title
        row = conn.execute("SELECT id FROM documents WHERE title=?", (name,)).fetchone()
        return row[0] if row else None

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
