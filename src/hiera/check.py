"""``hiera check COLL``: integrity checks a user can run on a collection, in the spirit of Lucene's CheckIndex.

Every check reads; none repairs or rewrites (opening the store may roll back
the journal of a killed ingest, which any reader of the collection does).
Each check yields one :class:`Finding`:

* ``error`` — the collection is damaged: a search would fail or could answer
  wrongly (``hiera check`` exits 1 and prints one line per error);
* ``warning`` — a state worth knowing that does not damage anything (a stale
  index after ``hiera ingest``, leftovers of a killed build, a writer at work);
* ``ok``.

What is checked: SQLite's ``PRAGMA integrity_check`` and the store's own
consistency (schema, version counter, passages ↔ documents); the ``index``
link; the manifest (present, parsable, its format, its schema); the build's
files against the manifest's sizes and sha256 checksums (``--quick`` skips the
checksums, which read every byte); the corpus version the index was built at;
the layout arrays (lengths = manifest counts, ``doc_offsets`` monotone from 0
to the passage count, every row id not tombstoned present in the store); a
changed build's tombstones (each one's document gone from the store, the
manifest's dead counts theirs, the delta there); the BM25 and FAISS indexes
and the vector matrices of each segment (their sizes = passages / documents); the
tuning file; leftover ``builds/*.partial`` and unreferenced builds; the writer
lock.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from hiera.corpus.store import SCHEMA_VERSION, STORE_FILE
from hiera.errors import HieraError, IndexMissingError
from hiera.index.manifest import SHARDS_DIR, TUNED_SUFFIX, Manifest, open_shard_manifest, read_tuned
from hiera.index.publish import BUILDS, INDEX_LINK, REMOVED, live_build_dir
from hiera.index.segments import DELTA_DIR, TOMBSTONES, dead_masks, read_tombstones
from hiera.index.verify import Checks, Finding, check_bm25, check_dense, check_files, check_names
from hiera.io import load_npy, loads_json
from hiera.lock import LOCK_FILE, build_is_open, is_locked, read_lock_info


def check_collection(root: str | Path, *, checksums: bool = True) -> list[Finding]:
    """Every check on the collection at ``root``; raises :class:`IndexMissingError` if it is no collection."""
    root = Path(root)
    if not (root / STORE_FILE).is_file():
        raise IndexMissingError(f"{root} is not a hiera collection (no {STORE_FILE})")
    c = Checks()
    store = _check_store(root, c)
    try:
        _check_index(root, c, store, checksums)
    finally:
        if store is not None:
            store["conn"].close()
    return c.findings


def _complete_builds(builds: Path) -> list[Path]:
    """The finished build directories under ``builds/`` (an interrupted one still ends in ``.partial``), by name."""
    if not builds.is_dir():
        return []
    return sorted((p for p in builds.iterdir() if p.is_dir() and not p.name.endswith((".partial", REMOVED))),
                  key=lambda p: p.name)


def _check_index(root: Path, c: Checks, store: dict[str, Any] | None, checksums: bool) -> None:
    _check_lock(root, c)
    _check_builds_dir(root, c)
    link = root / INDEX_LINK
    if not link.is_symlink() and not link.exists():
        made = [b.name for b in _complete_builds(root / BUILDS)]
        if made:  # built, but nothing says which build serves: every search fails
            c.error("index", f"the {INDEX_LINK} link is missing although builds/ holds {', '.join(made[-3:])}: "
                             f"searches fail; run `hiera build {root}` (or link the newest: "
                             f"ln -s {BUILDS}/{made[-1]} {root / INDEX_LINK})")
        else:
            c.warn("index", "no index built yet (run `hiera build`)")
        return
    build_dir = link.resolve()
    if not build_dir.is_dir():
        c.error("index", f"the {INDEX_LINK} link points to {build_dir}, which does not exist")
        return
    try:
        served = live_build_dir(root)
    except HieraError as e:  # a damaged pending marker, a store that cannot say what it committed
        c.error("index", str(e))
        return
    if served is not None and served != build_dir:
        c.warn("index", f"an interrupted `hiera add` swapped in {build_dir.name} but never committed its documents; "
                        f"serving {served.name} (the next writer puts the link back)")
        build_dir = served
    c.ok("index", f"live build {build_dir.name}")
    try:
        manifest = Manifest.read(build_dir)
    except HieraError as e:
        c.error("manifest", str(e))
        return
    c.ok("manifest", f"format {manifest.format}, {manifest.documents} documents, {manifest.passages} passages")
    files_ok = check_files(build_dir, manifest, c, checksums)
    if store is not None:
        version = store["version"]
        if manifest.corpus_version == version:
            c.ok("version", f"index built at corpus version {version}, the corpus's")
        else:
            c.warn(
                "version",
                f"stale index: built at corpus version {manifest.corpus_version}, the corpus is at {version} "
                f"(documents were ingested since); searches are refused until `hiera build {root}`",
            )
    _guard(c, "layout", lambda: _check_layout(root, build_dir, manifest, c, store))
    _guard(c, "tombstones", lambda: _check_tombstones(build_dir, manifest, c, store))
    if manifest.shards:  # each shard is a build of its own: files, BM25, dense
        _guard(c, "shards", lambda: _check_shards(build_dir, manifest, c, checksums))
    elif files_ok:
        _guard(c, "bm25", lambda: check_bm25(build_dir, manifest, c))
        _guard(c, "dense", lambda: check_dense(build_dir, manifest, c))
    if files_ok:
        _guard(c, "names", lambda: check_names(build_dir, manifest, c))
    _guard(c, "tuned", lambda: _check_tuned(build_dir, c))
    return


def _guard(c: Checks, name: str, fn: Callable[[], None]) -> None:
    """A check that crashes on damaged data reports the damage instead of stopping the others."""
    try:
        fn()
    except HieraError as e:
        c.error(name, str(e))
    except Exception as e:  # a corrupt file can make numpy, bm25s or FAISS raise anything
        c.error(name, f"cannot read: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")


# -- store -------------------------------------------------------------------------------------------------
def _check_store(root: Path, c: Checks) -> dict[str, Any] | None:
    path = root / STORE_FILE
    try:
        conn = sqlite3.connect(path, isolation_level=None)
    except sqlite3.Error as e:
        c.error("store", f"{path}: cannot open ({e})")
        return None
    try:
        rows = [r[0] for r in conn.execute("PRAGMA integrity_check(20)")]
        if rows != ["ok"]:
            c.error("store", f"{path}: PRAGMA integrity_check: {'; '.join(rows[:5])}")
            return None
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        schema, version = meta.get("schema"), meta.get("version")
        if schema != str(SCHEMA_VERSION):
            c.error("store", f"{path}: store schema {schema!r}, this hiera reads {SCHEMA_VERSION}")
            return None
        if version is None or not str(version).isdigit():
            c.error("store", f"{path}: the version counter is {version!r}, not a number")
            return None
        docs, sum_passages = conn.execute("SELECT COUNT(*), COALESCE(SUM(n_passages), 0) FROM documents").fetchone()
        passages = conn.execute("SELECT COUNT(*) FROM passages").fetchone()[0]
        orphans = conn.execute(
            "SELECT COUNT(*) FROM passages p LEFT JOIN documents d ON d.id = p.doc_id WHERE d.id IS NULL"
        ).fetchone()[0]
        if orphans:
            c.error("store", f"{path}: {orphans} passages belong to no document")
            return None
        if sum_passages != passages:
            c.error("store", f"{path}: documents count {sum_passages} passages, the passages table holds {passages}")
            return None
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "doc_parts" in tables:  # merged documents (--duplicates merge): each part belongs to a stored document
            stray = conn.execute(
                "SELECT COUNT(*) FROM doc_parts x LEFT JOIN documents d ON d.id = x.doc_id WHERE d.id IS NULL"
            ).fetchone()[0]
            if stray:
                c.error("store", f"{path}: {stray} parts of merged documents belong to no document")
                return None
        if "rules" in meta:
            loads_json(meta["rules"])
        c.ok("store", f"integrity_check ok; {docs} documents, {passages} passages, version {version}")
        return {"version": int(version), "documents": int(docs), "passages": int(passages), "conn": conn}
    except (sqlite3.Error, ValueError) as e:
        c.error("store", f"{path}: {' '.join(str(e).split())}")
        return None


def _check_lock(root: Path, c: Checks) -> None:
    holder = is_locked(root)
    if holder is not None:
        c.warn("lock", f"a writer is at work ({holder.describe()}); the collection may change while it runs")
        return
    info = read_lock_info(root) if (root / LOCK_FILE).exists() else None
    if info is not None:
        c.warn("lock", f"PID {info.pid} died holding the writer lock (since {info.since}); the next writer clears it")


def _check_builds_dir(root: Path, c: Checks) -> None:
    builds = root / BUILDS
    if not builds.is_dir():
        return
    try:
        live = live_build_dir(root)
    except HieraError:  # reported by the index check; here the linked build counts as in use
        live = (root / INDEX_LINK).resolve()
    partial = sorted(p.name for p in builds.glob("*.partial"))
    if partial:
        c.warn("builds", f"leftovers of interrupted builds (the next build removes them): {', '.join(partial[:5])}")
    # without a live build, the index check says what the builds there mean
    other = [] if live is None else [b for b in _complete_builds(builds) if b.resolve() != live]
    held = [b.name for b in other if build_is_open(b)]
    unused = [b.name for b in other if b.name not in held]
    if held:
        c.ok("builds", f"earlier builds kept while a process still has them open (a later write removes them): "
                       f"{', '.join(held[:5])}")
    if unused:
        c.warn("builds", "builds not in use (kept for a reader that has since let go, or left by a writer killed "
                         f"after its swap; the next change removes them): {', '.join(unused[:5])}")
    orphans = sorted(
        p.name for p in builds.glob(f"*{TUNED_SUFFIX}") if not (builds / p.name[: -len(TUNED_SUFFIX)]).is_dir()
    )
    if orphans:
        c.warn("builds", f"tuning files of removed builds: {', '.join(orphans[:5])}")


# -- the build ---------------------------------------------------------------------------------------------
def _check_layout(root: Path, build_dir: Path, m: Manifest, c: Checks, store: dict[str, Any] | None) -> None:
    lay = build_dir / "layout"
    prow = load_npy(lay / "passage_rows.npy")
    drow = load_npy(lay / "doc_rows.npy")
    offs = load_npy(lay / "doc_offsets.npy")
    problems = []
    if prow.ndim != 1 or len(prow) != m.passages:
        problems.append(f"passage_rows has {prow.shape} entries, the manifest {m.passages} passages")
    if drow.ndim != 1 or len(drow) != m.documents:
        problems.append(f"doc_rows has {drow.shape} entries, the manifest {m.documents} documents")
    if offs.ndim != 1 or len(offs) != m.documents + 1:
        problems.append(f"doc_offsets has {offs.shape} entries, expected documents + 1 = {m.documents + 1}")
    elif len(offs) and (offs[0] != 0 or offs[-1] != m.passages or bool(np.any(np.diff(offs) < 0))):
        problems.append(f"doc_offsets is not monotone from 0 to {m.passages}")
    if problems:
        c.error("layout", "; ".join(problems))
        return
    if store is not None and store["version"] == m.corpus_version:
        conn = store["conn"]
        live_docs, live_passages = _live_masks(build_dir, offs)
        missing = _missing_rows(conn, "passages", prow[live_passages]) + _missing_rows(conn, "documents", drow[live_docs])
        if missing:
            dead = " and not tombstoned" if m.updates else ""
            c.error("layout", f"{missing} row ids of the layout are not in the store{dead} (index and corpus disagree)")
            return
    c.ok("layout", f"{len(drow)} documents, {len(prow)} passages, offsets monotone")


def _live_masks(build_dir: Path, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The layout's positions not tombstoned (every position of a build without tombstones); out-of-range ones ignored."""
    dead = read_tombstones(build_dir)
    n = len(offsets) - 1
    return dead_masks(dead[(dead >= 0) & (dead < n)], offsets)


