"""The writer of a change: a new build from the live one without rebuilding it (:mod:`hiera.index.segments`).

A change (documents removed, replaced or added) is applied to the store in
one transaction, and inside it this writer publishes the build that serves
the new state, as :func:`hiera.index.build.build` does for ``hiera add``:

* the live build's *base* index files are hard-linked, not copied or re-read
  (their checksums are carried, not recomputed);
* the base's documents that the store no longer holds at the same row (removed,
  or replaced: a replacement gets new rows) are listed in ``tombstones.npy``
  and masked at search time;
* every live document the base does not hold is written to the *delta*
  segment (``delta/``): its BM25 indexes scored with the base's statistics
  plus its own, its vectors copied from the live build by row or else taken
  from the embedding cache (text encoded before is not encoded again), a Flat
  FAISS index over them. A delta that the change leaves as it was is
  hard-linked too;
* the name table is linked (its reader, :class:`hiera.link.titles.TitleIndex`,
  masks the dead documents' names like every other index), and the delta's
  documents' names go into a delta name table (``delta/names/``: BM25 over
  the base table's statistics, vectors of known names copied, Flat FAISS),
  composed with the base's by :class:`hiera.index.segments.SegmentedNames`;
  a table naming more than the base (written before delta name tables) is
  rewritten whole from the live titles instead.

When the dead and delta rows would pass :data:`~hiera.index.segments.COMPACT_AT`
of the build, or the live build cannot take a delta (a sharded build gaining
text, a build without BM25 token counts), the change compacts instead: the
whole build is rewritten from the store, every vector reused
(:func:`hiera.index.build._build_into`'s path, ``hiera build --compact``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from hiera.corpus.store import CorpusStore
from hiera.encode import Encoder
from hiera.errors import BadInputError
from hiera.index.bm25 import Bm25Config, Bm25Index
from hiera.index.bm25stats import build_delta
from hiera.index.build import (
    BuildOptions,
    _build_into,
    _step,
    _vectors,
    checked_options,
    write_name_index,
)
from hiera.index.dense import build_faiss, mean_vectors, save_faiss, save_matrix
from hiera.index.manifest import SHARDS_DIR, Manifest, read_tuned
from hiera.index.names import NAMES_DIR, NameBase, StringTable
from hiera.index.publish import publish
from hiera.index.segments import COMPACT_AT, DELTA_DIR, TOMBSTONES
from hiera.io import load_npy


@dataclass
class ChangePlan:
    """What a change does to the live build: which base documents die, which documents form the delta."""

    base_docs: int
    base_passages: int
    dead: np.ndarray  # dead base document positions, ascending
    dead_passages: int
    delta_rows: list[int]  # store row ids of the delta's documents, in store order
    delta_passages: int
    same_delta: bool  # the delta holds exactly the live build's delta documents: link it

    @property
    def share(self) -> float:
        """Dead and delta passages over the base's: past :data:`COMPACT_AT`, compact."""
        return (self.dead_passages + self.delta_passages) / max(1, self.base_passages)


def plan_change(store: CorpusStore, build_dir: Path, m: Manifest) -> ChangePlan:
    base = m.updates.get("base", {}) if m.updates else {}
    nb = int(base.get("documents", m.documents))
    pb = int(base.get("passages", m.passages))
    doc_rows = np.asarray(load_npy(build_dir / "layout" / "doc_rows.npy"), dtype=np.int64)
    offsets = np.asarray(load_npy(build_dir / "layout" / "doc_offsets.npy"), dtype=np.int64)
    live = np.fromiter(store.doc_rowids(), dtype=np.int64)
    held = np.isin(doc_rows[:nb], live)
    dead = np.flatnonzero(~held).astype(np.int64)
    counts = np.diff(offsets[: nb + 1])
    delta = np.setdiff1d(live, doc_rows[:nb])  # ascending row ids: store order
    delta_passages = store.passage_counts([int(r) for r in delta])
    return ChangePlan(
        base_docs=nb, base_passages=pb, dead=dead, dead_passages=int(counts[dead].sum()),
        delta_rows=[int(r) for r in delta], delta_passages=int(sum(delta_passages.values())),
        same_delta=np.array_equal(delta, doc_rows[nb:]),
    )


