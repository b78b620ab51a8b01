"""Filtered graph search against exact search, on real vectors: recall@k by allowed share, and what each costs.

    python -m bench.filters_recall --root bench/work/pooled            # a collection's store, encoded here
    python -m bench.filters_recall --distractors 1000000 --device cuda  # bench.scale_real's 1M store (a GPU)

``bench.filters`` checks every method against a brute-force reference on a
built collection; at a million passages its vectors are stand-ins (encoding
a million passages takes hours on two CPU cores), and a graph's recall
depends on the vectors it is built on. This bench needs no build: it reads a
store's passages as a build encodes them (titled), encodes them with the
default model (the embedding cache serves what an earlier run encoded;
``--no-cache`` on a GPU, where encoding is faster than the cache), builds
the large profile's passage index (``HNSW32``, ``hiera.index.dense.build_faiss``:
the same factory, construction and ``efSearch``) and then, for random
document sets of about 0.1, 1, 10 and 50 % of the documents (seeded) and for
no filter, searches ``--queries`` SQuAD dev questions (after the first ``--skip``) with
:func:`hiera.index.masked.vector_search` — what ``dense`` and DHR's document
stage run for a filter — against the exact top ``k`` of the allowed rows
(every allowed row scored in float32). It reports recall@k (the share of the
exact top ``k`` that came back; mean and the worst query), the strategy the
filter took, and p50 ms per query (one FAISS thread).

``--root``: a collection directory with a store (``bench/work/pooled``);
default: ``bench.scale_real``'s store of the pooled corpus plus
``--distractors`` real-text passages (made when missing: the distractor
sources must be installed, see ``bench/gpu_run.sh``'s ``recall`` part).

Writes ``$OUT/filters_recall.json`` when ``OUT`` is set (a lent machine), else
``bench/out/filters_recall_<name>.json``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import Report, data_dir

SHARES = (0.001, 0.01, 0.1, 0.5)
SEED = 7


def passages(root: Path) -> tuple[list[str], np.ndarray]:
    """The store's passages as a build encodes them (titled, in index order) and the document offsets."""
    from hiera.corpus.store import CorpusStore
    from hiera.index.build import read_corpus

    store = CorpusStore(root)
    try:
        c = read_corpus(store, fulltext=False)
    finally:
        store.close()
    return c.passage_texts, c.offsets


def random_filters(offsets: np.ndarray, seed: int = SEED) -> list[tuple[str, Any]]:
    """(label, Allowed) for random document sets of each share in :data:`SHARES`, and for no filter."""
    from hiera.query import Allowed

    n_docs = len(offsets) - 1
    doc_of = np.repeat(np.arange(n_docs), np.diff(offsets))
    rng = np.random.default_rng(seed)
    out = [("no filter", Allowed("all", np.ones(n_docs, bool), np.ones(int(offsets[-1]), bool)))]
    for share in SHARES:
        docs = np.zeros(n_docs, bool)
        docs[rng.choice(n_docs, size=max(1, round(share * n_docs)), replace=False)] = True
        out.append((f"{share:.1%} of documents", Allowed(f"random {share}", docs, docs[doc_of])))
    return out


def exact_top(matrix: np.ndarray, q: np.ndarray, k: int, allowed: Any) -> list[np.ndarray]:
    """Each query's exact top ``k`` among the allowed rows, every one scored in float32 (positions)."""
    from hiera.index.select import topk

    rows = allowed.passage_positions
    sub = matrix if len(rows) == len(matrix) else matrix[rows]
    return [rows[topk(col, k)[0]] for start in range(0, len(q), 64) for col in (sub @ q[start : start + 64].T).T]