def _check_tombstones(build_dir: Path, m: Manifest, c: Checks, store: dict[str, Any] | None) -> None:
    """A changed build's tombstones against the store and the manifest (:mod:`hiera.index.segments`).

    Tombstones are base positions, ascending and unique; each one's document
    row is gone from the store (removed or replaced), while every other
    position's row is there (the layout check); the manifest's dead counts are
    the tombstones' and their passages' (by the offsets); the delta's files
    exist (their row counts are the BM25 and dense checks').
    """
    path = build_dir / TOMBSTONES
    if not m.updates:
        if path.exists():
            c.error("tombstones", f"{TOMBSTONES} is there but the manifest records no change (a build from scratch)")
        return
    dead = read_tombstones(build_dir)
    base = m.updates.get("base", {})
    nb = int(base.get("documents", m.documents))
    problems = []
    if dead.ndim != 1:
        c.error("tombstones", f"{TOMBSTONES} has shape {dead.shape}, not a list of positions")
        return
    if len(dead) and (int(dead.min()) < 0 or int(dead.max()) >= nb):
        c.error("tombstones", f"{TOMBSTONES} names positions outside the base's 0..{nb - 1}")
        return
    if bool(np.any(np.diff(dead) <= 0)):
        problems.append(f"{TOMBSTONES} is not ascending without repeats")
    offs = np.asarray(load_npy(build_dir / "layout" / "doc_offsets.npy"), dtype=np.int64)
    drow = np.asarray(load_npy(build_dir / "layout" / "doc_rows.npy"), dtype=np.int64)
    recorded = m.updates.get("dead", {})
    counted = {"documents": len(dead), "passages": int(np.diff(offs)[dead].sum()) if len(dead) else 0}
    for key, n in counted.items():
        if int(recorded.get(key, 0)) != n:
            problems.append(f"the manifest counts {recorded.get(key, 0)} dead {key}, the tombstones {n}")
    if int(recorded.get("deleted", 0)) + int(recorded.get("superseded", 0)) != int(recorded.get("documents", 0)):
        problems.append("the manifest's deleted and superseded documents do not add up to its dead ones")
    if store is not None and store["version"] == m.corpus_version and len(dead):
        held = len(dead) - _missing_rows(store["conn"], "documents", drow[dead])
        if held:
            problems.append(f"{held} tombstoned documents are still in the store (live documents masked from search)")
    delta = m.updates.get("delta")
    if delta and not (build_dir / DELTA_DIR).is_dir():
        problems.append(f"the manifest records a delta of {delta.get('documents')} documents; {DELTA_DIR}/ is missing")
    if not delta and (build_dir / DELTA_DIR).exists():
        problems.append(f"{DELTA_DIR}/ is there but the manifest records no delta")
    if problems:
        c.error("tombstones", "; ".join(problems))
        return
    d_docs, d_passages = (int(delta.get("documents", 0)), int(delta.get("passages", 0))) if delta else (0, 0)
    c.ok("tombstones", f"generation {m.updates.get('generation', 0)}: {counted['documents']} dead documents "
                       f"({counted['passages']} passages) gone from the store; delta {d_docs} documents, "
                       f"{d_passages} passages")


