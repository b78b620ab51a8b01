"""A living collection: what removing, updating and compacting cost against a full rebuild, and what drifts.

    python -m bench.updates [--parts pooled,synthetic] [--passages 200000] [--queries 100]

On (a) a copy of the pooled corpus (``bench/work/pooled``, real text; the
copy lives in ``bench/work/updates/``, the original is never written) and (b)
a synthetic collection of ``--passages`` passages (:mod:`bench.synthetic`,
vectors pre-filled into a private embedding cache; built with Flat indexes so
that dense search is exact), in one run:

1. **remove** 1% of the documents (seeded) with
   :func:`hiera.builds.remove_documents`: seconds, and the ratio to a full
   rebuild of the same collection measured in the same run
   (:func:`hiera.builds.build_collection` with the live build's options; every
   vector comes from the previous build, nothing is encoded; the faster of
   the run's two rebuilds, the one before the changes and the one after);
2. **update** 1% of the documents, one section changed each (a sentence
   appended to its first paragraph), re-ingested as ``hiera-jsonl`` with the
   build published inside the ingest's transaction
   (``ingest(..., before_commit=update_collection)``): seconds and the ratio
   to the rebuild. The changed passages need vectors: on the pooled copy they
   are encoded (the real cost, model load included); on synthetic data their
   vectors are filed into the private cache inside the transaction, just
   before the update runs (as :mod:`bench.synthetic` files the others), and
   the filing's time is left out: there the figure has no encoding in it;
3. **10% deletes** with ``compact_at=1.0`` (the build stays segmented): search
   p50 of ``bm25``, ``dense``, ``hybrid`` and ``dhr`` on the segmented build
   against a copy from before the deletes (the same queries, alternated in one
   process, so the machine's load cancels in the ratio); top-10 of every method
   against a fresh build of the remaining documents (a full rebuild from the
   store: BM25 statistics of the remaining text only): fraction of queries
   identical (dense: exact, expected 1.0; the BM25-based methods drift, since
   tombstoned texts still count in the base's statistics) and mean overlap@10;
   then compaction (``update_collection(compact=True)`` inside a store
   transaction): every method identical to the fresh build, and the build's
   bytes (its manifest's files) against the fresh build's.

Writes ``bench/out/updates.json``. Wall-clock figures: compare them as ratios within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import OUT, WORK, Report, data_dir
from bench.pooled import POOLED

K = 10
METHODS = ("bm25", "dense", "hybrid", "dhr")
BASE = WORK / "updates"
COLUMNS = ("corpus", "step", "value", "unit", "target")


def _quiet(_: str) -> None:
    pass


def _copy(src: Path, dst: Path) -> Path:
    """A private copy of a collection (hard links would share the store and the builds with the original)."""
    if dst.exists():
        shutil.rmtree(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src, dst, symlinks=True, ignore=shutil.ignore_patterns("writer.lock"))
    return dst


def _live(root: Path):
    from hiera.index.manifest import Manifest
    from hiera.index.publish import live_build_dir

    d = live_build_dir(root)
    assert d is not None, f"{root} has no build"
    return d, Manifest.read(d)


def rebuild(root: Path) -> float:
    """A full rebuild with the live build's options (vectors reused from it): seconds."""
    from hiera.builds import build_collection
    from hiera.index.build import BuildOptions

    _, m = _live(root)
    opts = BuildOptions.from_manifest(m)
    opts.device, opts.progress = "cpu", False
    t = time.perf_counter()
    build_collection(root, opts, log=lambda s: print(f"  rebuild {time.perf_counter() - t:7.1f}s {s}", flush=True))
    return time.perf_counter() - t


def build_bytes(root: Path) -> int:
    d, m = _live(root)
    return sum((d / rel).stat().st_size for rel in m.files)


def doc_ids(root: Path) -> list[str]:
    from hiera.corpus.store import CorpusStore

    store = CorpusStore(root)
    ids = [d.id for d in store.iter_docs()]
    store.close()
    return ids


