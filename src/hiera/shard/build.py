"""``hiera build --shards N [--engine ray]``: one index per contiguous document range.

Published like a local build (:func:`hiera.index.publish.publish`: a fresh
``.partial`` directory under the writer lock): every shard and the top
manifest are written and fsynced first, then the ``index`` symlink is
swapped. A build killed half-way leaves the old index live and a
``.partial`` directory the next build removes. The corpus reading, the
layout, the option checks and the carried defaults are the local writer's
(:mod:`hiera.index.build`), so the two cannot drift apart.

Steps (each shard's work is one task of the engine):

1. the global layout (passage and document order, offsets), as an unsharded build writes it;
2. the shard plan: contiguous document ranges with about equal passage counts;
3. BM25: per shard, tokens and their statistics; the statistics are summed
   into the corpus-wide ones that every shard's scores then use
   (:mod:`hiera.index.bm25stats`);
4. dense: every passage and document summary encoded once (the embedding
   cache first; Ray Data actors on Ray), rounded to float16;
5. per shard: BM25 indexes, float16 matrices, Flat FAISS indexes, mean vectors
   and the shard's manifest (files, sizes, checksums);
6. the top manifest lists every shard with the sha256 of its manifest, so a
   shard from another build is refused at load.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from hiera.corpus.store import CorpusStore
from hiera.encode import Encoder
from hiera.errors import BadInputError
from hiera.index.bm25 import Bm25Config
from hiera.index.bm25stats import CorpusStats, analyze, build_with_stats
from hiera.index.build import (
    BuildOptions,
    Corpus,
    checked_options,
    new_manifest,
    read_corpus,
    write_layout,
    write_name_index,
)
from hiera.index.dense import build_faiss, mean_vectors, save_faiss, save_matrix
from hiera.index.manifest import MANIFEST, SHARDS_DIR, Manifest, file_sha256, shard_name
from hiera.index.publish import publish
from hiera.shard.engine import make_engine
from hiera.shard.layout import plan_ranges

EXACT_FACTORY = "Flat"


def build_sharded(
    root: str | Path,
    options: BuildOptions,
    log: Callable[[str], None] = print,
    store: CorpusStore | None = None,
) -> Manifest:
    """Build the collection at ``root`` as ``options.shards`` shards and publish it (writer lock, atomic swap)."""

    def write(out: Path, st: CorpusStore, previous_dir: Path | None, previous: Manifest | None) -> Manifest:
        return build_sharded_into(out, st, checked_options(options, st), previous_dir, previous, log)

    return publish(root, write, store=store)


def build_sharded_into(
    out: Path,
    store: CorpusStore,
    opts: BuildOptions,
    previous_dir: Path | None,
    previous: Manifest | None,
    log: Callable[[str], None],
) -> Manifest:
    """Write a sharded build into ``out`` (the caller publishes it); returns its top manifest."""
    if not opts.shards:
        raise BadInputError("--engine ray builds shards: give --shards N (N ≥ 1)")
    if opts.dense and (opts.passage_factory, opts.doc_factory) != (EXACT_FACTORY, EXACT_FACTORY):
        raise BadInputError(
            f"sharded builds need Flat FAISS indexes (got passage {opts.passage_factory!r}, doc {opts.doc_factory!r}): "
            "merging per-shard approximate indexes would not return what one index returns"
        )
    t0 = time.perf_counter()
    corpus = read_corpus(store, opts.bm25_doc_text == "fulltext")
    write_layout(out, corpus)
    n_docs = len(corpus.offsets) - 1
    shards = min(opts.shards, n_docs) if opts.shards_carried else opts.shards
    if shards != opts.shards:  # removals left fewer documents than the live build has shards
        log(f"{n_docs} documents left: {shards} shards instead of the live build's {opts.shards}")
    ranges = plan_ranges(corpus.offsets, max(shards, 1))
    log(f"layout: {len(corpus.doc_rows)} documents, {len(corpus.passage_rows)} passages, "
        f"{len(ranges)} shards ({time.perf_counter() - t0:.1f}s)")
    manifest = new_manifest(store, corpus, opts, previous, previous_dir)

    engine = make_engine(opts.engine, address=opts.ray_address, workers=opts.workers, batch_size=opts.batch_size,
                         cache_dir=opts.cache_dir, progress=opts.progress)
    try:
        entries = _build_shards(out, corpus, ranges, opts, engine, manifest, log)
    finally:
        engine.close()
    manifest.shards = entries
    if opts.names:  # global, at the top of the build (the shards hold passages and documents only)
        encoder = Encoder(opts.doc_encoder, batch_size=opts.batch_size, cache_dir=opts.cache_dir,
                          backend=opts.backend) if opts.dense else None
        manifest.names = write_name_index(out, store, [d.title for d in corpus.docs], opts, encoder, previous_dir,
                                          previous)
    manifest.write(out)
    log(f"{len(entries)} shards ({engine.name} engine) in {time.perf_counter() - t0:.1f}s")
    return manifest


def _build_shards(
    out: Path, corpus: Corpus, ranges: list[tuple[int, int]], opts: BuildOptions, engine: Any,
    manifest: Manifest, log: Callable[[str], None],
) -> list[dict[str, Any]]:
    offsets = corpus.offsets
    spans = [(a, b, int(offsets[a]), int(offsets[b])) for a, b in ranges]
    cfg = opts.bm25_config.to_dict()
    n = len(spans)
    tokens: list[Any] = [(None, None)] * n
    stats: tuple[CorpusStats | None, CorpusStats | None] = (None, None)
    if opts.bm25:
        t = time.perf_counter()
        handles = engine.run(
            analyze_shard,
            [(corpus.passage_texts[pa:pb], corpus.bm25_doc_texts[da:db], cfg) for da, db, pa, pb in spans],
            num_returns=4,
        )
        tokens = [(h[0], h[1]) for h in handles]
        p_stats = [engine.get(h[2]) for h in handles]
        d_stats = [engine.get(h[3]) for h in handles]
        stats = (sum(p_stats, CorpusStats()), sum(d_stats, CorpusStats()))
        manifest.bm25 = {**cfg, "doc_text": opts.bm25_doc_text,
                         "corpus_stats": {"passages": stats[0].to_dict(), "docs": stats[1].to_dict()}}
        log(f"bm25: corpus-wide statistics over {n} shards in {time.perf_counter() - t:.1f}s")
    pvecs = dvecs = None
    if opts.dense:
        summaries = corpus.summaries
        t = time.perf_counter()
        p_info = Encoder(opts.passage_encoder, use_cache=False, backend=opts.backend).info
        same = str(Path(opts.doc_encoder)) == str(Path(opts.passage_encoder))
        d_info = p_info if same else Encoder(opts.doc_encoder, use_cache=False, backend=opts.backend).info
        if same:  # one pass: one set of model loads (Ray actors) for passages and summaries
            both = engine.encode(opts.passage_encoder, corpus.passage_texts + summaries, "encode",
                                 opts.backend)
            pvecs, dvecs = both[: len(corpus.passage_texts)], both[len(corpus.passage_texts) :]
        else:
            pvecs = engine.encode(opts.passage_encoder, corpus.passage_texts, "encode passages", opts.backend)
            dvecs = engine.encode(opts.doc_encoder, summaries, "encode documents", opts.backend)
        manifest.models = {"passage": p_info.to_dict(), "doc": d_info.to_dict()}
        manifest.faiss = {"passage": opts.passage_factory, "doc": opts.doc_factory}
        log(f"dense: {len(pvecs)} passages, {len(dvecs)} documents encoded ({engine.name}) "
            f"in {time.perf_counter() - t:.1f}s")
    t = time.perf_counter()
    (out / SHARDS_DIR).mkdir()
    jobs = []
    for i, (da, db, pa, pb) in enumerate(spans):
        meta = {
            "name": shard_name(i), "index": i, "count": n, "docs": [da, db], "passages": [pa, pb],
            "corpus_version": manifest.corpus_version, "passage_rules": manifest.passage_rules,
            "bm25": manifest.bm25, "models": manifest.models, "faiss": manifest.faiss,
        }
        jobs.append((
            str(out / SHARDS_DIR / shard_name(i)), meta, offsets[da : db + 1] - offsets[da], tokens[i][0],
            tokens[i][1], stats[0], stats[1], None if pvecs is None else pvecs[pa:pb],
            None if dvecs is None else dvecs[da:db],
        ))
    entries = [engine.get(h) for h in engine.run(build_shard, jobs)]
    log(f"shards: {n} indexes written in {time.perf_counter() - t:.1f}s")
    for line in placement_lines(engine.placement()):
        log(line)
    return entries


def placement_lines(rows: list[dict[str, Any]]) -> list[str]:
    """``placement: …`` log lines, one per task kind: which node ran each shard's task, texts encoded per node."""
    def node(r: dict[str, Any]) -> str:
        return f"{r['node_name'] or '?'} ({r['node_id'][:12] or 'gone'})"

    lines = []
    for task in dict.fromkeys(r["task"] for r in rows if r["task"] != "encode"):
        runs = [f"shard {r['index']:03d} on {node(r)}" for r in rows if r["task"] == task]
        lines.append(f"placement: {task}: {', '.join(runs)}")
    enc = [f"{r['texts']} texts on {node(r)}" for r in rows if r["task"] == "encode"]
    if enc:
        lines.append(f"placement: encode: {', '.join(enc)}")
    return lines