def _missing_rows(conn: sqlite3.Connection, table: str, rows: np.ndarray) -> int:
    found = 0
    ids = [int(r) for r in rows]
    for i in range(0, len(ids), 900):
        chunk = ids[i : i + 900]
        q = f"SELECT COUNT(*) FROM {table} WHERE rowid IN ({','.join('?' * len(chunk))})"
        found += conn.execute(q, chunk).fetchone()[0]
    return len(set(ids)) - found + (len(ids) - len(set(ids)))


def _check_shards(build_dir: Path, m: Manifest, c: Checks, checksums: bool) -> None:
    """Every shard checked like a build, each finding naming its shard.

    On top: the shard is the one the build recorded (sha256 of its manifest),
    at the build's corpus version, and the shards tile the documents and
    passages in order.
    """
    errors = 0
    docs = passages = 0
    for e in m.shards:
        name = e.get("name", "?")
        if e.get("docs", [None])[0] != docs or e.get("passages", [None])[0] != passages:
            c.error("shards", f"shard {name} does not start where the previous one ends (documents {docs}, "
                    f"passages {passages}); rebuild with `hiera build`")
            errors += 1
        docs, passages = int(e["docs"][1]), int(e["passages"][1])
        try:
            sm = open_shard_manifest(build_dir, e, m.base_version)
        except HieraError as err:
            c.error("shards", str(err))
            errors += 1
            continue
        sub = Checks()
        shard_dir = build_dir / SHARDS_DIR / name
        if check_files(shard_dir, sm, sub, checksums):
            for fn in (check_bm25, check_dense):
                try:
                    fn(shard_dir, sm, sub)
                except Exception as err:  # a corrupt file can make numpy, bm25s or FAISS raise anything
                    sub.error(fn.__name__.removeprefix("check_"), f"cannot read: {type(err).__name__}")
        for f in sub.findings:
            if f.status != "ok":
                c.add("shards", f.status, f"shard {name}: {f.check}: {f.detail}")
                errors += f.status == "error"
    if (docs, passages) != (m.documents, m.passages):
        c.error("shards", f"the shards cover {docs} documents and {passages} passages, the build {m.documents} "
                f"and {m.passages}")
        errors += 1
    if not errors:
        what = "checksums" if checksums else "sizes"
        c.ok("shards", f"{len(m.shards)} shards: manifests as recorded, files match their {what}, BM25 and dense sizes")


def _check_tuned(build_dir: Path, c: Checks) -> None:
    params = read_tuned(build_dir)
    if params:
        from hiera.spec import method

        for name, values in params.items():
            method(name).check(values)
        c.ok("tuned", f"tuned values for {', '.join(sorted(params))}")


# -- the command -------------------------------------------------------------------------------------------
def summary(findings: list[Finding]) -> dict[str, Any]:
    errors = [f for f in findings if f.status == "error"]
    return {
        "ok": not errors,
        "errors": len(errors),
        "warnings": sum(f.status == "warning" for f in findings),
        "checks": [asdict(f) for f in findings],
    }


def iter_lines(findings: list[Finding], verbose: bool) -> Iterator[str]:
    for f in findings:
        if verbose or f.status != "ok":
            yield f.line()