def main(argv: list[str] | None = None) -> Report:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=None, help="a collection with a store (default: the scale store)")
    ap.add_argument("--distractors", type=int, default=1_000_000, help="without --root: bench.scale_real's store")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--skip", type=int, default=0, help="start after this many questions")
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--factory", default=None, help="FAISS factory (default: the large profile's)")
    ap.add_argument("--device", default="auto", help="where the passages are encoded")
    ap.add_argument("--no-cache", action="store_true", help="encode without the embedding cache")
    args = ap.parse_args(argv)

    from hiera.encode import DEFAULT_MODEL, Encoder
    from hiera.eval.questions import load_questions
    from hiera.index.dense import build_faiss, set_threads
    from hiera.index.masked import vector_search, vector_strategy
    from hiera.index.profile import LARGE_FACTORY

    factory = args.factory or LARGE_FACTORY
    if args.root is None:
        from bench.scale_real import ingest_store

        t = time.perf_counter()
        root = ingest_store(args.distractors, 13)
        store_s = time.perf_counter() - t
    else:
        root, store_s = args.root, 0.0
    texts, offsets = passages(root)
    print(f"{root}: {len(texts):,} passages, {len(offsets) - 1:,} documents", flush=True)
    enc = Encoder(DEFAULT_MODEL, device=args.device, use_cache=not args.no_cache)
    t = time.perf_counter()
    matrix = enc.encode_document(texts, progress=True, desc="encode passages")
    encode_s = time.perf_counter() - t
    print(f"encoded in {encode_s:.0f}s on {enc.device}", flush=True)
    t = time.perf_counter()
    index = build_faiss(matrix, factory)
    index_s = time.perf_counter() - t
    print(f"{factory} built in {index_s:.0f}s", flush=True)
    qs = load_questions(data_dir() / "squad" / "dev-v1.1.first24.json", "squad")[args.skip : args.skip + args.queries]
    q = enc.encode_query([x.text for x in qs]).astype(np.float32)
    set_threads(1)
    k = args.k
    name = f"filters_recall_{root.name}"
    rep = Report(name, columns=["filter", "documents", "passages", "strategy", f"recall@{k}", "worst query",
                                "p50 ms", "k back"])
    for label, allowed in random_filters(offsets):
        ref = exact_top(matrix, q, k, allowed)
        unfiltered = allowed.n_passages == len(matrix)
        strategy = "graph search" if unfiltered else vector_strategy(index, allowed, "passage")
        recalls, ms, full = [], [], True
        for i in range(len(q)):
            t0 = time.perf_counter()
            if unfiltered:
                ids = index.search(q[i : i + 1], k)[1][0]
            else:
                ids = vector_search(index, lambda: matrix, q[i : i + 1], k, allowed, "passage")[0][0]
            ms.append((time.perf_counter() - t0) * 1000)
            got = ids[ids >= 0]
            assert allowed.passages[got].all(), f"{label}: a disallowed passage came back"
            full &= len(got) == min(k, allowed.n_passages)
            recalls.append(len(set(got.tolist()) & set(ref[i].tolist())) / max(1, len(ref[i])))
        rep.add({"filter": label, "documents": allowed.n_docs, "passages": allowed.n_passages, "strategy": strategy,
                 f"recall@{k}": round(float(np.mean(recalls)), 4), "worst query": round(float(np.min(recalls)), 3),
                 "p50 ms": round(float(np.median(ms)), 3), "k back": full},
                {"recall": float(np.mean(recalls)), "min_recall": float(np.min(recalls)), "p50_ms": float(np.median(ms)),
                 "documents": allowed.n_docs, "passages": allowed.n_passages, "strategy": strategy, "k_back": full})
    rep.print(f"Filtered {factory} search against exact, {len(texts):,} passages of real text, "
              f"{len(q)} SQuAD dev questions, k = {k}")
    extra = {"root": str(root), "passages": len(texts), "documents": len(offsets) - 1, "factory": factory,
             "queries": len(q), "skip": args.skip, "k": k, "encode_device": str(enc.device), "seconds": {
                 "store": round(store_s, 1), "encode": round(encode_s, 1), "index": round(index_s, 1)}}
    rep.write(Path(os.environ["OUT"]) / "filters_recall.json" if os.environ.get("OUT") else None, **extra)
    return rep


if __name__ == "__main__":
    main()