def needs_rebuild(plan: ChangePlan, m: Manifest, compact: bool = False, compact_at: float = COMPACT_AT) -> str | None:
    """Why this change rewrites the whole build instead of adding a segment, or ``None``."""
    if compact:
        return "asked to compact"
    if m.shards and not plan.same_delta:
        return "a sharded build takes removals as tombstones; new text rebuilds it"
    if plan.share > compact_at:
        return f"dead and new rows are {plan.share:.0%} of the build (compaction from {compact_at:.0%})"
    if m.bm25 is not None and "tokens" not in m.bm25 and not plan.same_delta:
        return "the live build does not record its BM25 token counts (built by an older hiera)"
    return None


def update(root: str | Path, store: CorpusStore, log: Callable[[str], None] = print, device: str = "auto",
           compact: bool = False, progress: bool = True, compact_at: float = COMPACT_AT) -> Manifest:
    """Publish the build that serves ``store``'s current state, from the live build (inside the change's transaction).

    Sharded builds that need a rebuild are sent to :func:`hiera.builds.update_collection`'s caller.
    """

    def write(out: Path, st: CorpusStore, previous_dir: Path | None, previous: Manifest | None) -> Manifest:
        if previous_dir is None or previous is None:
            raise BadInputError(f"{root} has no index yet; run `hiera build {root}`")
        previous.check_files(previous_dir)  # a damaged live build is refused, never extended (as searches refuse it)
        opts = replace(BuildOptions.from_manifest(previous), device=device, progress=progress)
        plan = plan_change(st, previous_dir, previous)
        why = needs_rebuild(plan, previous, compact, compact_at)
        if why is not None:
            if previous.shards:
                raise BadInputError("internal: a sharded build's rebuild goes through hiera.builds.update_collection")
            log(f"compact: {why}; rewriting the build (every vector reused)")
            return _build_into(out, st, checked_options(opts, st), previous_dir, previous, log)
        return write_segment(out, st, previous_dir, previous, plan, opts, log)

    return publish(root, write, store=store, command="hiera update")


