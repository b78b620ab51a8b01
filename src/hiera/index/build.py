"""Build a collection's indexes into a fresh directory, then swap it in.

Passage order is the same for every index: documents in store row order, each
document's passages in order. One offset table (``layout/doc_offsets.npy``)
therefore maps a document to its contiguous block of passage rows in the BM25
index, the float16 vector matrix and the FAISS passage index alike.

Vectors of passages and documents that the previous build already holds (same
model fingerprint, same store row id) are copied, not re-encoded; everything
else goes through the encoder's on-disk cache. That is how ``hiera add``
appends documents without re-encoding the old ones, and how an interrupted
build resumes.
"""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from hiera.corpus.store import CorpusStore
from hiera.encode import DEFAULT_BACKEND, DEFAULT_MODEL, Encoder
from hiera.errors import BadInputError, HieraError
from hiera.index.bm25 import Bm25Config, Bm25Index
from hiera.index.dense import build_faiss, load_faiss, save_faiss, save_matrix
from hiera.index.manifest import TUNED_SUFFIX, Manifest, read_tuned
from hiera.io import fsync_dir
from hiera.lock import writer_lock
from hiera.spec import METHODS, method, resolve_doc_stage

INDEX_LINK = "index"
BUILDS = "builds"
DOC_TEXTS = ("summary", "fulltext")

def check_defaults(defaults: dict[str, dict] | None, bm25: bool, dense: bool) -> dict[str, dict]:
    """Per-method defaults checked by the registry; a document stage this build cannot serve is refused."""
    out: dict[str, dict] = {}
    for name, params in (defaults or {}).items():
        checked = method(name).check(params)
        if "doc_stage" in checked:
            resolve_doc_stage(checked["doc_stage"], bm25, dense)
        out[name] = checked
    return out


@dataclass
class BuildOptions:
    """What ``hiera build`` can be told; every field lands in the manifest."""

    bm25: bool = True
    dense: bool = True
    doc_encoder: str = DEFAULT_MODEL
    passage_encoder: str = DEFAULT_MODEL
    backend: str = DEFAULT_BACKEND  # what runs the encoders (hiera.backends); the manifest records it
    passage_factory: str = "Flat"
    doc_factory: str = "Flat"
    bm25_config: Bm25Config = field(default_factory=Bm25Config)
    bm25_doc_text: str = "fulltext"
    batch_size: int = 32
    cache_dir: Path | None = None
    defaults: dict[str, dict] | None = None  # method → parameter → value (``hiera build --set``)
    progress: bool = True
    shards: int = 0  # 0: one index; N ≥ 1: N shards of contiguous documents (hiera.shard)
    engine: str = "local"  # sharded builds: "local" (in-process) or "ray" (Ray tasks, Ray Data encoding)
    ray_address: str | None = None  # engine "ray": "auto", an address, or None for a local Ray
    workers: int | None = None  # engine "ray": encoding actors (default: the cluster's CPUs)

    @classmethod
    def from_manifest(cls, m: Manifest) -> BuildOptions:
        """The options an existing build was made with (``hiera add`` rebuilds with these)."""
        opts = cls(bm25=m.bm25 is not None, dense=bool(m.models))
        if m.bm25:
            opts.bm25_config = Bm25Config.from_dict(m.bm25)
            opts.bm25_doc_text = m.bm25.get("doc_text", "fulltext")
        if m.models:
            opts.doc_encoder = m.models["doc"]["path"]
            opts.passage_encoder = m.models["passage"]["path"]
            opts.backend = m.backend("passage")
            opts.passage_factory = m.faiss.get("passage", "Flat")
            opts.doc_factory = m.faiss.get("doc", "Flat")
        opts.defaults = {name: dict(params) for name, params in m.defaults.items()}
        opts.shards = len(m.shards)
        return opts


def live_build_dir(root: Path) -> Path | None:
    link = root / INDEX_LINK
    if not link.exists():
        return None
    return link.resolve()


