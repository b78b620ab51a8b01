"""Scale: DHR against flat and HNSW passage search on synthetic 384-d vectors.

Synthetic clustered vectors (seeded): ``n_docs / 50`` topic centres; each
document vector is ``normalize(centre + noise)``; each of its 3–7 passages
(mean 5) is ``normalize(document + smaller noise)``. Passages are stored as a
float16 ``.npy`` matrix (memory-mapped, as hiera stores them) with a document
offset table. Every FAISS index is built from the float32 upcast of those
float16 rows, so all methods score the same vectors. A query is
``normalize(passage + noise)``, so its source passage is known.

Methods (k = 20 results, inner product on normalized vectors = cosine):

* ``flat``: exact search, FAISS ``IndexFlatIP`` over all passages;
* ``hnsw-passages``: FAISS HNSW32 over all passages (efSearch swept);
* ``dhr-flat`` / ``dhr-hnsw``: DHR serial. Document stage: ``IndexFlatIP`` /
  HNSW32 over the normalized mean of each document's passage vectors (hiera's
  ``mean`` document stage), top_docs (the paper's k1) = 100; passage stage:
  gather the candidates' rows of the float16 memory map through the offset
  table (``concat_ranges``), one matrix product, final =
  ``hiera.fusion.dhr_score`` = passage + λ·document (``lam`` = 1),
  ``topk``.

Latency is per query: single queries one at a time, and batches of 32 (FAISS
batch search; for DHR the document stage is batched, the passage stage runs
per query) divided by the number of queries. Speedup = flat latency / method
latency in the same mode. "top-20 = exact fused" is the share of queries whose
DHR top-20 set equals the exact fused-score top-20 (all passages of the exact
top_docs documents, computed in numpy float64, independently of FAISS).

Also measured: encoding throughput of hiera's ``Encoder.encode_document``
(length-sorted, cache off) against plain ``SentenceTransformer.encode`` on the
same ~600 SQuAD passages, interleaved A, B, A, B, and the cached re-encode.

    python -m bench.scale --sizes 1000000,5000000 [--queries 200] [--skip-encode] [--hnsw-passages-5m]
    nice -n 19 python -m bench.scale --build-only --hnsw-passages-5m   # the HNSW builds alone, beside other work

HNSW rows come once per ``--ef-search`` value (a recall/latency curve; the
document index uses the values ≥ top_docs, since FAISS searches with max(efSearch,
k)), so DHR and HNSW over all passages can be compared at equal quality
(``src@10``: the query's source passage in the top 10, the one measure that
means the same for every method).

Generated data and HNSW indexes are cached under ``bench/work/scale/``
(``--rebuild`` discards them); a cached index reports the build time measured
when it was built.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil
from tqdm import tqdm

from bench.common import WORK, Report, data_dir, table
from hiera.fusion import dhr_score
from hiera.index.dense import faiss_module, faiss_search, save_faiss, set_search_params
from hiera.index.select import concat_ranges, topk

DIM = 384
K = 20
BATCH = 32
DOCS_PER_TOPIC = 50
GEN_VERSION = 1
SCALE = WORK / "scale"
PROC = psutil.Process()


# --------------------------------------------------------------------------- utils


def rss_mb() -> float:
    return PROC.memory_info().rss / 2**20


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def normalize(x: np.ndarray) -> np.ndarray:
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


def log(msg: str) -> None:
    tqdm.write(f"[{time.strftime('%H:%M:%S')}] {msg}")


class Memory:
    """RSS after each named stage."""

    def __init__(self) -> None:
        self.stages: list[dict[str, Any]] = []

    def mark(self, size: int, stage: str) -> float:
        mb = rss_mb()
        self.stages.append({"passages": size, "stage": stage, "rss_mb": round(mb, 1)})
        return mb


# --------------------------------------------------------------------------- data


def gen_params(n: int, args: argparse.Namespace) -> dict[str, Any]:
    return {
        "version": GEN_VERSION,
        "n_passages": n,
        "dim": DIM,
        "seed": args.seed,
        "docs_per_topic": DOCS_PER_TOPIC,
        "doc_noise": args.doc_noise,
        "passage_noise": args.passage_noise,
        "query_noise": args.query_noise,
        "queries": args.queries,
    }


def generate(n: int, args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """Write passages (float16), offsets, document mean vectors and queries under ``root``."""
    params = gen_params(n, args)
    meta_path = root / "data.json"
    if meta_path.exists() and not args.rebuild:
        meta = json.loads(meta_path.read_text())
        if meta.get("params") == params:
            log(f"n={n:,}: reusing generated data in {root}")
            return meta
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    t0 = time.perf_counter()
    rng = np.random.default_rng([args.seed, n])
    counts = rng.integers(3, 8, size=n // 5 + n // 10 + 16)  # 3..7 passages, mean 5
    ends = np.cumsum(counts)
    n_docs = int(np.searchsorted(ends, n)) + 1
    counts = counts[:n_docs].copy()
    counts[-1] -= int(ends[n_docs - 1] - n)
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    assert offsets[-1] == n and counts.min() >= 1
    n_topics = max(1, n_docs // DOCS_PER_TOPIC)
    centres = normalize(rng.standard_normal((n_topics, DIM), dtype=np.float32))
    topic = rng.integers(0, n_topics, size=n_docs)
    sd_doc, sd_pas = args.doc_noise / math.sqrt(DIM), args.passage_noise / math.sqrt(DIM)

    passages = np.lib.format.open_memmap(
        root / "passages.f16.npy", mode="w+", dtype=np.float16, shape=(n, DIM)
    )
    doc_mean = np.lib.format.open_memmap(
        root / "doc_mean.f32.npy", mode="w+", dtype=np.float32, shape=(n_docs, DIM)
    )
    chunk = 20_000  # documents (~100k passages, ~150 MB float32) per step
    for ci, a in enumerate(tqdm(range(0, n_docs, chunk), desc=f"generate {n:,}", unit="chunk", leave=False)):
        b = min(a + chunk, n_docs)
        crng = np.random.default_rng([args.seed, n, ci])
        docs = centres[topic[a:b]] + sd_doc * crng.standard_normal((b - a, DIM), dtype=np.float32)
        normalize(docs)
        cnt = counts[a:b]
        pas = np.repeat(docs, cnt, axis=0)
        pas += sd_pas * crng.standard_normal(pas.shape, dtype=np.float32)
        normalize(pas)
        p16 = pas.astype(np.float16)
        passages[offsets[a] : offsets[b]] = p16
        # hiera's ``mean`` document stage: normalized mean of the stored passage vectors
        local = (offsets[a:b] - offsets[a]).astype(np.int64)
        doc_mean[a:b] = normalize(np.add.reduceat(p16.astype(np.float32), local, axis=0))
    passages.flush()
    doc_mean.flush()
    qrng = np.random.default_rng([args.seed, n, 10**6])
    source = np.sort(qrng.choice(n, size=args.queries, replace=False))
    queries = np.asarray(passages[source], dtype=np.float32)
    queries += (args.query_noise / math.sqrt(DIM)) * qrng.standard_normal(queries.shape, dtype=np.float32)
    normalize(queries)
    perm = qrng.permutation(args.queries)
    np.save(root / "offsets.npy", offsets)
    np.save(root / "queries.npy", queries[perm])
    np.save(root / "source.npy", source[perm])
    del passages, doc_mean
    meta = {
        "params": params,
        "n_docs": n_docs,
        "n_topics": n_topics,
        "generate_s": round(time.perf_counter() - t0, 1),
    }
    meta_path.write_text(json.dumps(meta, indent=2))
    log(f"n={n:,}: generated {n_docs:,} documents, {n_topics:,} topics in {meta['generate_s']} s")
    return meta


# --------------------------------------------------------------------------- indexes


def add_chunked(index, matrix: np.ndarray, desc: str, chunk: int = 100_000) -> None:
    for s in tqdm(range(0, matrix.shape[0], chunk), desc=desc, unit="chunk", leave=False):
        index.add(np.ascontiguousarray(matrix[s : s + chunk], dtype=np.float32))


def flat_index(matrix: np.ndarray, desc: str):
    faiss = faiss_module()
    index = faiss.IndexFlatIP(DIM)
    add_chunked(index, matrix, desc)
    return index


def index_bytes(index) -> int:
    """Vectors + graph, as held in memory."""
    faiss = faiss_module()
    idx = faiss.downcast_index(index)
    n = idx.ntotal * DIM * 4
    if hasattr(idx, "hnsw"):
        h = idx.hnsw
        n += h.neighbors.size() * 4 + h.offsets.size() * 8 + h.levels.size() * 4
    return int(n)


def hnsw_index(
    matrix: np.ndarray, path: Path, desc: str, args: argparse.Namespace
) -> tuple[Any, float, bool]:
    """HNSW32 built with ``--ef-construction``; cached at ``path`` with its measured build time.

    Written to a temporary name and renamed, so an interrupted build never
    leaves a truncated index that a later run would take as cached.
    """
    faiss = faiss_module()
    meta = path.with_suffix(".json")
    if path.exists() and meta.exists() and not args.rebuild:
        info = json.loads(meta.read_text())
        if info.get("ef_construction", 40) == args.ef_construction and info.get("n") == matrix.shape[0]:
            index = faiss.read_index(str(path))
            set_search_params(index)
            return index, float(info["build_s"]), True
    faiss.omp_set_num_threads(args.build_threads)
    index = faiss.index_factory(DIM, "HNSW32", faiss.METRIC_INNER_PRODUCT)
    faiss.downcast_index(index).hnsw.efConstruction = args.ef_construction
    t = time.perf_counter()
    add_chunked(index, matrix, desc)
    build_s = time.perf_counter() - t
    faiss.omp_set_num_threads(args.search_threads)
    set_search_params(index)
    save_faiss(index, path)
    meta.write_text(
        json.dumps(
            {
                "build_s": build_s,
                "n": int(index.ntotal),
                "build_threads": args.build_threads,
                "ef_construction": args.ef_construction,
                "built": time.strftime("%Y-%m-%d %H:%M:%S"),
            }
        )
    )
    log(f"{desc}: built in {build_s / 60:.1f} min with {args.build_threads} thread(s)")
    return index, build_s, False


def set_ef(index, ef: int) -> None:
    faiss_module().downcast_index(index).hnsw.efSearch = ef


def estimate_hnsw_s(n: int, measured: tuple[int, float]) -> float:
    """Build time at ``n`` from one measured (n0, seconds): n·log n scaling."""
    n0, s0 = measured
    return s0 * (n / n0) * (math.log(n) / math.log(n0))


# --------------------------------------------------------------------------- search


class Dhr:
    """DHR serial: document index → offsets → float16 gather → one matmul → fused top-k."""

    def __init__(self, doc_index, passages: np.ndarray, offsets: np.ndarray, top_docs: int, lam: float) -> None:
        self.doc_index, self.passages, self.offsets = doc_index, passages, offsets
        self.top_docs, self.lam = top_docs, lam

    def passage_stage(self, dpos: np.ndarray, dsc: np.ndarray, q: np.ndarray, k: int) -> np.ndarray:
        keep = dpos >= 0
        dpos, dsc = dpos[keep], dsc[keep]
        starts, ends = self.offsets[dpos], self.offsets[dpos + 1]
        cand = concat_ranges(starts, ends)
        pscore = self.passages[cand].astype(np.float32) @ q
        per_doc = np.repeat(np.arange(len(dpos)), ends - starts)
        sel, _ = topk(dhr_score(pscore, dsc[per_doc], self.lam), k)
        return cand[sel]

    def search(self, queries: np.ndarray, k: int = K) -> np.ndarray:
        ids, sc = faiss_search(self.doc_index, queries, self.top_docs)
        return np.stack([self.passage_stage(ids[i], sc[i], queries[i], k) for i in range(len(queries))])


def time_single(search, queries: np.ndarray, desc: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-query latencies (ms) and results, one query at a time."""
    search(queries[:2])  # warm-up
    lat = np.empty(len(queries))
    out = []
    for i in tqdm(range(len(queries)), desc=desc, unit="q", leave=False):
        t = time.perf_counter()
        out.append(search(queries[i : i + 1])[0])
        lat[i] = (time.perf_counter() - t) * 1000
    return lat, np.stack(out)