def analyze_shard(
    passage_texts: list[str], doc_texts: list[str], config: dict[str, Any]
) -> tuple[list[list[str]], list[list[str]], CorpusStats, CorpusStats]:
    """One shard's BM25 tokens (passages, documents) and their statistics (summed over shards by the driver)."""
    cfg = Bm25Config.from_dict(config)
    p_tok, d_tok = analyze(passage_texts, cfg), analyze(doc_texts, cfg)
    return p_tok, d_tok, CorpusStats.of(p_tok), CorpusStats.of(d_tok)


def build_shard(
    shard_dir: str, meta: dict[str, Any], offsets: np.ndarray, p_tokens: list | None, d_tokens: list | None,
    p_stats: CorpusStats | None, d_stats: CorpusStats | None, pvecs: np.ndarray | None, dvecs: np.ndarray | None,
) -> dict[str, Any]:
    """Write one shard (its indexes, then its manifest, last); return its entry in the build's manifest."""
    out = Path(shard_dir)
    if out.exists():  # a first attempt that died with its node (Ray retried the task): incomplete, no manifest of ours
        shutil.rmtree(out)
    out.mkdir()  # not parents: a straggler of a failed build must not recreate its removed directory
    m = Manifest(corpus_version=meta["corpus_version"], documents=meta["docs"][1] - meta["docs"][0],
                 passages=meta["passages"][1] - meta["passages"][0], passage_rules=meta["passage_rules"],
                 shard={k: meta[k] for k in ("name", "index", "count", "docs", "passages")})
    if meta["bm25"] is not None and p_tokens is not None and d_tokens is not None:
        cfg = Bm25Config.from_dict(meta["bm25"])
        build_with_stats(p_tokens, p_stats, cfg).save(out / "bm25-passages")  # type: ignore[arg-type]
        build_with_stats(d_tokens, d_stats, cfg).save(out / "bm25-docs")  # type: ignore[arg-type]
        m.bm25 = meta["bm25"]
    if meta["models"] and pvecs is not None and dvecs is not None:
        (out / "dense").mkdir()
        save_matrix(out / "dense" / "passages.f16.npy", pvecs)
        save_faiss(build_faiss(pvecs, meta["faiss"]["passage"]), out / "dense" / "passages.faiss")
        save_matrix(out / "dense" / "docs.f16.npy", dvecs)
        save_faiss(build_faiss(dvecs, meta["faiss"]["doc"]), out / "dense" / "docs.faiss")
        mean = mean_vectors(pvecs, offsets).astype(np.float16)  # as stored; build_faiss adds it in float32 steps
        save_matrix(out / "dense" / "docs-mean.f16.npy", mean)
        save_faiss(build_faiss(mean, meta["faiss"]["doc"]), out / "dense" / "docs-mean.faiss")
        m.models, m.faiss = meta["models"], meta["faiss"]
    m.write(out)
    return {"name": meta["name"], "docs": meta["docs"], "passages": meta["passages"],
            "manifest_sha256": file_sha256(out / MANIFEST)}