def build(
    root: str | Path,
    options: BuildOptions | None = None,
    log: Callable[[str], None] = print,
    store: CorpusStore | None = None,
) -> Manifest:
    """Build every requested index of the collection at ``root`` and swap it in.

    Holds the collection's writer lock (a second writer is refused at once).
    A failure while writing (disk full, a file size limit) is a one-line
    :class:`HieraError`; the live build is untouched.

    ``store``: read the corpus through this store (``hiera add`` passes the
    one whose ingest transaction is still open); the previous build is then
    kept, for the caller to remove with :func:`remove_unused_builds` once it
    has committed.
    """
    root = Path(root)
    CorpusStore(root)  # a missing collection is refused before the lock file is created
    with writer_lock(root, "hiera build"):
        manifest = _build_locked(root, options or BuildOptions(), log, store or CorpusStore(root))
        if store is None:
            remove_unused_builds(root)
        return manifest


def remove_unused_builds(root: Path) -> None:
    """Every build but the live one, leftovers of killed builds and tuning files of removed builds.

    Called under the writer lock, so no other build is being written.
    """
    builds = Path(root) / BUILDS
    live = live_build_dir(Path(root))
    if not builds.is_dir():
        return
    for p in builds.iterdir():
        if p.is_dir() and (live is None or p.resolve() != live):
            shutil.rmtree(p, ignore_errors=True)
    for p in builds.glob(f"*{TUNED_SUFFIX}"):
        if not (builds / p.name[: -len(TUNED_SUFFIX)]).is_dir():
            p.unlink(missing_ok=True)


def _build_locked(root: Path, opts: BuildOptions, log: Callable[[str], None], store: CorpusStore) -> Manifest:
    if opts.bm25_doc_text not in DOC_TEXTS:
        raise BadInputError(f"bm25 document text must be one of {DOC_TEXTS}, got {opts.bm25_doc_text!r}")
    if not (opts.bm25 or opts.dense):
        raise BadInputError("nothing to build: both BM25 and dense indexes are switched off")
    opts = replace(opts, defaults=check_defaults(opts.defaults, opts.bm25, opts.dense))
    stats = store.stats()
    if stats["passages"] == 0:
        raise BadInputError(f"{root} has no passages to index; ingest documents first")

    previous_dir = live_build_dir(root)
    previous = _read_previous(previous_dir)
    builds = root / BUILDS
    builds.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"
    name, n = stamp, 1
    # Two builds in the same second by one process (a server, a script, `add`
    # right after `build`) must not collide with the live build directory.
    while (builds / name).exists() or (builds / (name + ".partial")).exists():
        n += 1
        name = f"{stamp}-{n}"
    partial = builds / (name + ".partial")
    partial.mkdir()
    try:
        if opts.shards or opts.engine != "local":
            from hiera.shard.build import build_sharded_into

            manifest = build_sharded_into(partial, store, opts, previous_dir, previous, log)
        else:
            manifest = _build_into(partial, store, opts, previous_dir, previous, log)
        final = builds / name
        os.replace(partial, final)
        fsync_dir(builds)
        _swap_link(root, final)
        fsync_dir(root)
    except BaseException as e:
        shutil.rmtree(partial, ignore_errors=True)
        if _is_write_failure(e):
            raise HieraError(
                f"cannot write the new index of {root}: {_reason(e)}; the previous index is untouched "
                "(free some space and rerun `hiera build`)"
            ) from None
        raise
    return manifest


_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS, errno.EIO, errno.EACCES, errno.EPERM})


def _is_write_failure(e: BaseException) -> bool:
    """Disk full, a file size limit, a read-only or failing disk — not a bug.

    numpy and bm25s raise ``OSError``; the embedding cache raises SQLite's
    ``OperationalError``; FAISS reports a failed ``fwrite`` as a ``RuntimeError``.
    """
    if isinstance(e, OSError):  # errno None: a short write ("1673 requested and 496 written", numpy's tofile)
        return e.errno in _WRITE_ERRNOS or (e.errno is None and "written" in str(e))
    text = str(e).lower()
    if isinstance(e, sqlite3.OperationalError):
        return any(w in text for w in ("disk", "full", "i/o", "readonly", "read-only"))
    return isinstance(e, RuntimeError) and ("fwrite" in text or ("faiss" in text and "write" in text))


def _reason(e: BaseException) -> str:
    if isinstance(e, OSError):
        return f"{e.strerror or type(e).__name__} ({e.filename})" if e.filename else (e.strerror or str(e))
    text = " ".join(str(e).split())
    return text.splitlines()[0][:200] if text else type(e).__name__