def time_batched(search, queries: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean ms per query over batches of ``BATCH``."""
    search(queries[:BATCH])  # warm-up
    out = []
    t = time.perf_counter()
    for s in range(0, len(queries), BATCH):
        out.append(search(queries[s : s + BATCH]))
    return (time.perf_counter() - t) * 1000 / len(queries), np.concatenate(out)


def faiss_searcher(index, k: int):
    return lambda q: faiss_search(index, q, k)[0]


def exact_fused(
    doc_mean: np.ndarray, passages: np.ndarray, offsets: np.ndarray, queries: np.ndarray, top_docs: int, lam: float
) -> list[set[int]]:
    """Exact fused top-K per query: numpy float64 over all passages of the exact top ``top_docs`` documents."""
    q64 = queries.astype(np.float64)
    doc_scores = np.empty((doc_mean.shape[0], len(queries)), dtype=np.float32)
    for s in tqdm(range(0, doc_mean.shape[0], 200_000), desc="exact doc scores", unit="chunk", leave=False):
        doc_scores[s : s + 200_000] = doc_mean[s : s + 200_000] @ queries.T
    out = []
    for i in range(len(queries)):
        col = doc_scores[:, i]
        top = np.argpartition(-col, top_docs)[: top_docs + 8]  # a little slack, then exact float64 re-score
        d64 = doc_mean[top].astype(np.float64) @ q64[i]
        order = np.lexsort((top, -d64))[:top_docs]
        dpos, dsc = top[order], d64[order]
        starts, ends = offsets[dpos], offsets[dpos + 1]
        cand = concat_ranges(starts, ends)
        final = dhr_score(passages[cand].astype(np.float64) @ q64[i], np.repeat(dsc, ends - starts), lam)
        sel = np.lexsort((cand, -final))[:K]
        out.append({int(x) for x in cand[sel]})
    return out


def overlap(a: np.ndarray, b: np.ndarray, k: int) -> float:
    return float(
        np.mean([len(set(x[:k].tolist()) & set(y[:k].tolist())) / k for x, y in zip(a, b, strict=True)])
    )


def source_hits(res: np.ndarray, source: np.ndarray, k: int) -> float:
    return float(np.mean([s in r[:k] for r, s in zip(res, source, strict=True)]))


# --------------------------------------------------------------------------- one size


def run_size(
    n: int, args: argparse.Namespace, mem: Memory, state: dict[str, Any]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    faiss = faiss_module()
    faiss.omp_set_num_threads(args.search_threads)
    root = SCALE / f"n{n}"
    meta = generate(n, args, root)
    passages = np.load(root / "passages.f16.npy", mmap_mode="r")
    doc_mean = np.load(root / "doc_mean.f32.npy", mmap_mode="r")
    offsets = np.load(root / "offsets.npy")
    queries = np.load(root / "queries.npy")
    source = np.load(root / "source.npy")
    n_docs = int(meta["n_docs"])
    info: dict[str, Any] = {
        "n_passages": n,
        "n_docs": n_docs,
        "n_topics": meta["n_topics"],
        "generate_s": meta["generate_s"],
    }
    _ = np.asarray(passages[::4096]).sum()  # touch the map so the passage stage starts warm
    mem.mark(n, "data")
    rows: list[dict[str, Any]] = []

    def row(
        method: str,
        build_s: float | str,
        size: int,
        single: np.ndarray,
        res1: np.ndarray,
        b_ms: float,
        resb: np.ndarray,
        cached: bool = False,
    ) -> dict[str, Any]:
        r = {
            "passages": n,
            "method": method,
            "build s": (f"{build_s:.0f} (cached)" if cached else round(build_s, 1))
            if isinstance(build_s, float)
            else build_s,
            "index MB": round(size / 2**20),
            "1q ms": float(np.mean(single)),
            "1q p95": float(np.percentile(single, 95)),
            "b32 ms/q": b_ms,
            "src@1": source_hits(res1, source[: len(res1)], 1),
            "src@10": source_hits(res1, source[: len(res1)], 10),
            "batch=single": bool(np.array_equal(res1, resb)),
            "RSS MB": round(mem.mark(n, f"after {method}")),
        }
        log(f"n={n:,} {method}: 1q {r['1q ms']:.3g} ms, b32 {b_ms:.3g} ms/q, RSS {r['RSS MB']} MB")
        return r

    if args.build_only:
        # The heavy, timing-free part: HNSW graphs (cached with their build times).
        _, doc_s, _ = hnsw_index(doc_mean, root / "hnsw_docs.faiss", f"doc HNSW {n_docs:,}", args)
        _, pas_s, _ = hnsw_index(passages, root / "hnsw_passages.faiss", f"HNSW {n:,}", args)
        info.update(build_only=True, hnsw_docs_build_s=round(doc_s, 1), hnsw_passages_build_s=round(pas_s, 1))
        return [], info

    # (1) exact flat passage search
    t = time.perf_counter()
    flat = flat_index(passages, f"flat add {n:,}")
    flat_build = time.perf_counter() - t
    mem.mark(n, "flat built")
    if args.thread_check and not state.get("thread_check"):
        state["thread_check"] = check_threads(flat, queries, args)
    nq_flat = min(len(queries), args.flat_single) if args.flat_single else len(queries)
    flat_1, flat_res1 = time_single(faiss_searcher(flat, K), queries[:nq_flat], f"flat 1q {n:,}")
    flat_b, flat_resb = time_batched(faiss_searcher(flat, K), queries)
    exact = flat_resb  # exact passage top-K of every query
    r = row("flat", flat_build, index_bytes(flat), flat_1, flat_res1, flat_b, flat_resb[:nq_flat])
    r["src@1"], r["src@10"] = source_hits(exact, source, 1), source_hits(exact, source, 10)
    r["R@10 vs flat"] = 1.0
    rows.append(r)
    info["flat_single_queries"] = nq_flat
    del flat
    mem.mark(n, "flat freed")

    # (3), (4) DHR with a flat / HNSW document index (HNSW: one row per efSearch)
    lam, top_docs = args.lam, args.top_docs
    t = time.perf_counter()
    ref = exact_fused(doc_mean, passages, offsets, queries, top_docs, lam)
    info["exact_fused_s"] = round(time.perf_counter() - t, 1)
    dhr_extra = n * DIM * 2 + offsets.nbytes  # float16 passage matrix + offset table
    t = time.perf_counter()
    doc_flat = flat_index(doc_mean, f"doc flat {n_docs:,}")
    doc_flat_build = time.perf_counter() - t
    doc_hnsw, doc_hnsw_build, doc_cached = hnsw_index(
        doc_mean, root / "hnsw_docs.faiss", f"doc HNSW {n_docs:,}", args
    )
    faiss.omp_set_num_threads(args.search_threads)
    if not doc_cached:
        state.setdefault("hnsw_rates", []).append((n_docs, doc_hnsw_build))
    variants: list[tuple[str, Any, float, bool, np.ndarray, int | None]] = [
        ("dhr-flat", doc_flat, doc_flat_build, False, passages, None)
    ]
    for ef in args.ef_search:
        if ef >= top_docs:  # FAISS searches with max(efSearch, k): smaller values repeat the top_docs row
            variants.append((f"dhr-hnsw ef{ef}", doc_hnsw, doc_hnsw_build, doc_cached, passages, ef))
    p32 = None
    if args.f32_passages:
        # the same DHR with the passage matrix upcast once at load (2x memory, no per-query conversion)
        p32 = np.empty(passages.shape, dtype=np.float32)
        for s in range(0, n, 500_000):
            p32[s : s + 500_000] = passages[s : s + 500_000]
        for ef in args.ef_search:
            if ef >= top_docs:
                variants.append((f"dhr-hnsw ef{ef} f32", doc_hnsw, doc_hnsw_build, doc_cached, p32, ef))
    for name, index, build_s, cached, matrix, ef in variants:
        if ef is not None:
            set_ef(index, ef)
        dhr = Dhr(index, matrix, offsets, top_docs, lam)
        lat, res1 = time_single(dhr.search, queries, f"{name} 1q {n:,}")
        b_ms, resb = time_batched(dhr.search, queries)
        extra = dhr_extra + (n * DIM * 2 if matrix is p32 else 0)
        r = row(name, build_s, index_bytes(index) + extra, lat, res1, b_ms, resb, cached)
        same = [set(x.tolist()) == e for x, e in zip(res1, ref, strict=True)]
        r["top20 = exact fused"] = float(np.mean(same))
        r["overlap@20 exact fused"] = float(
            np.mean([len(set(x.tolist()) & e) / K for x, e in zip(res1, ref, strict=True)])
        )
        r["R@10 vs flat"] = overlap(res1, exact, 10)
        # time split of the single-query path: document stage vs passage stage
        d_ms, p_ms = [], []
        for i in range(len(queries)):
            t0 = time.perf_counter()
            ids, sc = faiss_search(index, queries[i : i + 1], top_docs)
            t1 = time.perf_counter()
            dhr.passage_stage(ids[0], sc[0], queries[i], K)
            t2 = time.perf_counter()
            d_ms.append((t1 - t0) * 1000)
            p_ms.append((t2 - t1) * 1000)
        r["doc-stage ms"], r["passage-stage ms"] = float(np.mean(d_ms)), float(np.mean(p_ms))
        rows.append(r)
    del doc_flat, doc_hnsw, p32
    mem.mark(n, "doc indexes freed")

    # (2) HNSW over all passages, last: the biggest build (one row per efSearch)
    path = root / "hnsw_passages.faiss"
    rates = state.get("hnsw_rates", [])
    measured = max(rates) if rates else None
    est = estimate_hnsw_s(n, measured) if measured else None
    info["hnsw_passages_estimate_s"] = round(est, 1) if est else None
    cached_ok = path.exists() and path.with_suffix(".json").exists() and not args.rebuild
    build_it = (
        cached_ok
        or n <= 1_000_000
        or args.hnsw_passages_5m
        or (est is not None and est < args.hnsw_budget_min * 60)
    )
    if build_it:
        hnsw, hnsw_build, cached = hnsw_index(passages, path, f"HNSW {n:,}", args)
        if not cached:
            state.setdefault("hnsw_rates", []).append((n, hnsw_build))
        faiss.omp_set_num_threads(args.search_threads)
        for i, ef in enumerate(args.ef_search):
            set_ef(hnsw, ef)
            lat, res1 = time_single(faiss_searcher(hnsw, K), queries, f"hnsw ef{ef} 1q {n:,}")
            b_ms, resb = time_batched(faiss_searcher(hnsw, K), queries)
            r = row(f"hnsw-passages ef{ef}", hnsw_build, index_bytes(hnsw), lat, res1, b_ms, resb, cached)
            r["R@10 vs flat"] = overlap(res1, exact, 10)
            rows.insert(1 + i, r)
        del hnsw
        mem.mark(n, "hnsw freed")
    else:
        why = (
            f"skipped: estimated {est / 60:.0f} min (n·log n from {measured[0]:,} vectors in {measured[1]:.0f} s)"
            if est
            else "skipped"
        )
        rows.insert(1, {"passages": n, "method": "hnsw-passages", "build s": why})
        info["hnsw_passages"] = why
        log(f"n={n:,} hnsw-passages {why}; --hnsw-passages-5m builds it anyway")

    for r in rows:
        if "1q ms" in r:
            r["1q ×flat"] = rows[0]["1q ms"] / r["1q ms"]
            r["b32 ×flat"] = rows[0]["b32 ms/q"] / r["b32 ms/q"]
    return rows, info


def check_threads(flat, queries: np.ndarray, args: argparse.Namespace) -> dict[str, Any]:
    """Flat single-query and batch-32 latency with 1 and 2 FAISS threads (this machine, now)."""
    faiss = faiss_module()
    out: dict[str, Any] = {}
    for th in (1, 2):
        faiss.omp_set_num_threads(th)
        q = queries[:8]
        flat.search(q[:1], K)
        t = time.perf_counter()
        for i in range(len(q)):
            flat.search(q[i : i + 1], K)
        out[f"flat_1q_ms_{th}t"] = round((time.perf_counter() - t) * 1000 / len(q), 1)
        t = time.perf_counter()
        flat.search(queries[:BATCH], K)
        out[f"flat_b32_ms_per_q_{th}t"] = round((time.perf_counter() - t) * 1000 / BATCH, 2)
    faiss.omp_set_num_threads(args.search_threads)
    log(f"thread check: {out}")
    return out


# --------------------------------------------------------------------------- encoding


def encode_bench(args: argparse.Namespace) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    import torch
    from sentence_transformers import SentenceTransformer

    from hiera.encode import Encoder, text_hash

    path = data_dir() / "squad" / "dev-v1.1.first24.json"
    data = json.loads(path.read_text())
    texts = [" ".join(p["context"].split()[:100]) for a in data["data"] for p in a["paragraphs"]][
        : args.encode_texts
    ]
    enc = Encoder(use_cache=False)
    plain = SentenceTransformer(str(enc.path), device="cpu")
    enc.encode_document(texts[:32])
    plain.encode(texts[:32], batch_size=32)
    times: dict[str, list[float]] = {"hiera": [], "plain": []}
    va = vb = None
    for r in range(args.encode_rounds):
        t = time.perf_counter()
        va = enc.encode_document(texts, progress=False)
        times["hiera"].append(time.perf_counter() - t)
        t = time.perf_counter()
        vb = plain.encode(texts, batch_size=32, show_progress_bar=False)
        times["plain"].append(time.perf_counter() - t)
        log(f"encode round {r + 1}: hiera {times['hiera'][-1]:.1f} s, plain {times['plain'][-1]:.1f} s")
    vb = vb / np.linalg.norm(vb, axis=1, keepdims=True)
    with tempfile.TemporaryDirectory() as tmp:
        cached = Encoder(cache_dir=Path(tmp))
        t = time.perf_counter()
        cached.encode_document(texts)
        first = time.perf_counter() - t
        entries_first = len(cached.cache)
        t = time.perf_counter()
        vc = cached.encode_document(texts)
        second = time.perf_counter() - t
        # the SQLite lookup alone (what the second call costs besides hashing)
        hashes = [text_hash(x) for x in texts]
        t = time.perf_counter()
        hit = cached.cache.get_many(hashes)
        lookup = time.perf_counter() - t
        cached.cache.close()
    n = len(texts)
    words = [len(t.split()) for t in texts]
    hs, ps = n / np.median(times["hiera"]), n / np.median(times["plain"])
    rows = [
        {
            "method": "hiera Encoder.encode_document (length-sorted, no cache)",
            "passages/s": hs,
            "runs s": ", ".join(f"{x:.1f}" for x in times["hiera"]),
            "× plain": hs / ps,
        },
        {
            "method": "SentenceTransformer.encode(batch_size=32), input order",
            "passages/s": ps,
            "runs s": ", ".join(f"{x:.1f}" for x in times["plain"]),
            "× plain": 1.0,
        },
        {
            "method": "hiera Encoder, cache filled (first call)",
            "passages/s": n / first,
            "runs s": f"{first:.1f}",
            "× plain": n / first / ps,
        },
        {
            "method": "hiera Encoder, cached re-encode (second call)",
            "passages/s": n / second,
            "runs s": f"{second:.4f}",
            "× plain": n / second / ps,
        },
        {
            "method": "EmbeddingCache.get_many lookup only",
            "passages/s": n / lookup,
            "runs s": f"{lookup:.4f}",
            "× plain": n / lookup / ps,
        },
    ]
    info = {
        "texts": n,
        "source": str(path),
        "words_mean": float(np.mean(words)),
        "words_min": int(min(words)),
        "torch_threads": torch.get_num_threads(),
        "max_abs_diff_hiera_vs_plain": float(np.abs(va - vb).max()),
        "max_abs_diff_cached_vs_fresh": float(np.abs(vc - va).max()),
        "rounds": args.encode_rounds,
        "cache_entries_after_first_call": entries_first,
        "cache_hits_lookup": len(hit),
    }
    return rows, info


# --------------------------------------------------------------------------- main

COLUMNS = [
    "passages", "method", "build s", "index MB", "1q ms", "1q p95", "1q ×flat", "b32 ms/q", "b32 ×flat",
    "R@10 vs flat", "top20 = exact fused", "overlap@20 exact fused", "src@1", "src@10", "RSS MB",
]  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000000,5000000", help="comma-separated passage counts")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument(
        "--flat-single",
        type=int,
        default=0,
        help="time flat single queries on only this many queries (0: all)",
    )
    ap.add_argument("--top-docs", "--k1", dest="top_docs", type=int, default=100,
                    help="documents DHR's document stage keeps (the paper's k1)")
    ap.add_argument("--lam", "--lambda", dest="lam", type=float, default=1.0,
                    help="DHR's λ: final = passage + λ·document")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--doc-noise", type=float, default=1.0, help="norm of the noise added to a topic centre")
    ap.add_argument("--passage-noise", type=float, default=0.6, help="norm of the noise added to a document")
    ap.add_argument("--query-noise", type=float, default=1.0, help="norm of the noise added to a passage")
    ap.add_argument("--search-threads", type=int, default=1)
    ap.add_argument("--build-threads", type=int, default=1)
    ap.add_argument("--no-thread-check", dest="thread_check", action="store_false")
    ap.add_argument(
        "--hnsw-passages-5m",
        action="store_true",
        help="build HNSW over all passages above 1M whatever the estimate",
    )
    ap.add_argument(
        "--hnsw-budget-min",
        type=float,
        default=20.0,
        help="above 1M, build HNSW over passages only if estimated below this",
    )
    ap.add_argument(
        "--ef-search",
        default="64,128,256,512",
        help="HNSW efSearch values: one row each (the document index uses those >= top_docs)",
    )
    ap.add_argument("--ef-construction", type=int, default=40, help="HNSW efConstruction (FAISS default 40)")
    ap.add_argument(
        "--no-f32-passages",
        dest="f32_passages",
        action="store_false",
        help="skip the DHR row with the passage matrix upcast to float32 at load",
    )
    ap.add_argument(
        "--build-only",
        action="store_true",
        help="generate data and build the HNSW indexes (cached), time nothing: run it niced beside other work",
    )
    ap.add_argument("--skip-encode", action="store_true")
    ap.add_argument("--encode-texts", type=int, default=600)
    ap.add_argument("--encode-rounds", type=int, default=2)
    ap.add_argument("--rebuild", action="store_true", help="ignore cached data and indexes")
    ap.add_argument("--out", default="scale", help="name of the JSON under bench/out/ (its search rows are under \"rows\")")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    args.ef_search = sorted({int(e) for e in args.ef_search.split(",") if e})

    t0 = time.perf_counter()
    SCALE.mkdir(parents=True, exist_ok=True)
    faiss = faiss_module()
    faiss.omp_set_num_threads(args.search_threads)
    mem = Memory()
    state: dict[str, Any] = {}
    report = Report(args.out, COLUMNS)  # the search rows, every size
    infos = []
    for n in sizes:
        r, info = run_size(n, args, mem, state)
        for row in r:
            report.add(row, echo=False)
        infos.append(info)
        if args.build_only:
            log(f"n={n:,}: indexes ready {json.dumps(info)}")
            continue
        print(f"\n## {n:,} passages ({info['n_docs']:,} documents)\n\n{table(r, COLUMNS)}\n", flush=True)
    if args.build_only:
        return
    enc_rows, enc_info = ([], {}) if args.skip_encode else encode_bench(args)
    wall = time.perf_counter() - t0

    settings = {
        "dim": DIM, "k": K, "batch": BATCH, "top_docs": args.top_docs, "lam": args.lam, "hnsw": f"HNSW32, efConstruction {args.ef_construction}, efSearch {args.ef_search}",
        "search_threads": args.search_threads, "build_threads": args.build_threads,
        "faiss_distance_compute_blas_threshold": int(faiss.cvar.distance_compute_blas_threshold),
        "doc_vectors": "normalized mean of each document's float16 passage vectors (hiera 'mean' stage)",
        "doc_noise": args.doc_noise, "passage_noise": args.passage_noise, "query_noise": args.query_noise,
        "queries": args.queries, "seed": args.seed,
    }  # fmt: skip
    report.print("## Search latency (ms per query; ×flat = flat latency / method latency)\n")
    print(f"\nsettings: {json.dumps(settings)}")
    if state.get("thread_check"):
        print(
            f"FAISS threads (flat, first size): {json.dumps(state['thread_check'])}; used {args.search_threads} search thread(s)"
        )
    for info in infos:
        print(f"size info: {json.dumps(info)}")
    stage_cols = ["passages", "stage", "rss_mb"]
    print("\n## RSS after each stage\n")
    print(table(mem.stages, stage_cols))
    dhr_cols = ["passages", "method", "doc-stage ms", "passage-stage ms", "1q ms"]
    print("\n## DHR single-query split\n")
    print(table([r for r in report.rows if str(r["method"]).startswith("dhr")], dhr_cols))
    if enc_rows:
        print(
            f"\n## Encoding throughput ({enc_info['texts']} SQuAD passages, first 100 words; median of {args.encode_rounds} interleaved runs)\n"
        )
        print(table(enc_rows))
        print(f"\nencode info: {json.dumps(enc_info)}")
    peak = peak_rss_mb()
    print(f"\nwall time {wall / 60:.1f} min; peak RSS {peak:.0f} MB")
    report.write(
        settings=settings,
        sizes=infos,
        thread_check=state.get("thread_check"),
        rss_stages=mem.stages,
        encode={"rows": enc_rows, **enc_info},
        wall_s=round(wall, 1),
        peak_rss_mb=round(peak),
    )


if __name__ == "__main__":
    main()