def pick(ids: list[str], share: float, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [ids[i] for i in sorted(rng.choice(len(ids), size=max(1, round(share * len(ids))), replace=False))]


def remove(root: Path, ids: list[str], compact_at: float | None = None) -> float:
    from hiera.builds import remove_documents

    kw: dict[str, Any] = {} if compact_at is None else {"compact_at": compact_at}
    t = time.perf_counter()
    remove_documents(root, ids, log=_quiet, device="cpu", progress=False, **kw)
    return time.perf_counter() - t


def changed_documents(root: Path, ids: list[str], path: Path) -> Path:
    """``ids``' documents with one section changed each (a sentence appended), as hiera-jsonl lines."""
    from hiera.corpus.store import CorpusStore

    store = CorpusStore(root)
    lines = []
    run = time.strftime("%Y%m%d%H%M%S")  # text no earlier run filed in the embedding cache: the update encodes it
    for doc_id in ids:
        doc = store.get_document(doc_id)
        assert doc is not None
        sentence = f" This section was revised (revision {doc_id}, {run})."
        sec = next((s for s in doc.sections if s.paragraphs), None)
        if sec is not None:
            sec.paragraphs[0] += sentence
        elif doc.lead:
            doc.lead[-1] += sentence
        lines.append(json.dumps(doc.to_dict()) + "\n")
    store.close()
    path.write_text("".join(lines), encoding="utf-8")
    return path


def update(root: Path, path: Path, prefill: Callable[[Any], None] | None = None) -> float:
    """Re-ingest ``path`` with the build published inside the ingest's transaction: seconds.

    ``prefill`` (synthetic data) files the changed texts' vectors into the cache; it stands in for the
    encoder and is not part of the update, so its time (a model load, mostly) is left out of the figure.
    """
    from hiera.builds import update_collection
    from hiera.corpus.ingest import ingest

    filing = [0.0]

    def publish(st: Any) -> None:
        if prefill is not None:
            t0 = time.perf_counter()
            prefill(st)
            filing[0] = time.perf_counter() - t0
        update_collection(root, st, log=_quiet, device="cpu", progress=False)

    t = time.perf_counter()
    ingest([path], "hiera-jsonl", root, progress=False, before_commit=publish)
    return time.perf_counter() - t - filing[0]


def compact(root: Path) -> float:
    """``update_collection(compact=True)`` inside a store transaction (what ``hiera build --compact`` does)."""
    from hiera.builds import update_collection
    from hiera.corpus.store import CorpusStore
    from hiera.lock import writer_lock

    store = CorpusStore(root)
    t = time.perf_counter()
    with writer_lock(root, "bench compact"):
        conn = store._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            update_collection(root, store, log=_quiet, device="cpu", compact=True, progress=False)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    store.close()
    return time.perf_counter() - t


def synthetic_prefill(cache_dir: Path, ids: list[str]) -> Callable[[Any], None]:
    """Inside the update's transaction: file vectors for the changed documents' texts (their old vectors, perturbed)."""
    from hiera.encode import DEFAULT_MODEL, EmbeddingCache, Encoder, text_hash

    def prefill(st: Any) -> None:
        enc = Encoder(DEFAULT_MODEL, use_cache=False, backend="torch")
        cache = EmbeddingCache(cache_dir, enc.cache_key, enc.dim)
        rng = np.random.default_rng(7)
        sep = st.title_sep
        items = []
        for d in st.iter_docs(ids):
            texts = [p.titled_text(sep) for _, p in st.iter_passages([d.id])] + [d.title, d.summary]
            for s in texts:
                v = rng.standard_normal(enc.dim).astype(np.float32)
                items.append((text_hash(enc.document_prompt + s), v / np.linalg.norm(v)))
        # only texts the cache lacks get a vector: the unchanged passages keep theirs
        have = cache.get_many([h for h, _ in items])
        cache.put_many([(h, v) for h, v in items if h not in have])
        cache.close()

    return prefill


# -- searches ------------------------------------------------------------------------------------------------
def open_col(root: Path) -> Any:
    from hiera.builds import open_collection

    return open_collection(root, device="cpu")


def hits(col: Any, method: str, queries: list[str]) -> tuple[list[list[tuple[str, str]]], list[float]]:
    """Top-10 (document id, passage id) per query and the seconds each search took."""
    from hiera.retrieve import get_retriever

    r = get_retriever(method, col)
    out, secs = [], []
    for q in queries:
        t = time.perf_counter()
        res = r.search(q, k=K)
        secs.append(time.perf_counter() - t)
        out.append([(h.doc_id, h.passage_id) for h in res.hits])
    return out, secs


def latency_pair(a: Any, b: Any, method: str, queries: list[str]) -> tuple[float, float]:
    """p50 seconds of ``method`` on ``a`` and on ``b``, the queries alternated so that load hits both alike."""
    from hiera.retrieve import get_retriever

    ra, rb = get_retriever(method, a), get_retriever(method, b)
    for q in queries[:3]:  # warm-up: model loads, first mmap touches
        ra.search(q, k=K)
        rb.search(q, k=K)
    ta, tb = [], []
    for i, q in enumerate(queries):
        for r, ts in ((ra, ta), (rb, tb)) if i % 2 == 0 else ((rb, tb), (ra, ta)):
            t = time.perf_counter()
            r.search(q, k=K)
            ts.append(time.perf_counter() - t)
    return statistics.median(ta), statistics.median(tb)


def agreement(x: list[list[tuple[str, str]]], y: list[list[tuple[str, str]]]) -> tuple[float, float]:
    """(fraction of queries whose top-10 is identical in order, mean overlap@10 of the passage sets)."""
    same = float(np.mean([a == b for a, b in zip(x, y, strict=True)]))
    overlap = float(np.mean([len(set(a) & set(b)) / max(1, len(b)) for a, b in zip(x, y, strict=True)]))
    return same, overlap


def removed_returned(col: Any, queries: list[str], removed: set[str]) -> int:
    n = 0
    for m in METHODS:
        for top in hits(col, m, queries)[0]:
            n += sum(1 for d, _ in top if d in removed)
    return n


# -- one corpus ----------------------------------------------------------------------------------------------
def run_corpus(rep: Report, name: str, template: Path, queries: list[str], seed: int,
               prefill_for: Callable[[list[str]], Callable[[Any], None] | None]) -> dict[str, Any]:
    work = BASE / name
    a = _copy(template, work / "live")
    ids = doc_ids(a)
    res: dict[str, Any] = {"documents": len(ids), "passages": _live(a)[1].passages}
    print(f"{name}: {len(ids):,} documents, {res['passages']:,} passages", flush=True)

    def row(step: str, value: Any, unit: str, target: str = "", key: str | None = None) -> None:
        res[key or step] = value
        rep.add({"corpus": name, "step": step, "value": value, "unit": unit, "target": target})

    t_first = rebuild(a)  # also the build the changes start from (made by this code)

    gone1 = pick(ids, 0.01, seed)
    t_remove = remove(a, gone1)
    left = [i for i in ids if i not in set(gone1)]
    changed = pick(left, 0.01, seed + 1)
    path = changed_documents(a, changed, work / "changed.jsonl")
    t_update = update(a, path, prefill_for(changed))

    # a clean base for the 10% deletes, and a copy of it that searches "before"; the rebuild the changes are held
    # to is the faster of the two (the first reads a cold copy): the smaller denominator, the stricter ratio
    t_second = rebuild(a)
    t_rebuild = min(t_first, t_second)
    res["rebuilds_s"] = [round(t_first, 2), round(t_second, 2)]
    row("full rebuild (vectors reused; the faster of two)", round(t_rebuild, 2), "s", key="rebuild_s")
    row(f"remove 1% ({len(gone1)} documents)", round(t_remove, 2), "s", key="remove_s")
    row("remove 1% / rebuild", round(t_remove / t_rebuild, 4), "ratio", "≤ 0.05", key="remove_ratio")
    row(f"update 1% ({len(changed)} documents, one section each)", round(t_update, 2), "s", key="update_s")
    row("update 1% / rebuild", round(t_update / t_rebuild, 4), "ratio", "≤ 0.10", key="update_ratio")
    before = _copy(a, work / "before")
    left = doc_ids(a)
    gone10 = pick(left, 0.10, seed + 2)
    t_rm10 = remove(a, gone10, compact_at=1.0)
    row(f"remove 10% ({len(gone10)} documents, compact_at 1.0)", round(t_rm10, 2), "s", key="remove10_s")
    _, m = _live(a)
    assert m.updates and m.updates.get("dead"), "the 10% deletes were expected to leave a segmented build"
    fresh = _copy(a, work / "fresh")
    t_fresh = rebuild(fresh)
    res["fresh_rebuild_s"] = round(t_fresh, 2)

    col_b, col_a, col_f = open_col(before), open_col(a), open_col(fresh)
    for method in METHODS:
        p_seg, p_before = latency_pair(col_a, col_b, method, queries)
        row(f"{method} p50 segmented / before", round(p_seg / p_before, 3), "ratio", "≤ 1.1", key=f"{method}_p50_ratio")
        res[f"{method}_p50_ms"] = {"segmented": round(1000 * p_seg, 2), "before": round(1000 * p_before, 2)}
    res["segmented_bytes"] = build_bytes(a)
    for method in METHODS:
        same, overlap = agreement(hits(col_a, method, queries)[0], hits(col_f, method, queries)[0])
        target = "= 1.0" if method == "dense" else "measured"
        row(f"{method} segmented = fresh (identical top-10)", round(same, 4), "fraction", target, key=f"{method}_identical")
        if method != "dense":
            row(f"{method} segmented vs fresh overlap@10", round(overlap, 4), "fraction", "measured", key=f"{method}_overlap")
    gone = set(gone1) | set(gone10)
    row("removed documents returned (segmented)", removed_returned(col_a, queries, gone), "hits", "= 0",
        key="removed_returned")
    for c in (col_a, col_b, col_f):
        c.store.close()

    t_compact = compact(a)
    row("compact", round(t_compact, 2), "s", key="compact_s")
    col_a, col_f = open_col(a), open_col(fresh)
    for method in METHODS:
        same, _ = agreement(hits(col_a, method, queries)[0], hits(col_f, method, queries)[0])
        row(f"{method} compacted = fresh (identical top-10)", round(same, 4), "fraction", "= 1.0",
            key=f"{method}_compacted_identical")
    col_a.store.close()
    col_f.store.close()
    b_a, b_f = build_bytes(a), build_bytes(fresh)
    res.update(compacted_bytes=b_a, fresh_bytes=b_f)
    row("compacted bytes / fresh bytes", round(b_a / b_f, 4), "ratio", "≤ 1.0", key="bytes_ratio")
    for d in ("before", "fresh"):
        shutil.rmtree(work / d, ignore_errors=True)
    return res


def synthetic_template(n: int) -> tuple[Path, Path, list[str]]:
    """The synthetic corpus of ``n`` passages, built once with Flat indexes (dense exact) from its private cache."""
    from bench.synthetic import SYNTHETIC_BACKEND, synthetic_collection
    from hiera.index.build import BuildOptions, build
    from hiera.index.publish import live_build_dir

    corpus, cache, qs = synthetic_collection(BASE / f"synthetic-{n}", n)
    if live_build_dir(corpus) is None:
        t = time.perf_counter()
        build(corpus, BuildOptions(backend=SYNTHETIC_BACKEND, cache_dir=cache, passage_factory="Flat",
                                   doc_factory="Flat", profile="small", device="cpu", progress=False), log=_quiet)
        print(f"synthetic: built in {time.perf_counter() - t:.0f}s", flush=True)
    return corpus, cache, qs


REAL_BACKEND = "onnx-int8"  # the stand-in vectors' cache key: the update encodes its changed text with the default


def real_template(n: int, seed: int = 13) -> tuple[Path, Path]:
    """``bench.scale_real``'s real-text store of ``n`` distractor passages plus the pooled corpus, built with Flat
    indexes from stand-in vectors.

    Real text (BM25's postings, the name table's titles and aliases are
    those of real documents); the vectors are stand-ins filed into a private
    cache, as :mod:`bench.synthetic` files its own (each document a random
    unit vector, its passages noisy copies), because encoding 1M passages
    takes hours on this machine. Text that the stand-ins do not cover (an
    update's changed passages) is encoded for real, with the default backend.
    """
    from bench.scale_real import ingest_store
    from hiera.corpus.store import STORE_FILE, CorpusStore
    from hiera.encode import DEFAULT_MODEL, EmbeddingCache, Encoder, text_hash
    from hiera.index.build import BuildOptions, build, read_corpus
    from hiera.index.names import name_rows
    from hiera.index.publish import live_build_dir

    base = BASE / f"real-{n // 1000}k"
    corpus, cache_dir, done = base / "corpus", base / "cache", base / "ready.json"
    if not done.exists():
        shutil.rmtree(base, ignore_errors=True)
        corpus.mkdir(parents=True)
        store_root = ingest_store(n, seed)
        with sqlite3.connect(store_root / STORE_FILE) as src, sqlite3.connect(corpus / STORE_FILE) as dst:
            src.backup(dst)  # a consistent copy while another process may read the store
        t = time.perf_counter()
        store = CorpusStore(corpus)
        c = read_corpus(store, fulltext=False)
        names = name_rows([d.title for d in c.docs], store.iter_aliases(), ()).names
        store.close()
        enc = Encoder(DEFAULT_MODEL, use_cache=False, backend=REAL_BACKEND)
        cache = EmbeddingCache(cache_dir, enc.cache_key, enc.dim)
        rng = np.random.default_rng(seed)
        counts = np.diff(c.offsets)
        step = 20_000
        for a in range(0, len(c.docs), step):
            b = min(a + step, len(c.docs))
            dv = rng.standard_normal((b - a, enc.dim)).astype(np.float32)
            dv /= np.linalg.norm(dv, axis=1, keepdims=True)
            pv = np.repeat(dv, counts[a:b], axis=0) + 0.5 / np.sqrt(enc.dim) * rng.standard_normal(
                (int(counts[a:b].sum()), enc.dim)).astype(np.float32)
            pv /= np.linalg.norm(pv, axis=1, keepdims=True)
            items = [(text_hash(enc.document_prompt + s), v)
                     for s, v in zip(c.passage_texts[c.offsets[a]:c.offsets[b]], pv, strict=True)]
            items += [(text_hash(enc.document_prompt + s), v) for s, v in zip(c.summaries[a:b], dv, strict=True)]
            cache.put_many(items)
        nv = rng.standard_normal((len(names), enc.dim)).astype(np.float32)
        nv /= np.linalg.norm(nv, axis=1, keepdims=True)
        cache.put_many([(text_hash(enc.document_prompt + s), v) for s, v in zip(names, nv, strict=True)])
        cache.close()
        done.write_text(json.dumps({"passages": len(c.passage_texts), "documents": len(c.docs),
                                    "seconds": round(time.perf_counter() - t, 1)}))
        print(f"real: stand-in vectors of {len(c.passage_texts):,} passages filed in {time.perf_counter() - t:.0f}s",
              flush=True)
    if live_build_dir(corpus) is None:
        t = time.perf_counter()
        build(corpus, BuildOptions(backend=REAL_BACKEND, cache_dir=cache_dir, passage_factory="Flat",
                                   doc_factory="Flat", profile="small", device="cpu", progress=False), log=_quiet)
        print(f"real: built in {time.perf_counter() - t:.0f}s", flush=True)
    return corpus, cache_dir


def main(argv: list[str] | None = None) -> Report:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="pooled,synthetic")
    ap.add_argument("--passages", type=int, default=200_000, help="synthetic passages (the issue's scale: 1000000)")
    ap.add_argument("--real", type=int, default=1_000_000,
                    help="distractor passages of the real-text part (bench.scale_real's store)")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0, help="OMP_NUM_THREADS for the run (0: the machine's default)")
    args = ap.parse_args(argv)
    # the writers run with the machine's default threads, as `hiera add` and `hiera build` do (the update's
    # encoding uses every core; the rebuild's BM25 mostly one): pinned to one thread, the update's encoding of
    # its changed passages takes twice as long. `--threads 1` measures that.
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)

    rep = Report("updates", COLUMNS)
    results: dict[str, Any] = {}
    parts = args.parts.split(",")
    if "pooled" in parts:
        from hiera.eval.questions import load_questions

        squad = data_dir() / "squad"
        qs = [q.text for q in load_questions(squad / "dev-v1.1.first24.json", "squad")]
        qs += [q.text for q in load_questions(squad / "train-du2017-44articles.json", "squad", limit=args.queries)]
        qs = qs[: args.queries]
        results["pooled"] = run_corpus(rep, "pooled", POOLED, qs, args.seed, lambda ids: None)
    if "synthetic" in parts:
        corpus, cache, qs = synthetic_template(args.passages)
        os.environ["HIERA_CACHE_DIR"] = str(cache)  # the live build's options name no cache: the writers read this
        results["synthetic"] = run_corpus(rep, "synthetic", corpus, qs[: args.queries], args.seed,
                                          lambda ids: synthetic_prefill(cache, ids))
        results["synthetic"]["scale"] = args.passages
    if "real" in parts:
        from hiera.eval.questions import load_questions

        corpus, cache = real_template(args.real)
        os.environ["HIERA_CACHE_DIR"] = str(cache)
        squad = data_dir() / "squad"
        qs = [q.text for q in load_questions(squad / "dev-v1.1.first24.json", "squad")][: args.queries]
        results["real"] = run_corpus(rep, f"real-{args.real // 1000}k", corpus, qs, args.seed, lambda ids: None)
        results["real"]["scale"] = args.real
    rep.print("updates")
    rep.write(**merged(parts, results, rep))
    return rep


def merged(parts: list[str], results: dict[str, Any], rep: Report) -> dict[str, Any]:
    """This run's parts, beside the other parts' results and rows from the last run's JSON (a run of one part keeps the other)."""
    path = OUT / "updates.json"
    old = json.loads(path.read_text()) if path.exists() else {}
    kept = [p for p in old.get("parts", []) if p not in parts]
    rep.rows[:0] = [r for r in old.get("rows", []) if r.get("corpus") in kept]
    return {"parts": kept + parts, **{p: old[p] for p in kept if p in old}, **results}


if __name__ == "__main__":
    main()