def write_segment(out: Path, store: CorpusStore, previous_dir: Path, previous: Manifest, plan: ChangePlan,
                  opts: BuildOptions, log: Callable[[str], None]) -> Manifest:
    t0 = time.perf_counter()
    nb, pb = plan.base_docs, plan.base_passages
    # the base's name table is linked (its reader masks the dead documents, hiera.link.titles) and new text's names
    # go into the delta; a table that cannot take a delta (it covers more than the base) is rewritten whole
    names_delta = _names_extend(previous, nb)
    known = _link_base(previous_dir, previous, out, link_delta=plan.same_delta,
                       link_names=plan.same_delta or names_delta)
    old = {k: np.asarray(load_npy(previous_dir / "layout" / f"{k}.npy"), dtype=np.int64)
           for k in ("doc_rows", "passage_rows", "doc_offsets")}
    docs = list(store.docs_by_rowid(plan.delta_rows).values()) if plan.delta_rows else []
    docs.sort(key=lambda d: d.rowid)
    passages = list(store.iter_passages([d.id for d in docs])) if docs else []
    counts = np.zeros(len(docs), dtype=np.int64)
    pos_of = {d.id: i for i, d in enumerate(docs)}
    for _, p in passages:
        counts[pos_of[p.doc_id]] += 1
    (out / "layout").mkdir(exist_ok=True)
    np.save(out / "layout" / "doc_rows.npy", np.concatenate([old["doc_rows"][:nb], [d.rowid for d in docs]]).astype(np.int64))
    np.save(out / "layout" / "passage_rows.npy",
            np.concatenate([old["passage_rows"][:pb], [r for r, _ in passages]]).astype(np.int64))
    np.save(out / "layout" / "doc_offsets.npy",
            np.concatenate([old["doc_offsets"][: nb + 1], pb + np.cumsum(counts)]).astype(np.int64))
    if len(plan.dead):
        np.save(out / TOMBSTONES, plan.dead)
    log(f"layout: {nb} base documents ({len(plan.dead)} dead), {len(docs)} in the delta "
        f"({time.perf_counter() - t0:.1f}s)")

    m = Manifest.from_dict({k: v for k, v in previous.to_dict().items() if k not in ("files", "checksums")})
    m.corpus_version = store.version
    m.documents, m.passages = nb + len(docs), pb + len(passages)
    m.created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for name, params in read_tuned(previous_dir).items():  # the live build's tuning carries over, as in a rebuild
        m.defaults[name] = {**m.defaults.get(name, {}), **params}
    delta: dict[str, int] = {"documents": len(docs), "passages": len(passages)}
    delta_names = previous.updates.get("names") if plan.same_delta else None
    if docs and not plan.same_delta:
        delta.update(_write_delta(out / DELTA_DIR, store, previous_dir, previous, docs, passages, counts, opts, log))
        if names_delta:
            delta_names = _write_delta_names(out / DELTA_DIR, store, previous_dir, previous, docs, opts, log)
    elif plan.same_delta and previous.updates.get("delta"):
        delta = dict(previous.updates["delta"])
    if previous.names and not plan.same_delta and not names_delta:
        titles = _titles(previous_dir, nb, plan.dead) + [d.title for d in docs]
        enc = _names_encoder(previous, opts)
        t = time.perf_counter()
        m.names = write_name_index(out, store, titles, opts, enc, previous_dir, previous)
        log(f"names: {m.names['rows']} names rewritten in {time.perf_counter() - t:.1f}s")
    retired = store.retired([int(old["doc_rows"][i]) for i in plan.dead])
    superseded = sum(1 for doc_id in retired.values() if store.canonical_id(doc_id) is not None)
    m.updates = {
        "generation": int(previous.updates.get("generation", 0)) + 1,
        "base_version": int(previous.updates.get("base_version", previous.corpus_version)),
        "base": {"documents": nb, "passages": pb},
        "dead": {"documents": len(plan.dead), "passages": plan.dead_passages,
                 "superseded": superseded, "deleted": len(plan.dead) - superseded},
    }
    if delta["documents"]:
        m.updates["delta"] = delta
        if delta_names:
            m.updates["names"] = delta_names
    m.write(out, known=known)
    log(f"update: generation {m.updates['generation']} in {time.perf_counter() - t0:.1f}s")
    return m


def _names_extend(previous: Manifest, nb: int) -> bool:
    """Whether the live build's name table can be the base of a delta's: it names exactly the base documents and
    records what a delta's names are scored and scaled with (builds made since deltas took names)."""
    names = previous.names or {}
    return bool(names) and int(names.get("documents", -1)) == nb and "prior_top" in names and (
        not names.get("bm25") or "tokens" in names)


def _names_encoder(previous: Manifest, opts: BuildOptions) -> Callable[[], Encoder] | None:
    """What makes the names' encoder (the document encoder) when the live build has name vectors: made only if a
    name is new (known names' vectors are copied)."""
    return (lambda: opts.encoder("doc")) if previous.models and (previous.names or {}).get("dense") else None


def _write_delta_names(out: Path, store: CorpusStore, previous_dir: Path, previous: Manifest, docs: list,
                       opts: BuildOptions, log: Callable[[str], None]) -> dict:
    """``delta/names/`` (and ``delta/dense/names.*``): the delta documents' names, over the base table's statistics."""
    t = time.perf_counter()
    record = previous.names or {}
    cfg = Bm25Config.from_dict(previous.bm25) if previous.bm25 is not None and record.get("bm25") else None
    bm25 = Bm25Index.load(previous_dir / NAMES_DIR / "bm25", cfg, mmap=True) if cfg is not None else None
    base = NameBase(bm25, int(record.get("tokens", 0)), float(record["prior_top"]))
    enc = _names_encoder(previous, opts)
    names = write_name_index(out, store, [d.title for d in docs], opts, enc, previous_dir, previous, base)
    log(f"names: {names['rows']} names of {len(docs)} delta documents in {time.perf_counter() - t:.1f}s")
    return names