def _read_previous(previous_dir: Path | None) -> Manifest | None:
    if previous_dir is None:
        return None
    try:
        return Manifest.read(previous_dir)
    except HieraError:
        return None


def _swap_link(root: Path, target: Path) -> None:
    tmp = root / f".{INDEX_LINK}.{os.getpid()}.tmp"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    os.symlink(os.path.relpath(target, root), tmp)
    os.replace(tmp, root / INDEX_LINK)


def _build_into(
    out: Path,
    store: CorpusStore,
    opts: BuildOptions,
    previous_dir: Path | None,
    previous: Manifest | None,
    log: Callable[[str], None],
) -> Manifest:
    t0 = time.perf_counter()
    docs = list(store.iter_docs())
    doc_rows = np.array([d.rowid for d in docs], dtype=np.int64)
    doc_pos = {d.id: i for i, d in enumerate(docs)}
    passage_rows: list[int] = []
    passage_texts: list[str] = []
    counts = np.zeros(len(docs), dtype=np.int64)
    fulltext: list[list[str]] = [[d.title] for d in docs] if opts.bm25_doc_text == "fulltext" else []
    rules = store.rules
    sep = store.title_sep
    for rowid, p in store.iter_passages():
        i = doc_pos[p.doc_id]
        counts[i] += 1
        passage_rows.append(rowid)
        passage_texts.append(p.titled_text(sep))
        if fulltext:
            fulltext[i].append(p.text)
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    prow = np.array(passage_rows, dtype=np.int64)
    (out / "layout").mkdir()
    np.save(out / "layout" / "passage_rows.npy", prow)
    np.save(out / "layout" / "doc_rows.npy", doc_rows)
    np.save(out / "layout" / "doc_offsets.npy", offsets)
    log(f"layout: {len(docs)} documents, {len(prow)} passages ({time.perf_counter() - t0:.1f}s)")

    manifest = Manifest(
        corpus_version=store.version,
        documents=len(docs),
        passages=len(prow),
        passage_rules=(rules.to_dict() if rules else {}),
    )
    # The previous build's defaults and tuned values carry over; this build's --set wins.
    carried = [previous.defaults if previous else {}, read_tuned(previous_dir) if previous_dir is not None else {}]
    for table in (*carried, opts.defaults or {}):
        for name, params in table.items():
            if name in METHODS:  # a method this hiera no longer has is dropped, not carried
                manifest.defaults[name] = {**manifest.defaults.get(name, {}), **params}
    check_defaults(manifest.defaults, opts.bm25, opts.dense)

    if opts.bm25:
        t = time.perf_counter()
        Bm25Index.build(passage_texts, opts.bm25_config).save(out / "bm25-passages")
        doc_texts = ["\n".join(f) for f in fulltext] if fulltext else [d.summary for d in docs]
        Bm25Index.build(doc_texts, opts.bm25_config).save(out / "bm25-docs")
        manifest.bm25 = {**opts.bm25_config.to_dict(), "doc_text": opts.bm25_doc_text}
        log(f"bm25: passages and documents ({opts.bm25_doc_text}) in {time.perf_counter() - t:.1f}s")
    del fulltext

    if opts.dense:
        t = time.perf_counter()
        (out / "dense").mkdir()
        p_enc = Encoder(opts.passage_encoder, batch_size=opts.batch_size, cache_dir=opts.cache_dir, backend=opts.backend)
        same = str(Path(opts.doc_encoder)) == str(Path(opts.passage_encoder))
        d_enc = p_enc if same else Encoder(
            opts.doc_encoder, batch_size=opts.batch_size, cache_dir=opts.cache_dir, backend=opts.backend
        )
        pvecs = _vectors(
            p_enc, passage_texts, prow, previous_dir, previous, "passage", opts.progress, "encode passages"
        )
        save_matrix(out / "dense" / "passages.f16.npy", pvecs)
        save_faiss(_faiss_for(pvecs, opts.passage_factory, previous_dir, previous, "passage", prow, p_enc), out / "dense" / "passages.faiss")
        del passage_texts
        dvecs = _vectors(
            d_enc, [d.summary for d in docs], doc_rows, previous_dir, previous, "doc", opts.progress, "encode documents"
        )
        save_matrix(out / "dense" / "docs.f16.npy", dvecs)
        save_faiss(_faiss_for(dvecs, opts.doc_factory, previous_dir, previous, "doc", doc_rows, d_enc), out / "dense" / "docs.faiss")
        # Passage-aggregate document vectors (issue 7): the normalized mean of a
        # document's passage vectors, free once passages are encoded.
        mean = _mean_vectors(pvecs, offsets).astype(np.float16).astype(np.float32)
        save_matrix(out / "dense" / "docs-mean.f16.npy", mean)
        save_faiss(build_faiss(mean, opts.doc_factory), out / "dense" / "docs-mean.faiss")
        manifest.models = {"passage": p_enc.info.to_dict(), "doc": d_enc.info.to_dict()}
        manifest.faiss = {"passage": opts.passage_factory, "doc": opts.doc_factory}
        log(f"dense: {len(prow)} passages, {len(docs)} documents in {time.perf_counter() - t:.1f}s")
    manifest.write(out)
    return manifest


def _mean_vectors(pvecs: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Normalized per-document sum of passage vectors (zero for a document without passages)."""
    counts = np.diff(offsets)
    # reduceat sums each [start, next start) block; an empty block yields the
    # row at its start instead of zero, so those are zeroed afterwards.
    starts = offsets[:-1].clip(max=len(pvecs) - 1)
    sums = np.add.reduceat(pvecs.astype(np.float32), starts, axis=0)
    sums[counts == 0] = 0.0
    norms = np.linalg.norm(sums, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (sums / norms).astype(np.float32)


def _vectors(
    enc: Encoder,
    texts: list[str],
    rows: np.ndarray,
    previous_dir: Path | None,
    previous: Manifest | None,
    level: str,
    progress: bool,
    desc: str,
) -> np.ndarray:
    """Vectors for ``texts``: copied from the previous build where possible."""
    out = np.zeros((len(texts), enc.dim), dtype=np.float32)
    todo = np.ones(len(texts), dtype=bool)
    if previous_dir is not None and previous is not None and _same_vectors(previous, level, enc):
        old_rows = np.load(previous_dir / "layout" / f"{level}_rows.npy")
        old_vecs = np.load(previous_dir / "dense" / f"{level}s.f16.npy", mmap_mode="r")
        where = {int(r): i for i, r in enumerate(old_rows)}
        hit = np.array([where.get(int(r), -1) for r in rows], dtype=np.int64)
        found = hit >= 0
        if found.any():
            out[found] = old_vecs[hit[found]].astype(np.float32)
            todo &= ~found
    idx = np.flatnonzero(todo)
    if len(idx):
        # rounded to float16 as the matrix stores them, so that FAISS indexes hold exactly the matrix's
        # vectors, and an index appended to (hiera add) equals one built from scratch on the same documents
        out[idx] = enc.encode_document([texts[i] for i in idx], progress=progress, desc=desc).astype(np.float16)
    return out


def _same_vectors(previous: Manifest, level: str, enc: Encoder) -> bool:
    """Whether the previous build's ``level`` vectors are what ``enc`` would make: same model, same backend."""
    return (not previous.shards and previous.models.get(level, {}).get("fingerprint") == enc.fingerprint
            and previous.backend(level) == enc.backend)


def _faiss_for(
    vecs: np.ndarray, factory: str, previous_dir: Path | None, previous: Manifest | None, level: str, rows: np.ndarray,
    enc: Encoder,
):
    """Append to the previous FAISS index when its vectors are ``enc``'s and the old rows are a prefix of the new.

    The vector check matters: with another model or backend the previous
    index holds other vectors for the same rows.
    """
    if (previous_dir is not None and previous is not None and _same_vectors(previous, level, enc)
            and previous.faiss.get(level) == factory):
        old_rows = np.load(previous_dir / "layout" / f"{level}_rows.npy")
        n = len(old_rows)
        if n <= len(rows) and np.array_equal(old_rows, rows[:n]):
            index = load_faiss(previous_dir / "dense" / f"{level}s.faiss", mmap=False)
            if index.ntotal == n:
                if len(rows) > n:
                    index.add(np.ascontiguousarray(vecs[n:], dtype=np.float32))
                return index
    return build_faiss(vecs, factory)