def _link_base(previous_dir: Path, previous: Manifest, out: Path, link_delta: bool, link_names: bool) -> dict[str, str]:
    """Hard-link the live build's index files into ``out``; returns their recorded checksums.

    The layout and the tombstones are always written anew; the delta and the
    name table only when this change leaves them as they were. A sharded
    build's shard directories are linked whole (each checked by its own manifest).
    """
    known: dict[str, str] = {}
    names_files = (f"{NAMES_DIR}/", "dense/names.")
    for rel in previous.files:
        if rel.startswith("layout/") or rel == TOMBSTONES:
            continue
        if rel.startswith(f"{DELTA_DIR}/") and not link_delta:
            continue
        if rel.startswith(names_files) and not link_names:
            continue
        dst = out / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.link(previous_dir / rel, dst)
        if rel in previous.checksums:
            known[rel] = previous.checksums[rel]
    shards = previous_dir / SHARDS_DIR
    if shards.is_dir():
        for src in sorted(shards.rglob("*")):
            dst = out / src.relative_to(previous_dir)
            if src.is_dir():
                dst.mkdir(parents=True, exist_ok=True)
            else:
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.link(src, dst)
    return known


def _titles(previous_dir: Path, nb: int, dead: np.ndarray) -> list[str]:
    """The base's titles by position ('' where a document died), read from the live build's name table."""
    table = StringTable.load(previous_dir / NAMES_DIR, "titles")
    titles = [table[i] for i in range(nb)]
    for i in dead:
        titles[int(i)] = ""
    return titles


def _write_delta(out: Path, store: CorpusStore, previous_dir: Path, previous: Manifest, docs: list, passages: list,
                 counts: np.ndarray, opts: BuildOptions, log: Callable[[str], None]) -> dict[str, int]:
    """``delta/``: BM25 (the base's statistics plus the delta's), vectors (copied, cached or encoded), Flat FAISS."""
    out.mkdir()
    sep = store.title_sep
    texts = [p.titled_text(sep) for _, p in passages]
    prow = np.asarray([r for r, _ in passages], dtype=np.int64)
    drow = np.asarray([d.rowid for d in docs], dtype=np.int64)
    record: dict[str, int] = {}
    if previous.bm25 is not None:
        t = time.perf_counter()
        cfg = Bm25Config.from_dict(previous.bm25)
        fulltext = previous.bm25.get("doc_text", "fulltext") == "fulltext"
        doc_texts = [store.doc_fulltext(d.id) for d in docs] if fulltext else [d.summary for d in docs]
        for name, items in (("passages", texts), ("docs", doc_texts)):
            base = Bm25Index.load(previous_dir / f"bm25-{name}", cfg, mmap=True)
            index, record[f"tokens_{name}"] = build_delta(items, base, int(previous.bm25["tokens"][name]), cfg)
            index.save(out / f"bm25-{name}")
        log(f"bm25: delta of {len(texts)} passages, {len(docs)} documents in {time.perf_counter() - t:.1f}s")
    if previous.models:
        (out / "dense").mkdir()
        p_enc, d_enc = opts.encoders()
        with _step(log, "delta: passage vectors", len(texts), "passages"):
            pvecs = _vectors(p_enc, texts, prow, previous_dir, previous, "passage", opts.progress, "encode passages")
        with _step(log, "delta: document vectors", len(docs), "documents"):
            dvecs = _vectors(d_enc, [d.summary for d in docs], drow, previous_dir, previous, "doc", opts.progress,
                             "encode documents")
        offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        mean = mean_vectors(pvecs, offsets).astype(np.float16)
        for name, vecs in (("passages", pvecs), ("docs", dvecs), ("docs-mean", mean)):
            save_matrix(out / "dense" / f"{name}.f16.npy", vecs)
            save_faiss(build_faiss(vecs, "Flat"), out / "dense" / f"{name}.faiss")
    return record

