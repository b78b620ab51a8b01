"""Synthetic collections at millions of passages: random-word texts, vectors written straight into the cache.

``bench.ray_scale`` and ``bench.scale_real`` measure search *speed* at 1M–5M
passages, where encoding real text would take days on 2 cores. The texts
are Zipf-distributed pseudo-words (realistic BM25 posting lists) and the
vectors follow bench/scale.py's topic model; they are filed in a private
embedding cache under the keys a build looks up, so ``hiera build`` runs
unchanged and encodes nothing. Queries are real MiniLM encodings of random
words: meaningful for latency only.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

SYNTHETIC_BACKEND = "torch"  # the cache key the vectors are filed under: build with this backend

SYN_WORDS = 20  # words per passage: short texts keep the BM25 build of 1M passages within minutes
SYN_PASSAGES_PER_DOC = 5
SYN_VOCAB = 30_000


def _syn_vocab(rng: np.random.Generator) -> list[str]:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = {"".join(rng.choice(letters, size=int(rng.integers(4, 10)))) for _ in range(SYN_VOCAB * 2)}
    return sorted(words)[:SYN_VOCAB]


def synthetic_collection(base: Path, n_passages: int, seed: int = 0,
                         backend: str = SYNTHETIC_BACKEND) -> tuple[Path, Path, list[str]]:
    """A collection of ``n_passages`` passages of random words, its embedding cache pre-filled with synthetic vectors.

    Texts are Zipf-distributed pseudo-words (so BM25 has realistic posting
    lists), 5 passages per document (a lead and two sections of two
    paragraphs). Vectors follow bench/scale.py's model: topic centres, each
    document a noisy centre, each passage a noisier document. They are written
    into a private embedding cache under the exact keys the build looks up, so
    ``hiera build`` runs unchanged and encodes nothing; queries are MiniLM
    encodings of random words, meaningful for latency only (the quality of
    search at this scale is bench/scale.py's subject). The vectors are filed
    under ``backend``'s cache key (passages, summaries and the titles the
    name table encodes): build with that backend (``BuildOptions(backend=...)``)
    or the build encodes everything. Returns the corpus root, the cache
    directory and query texts; reused when present.
    """
    from hiera.corpus.store import CorpusStore
    from hiera.corpus.tree import Document, Section
    from hiera.encode import DEFAULT_MODEL, EmbeddingCache, Encoder, text_hash
    from hiera.index.build import read_corpus

    corpus, cache_dir, done = base / "corpus", base / "cache", base / "ready.json"
    rng = np.random.default_rng(seed)
    vocab = _syn_vocab(rng)
    qrng = np.random.default_rng(seed + 1)
    qs = [" ".join(vocab[int(i)] for i in qrng.integers(50, 3000, size=5)) for _ in range(400)]
    if done.exists():
        return corpus, cache_dir, qs
    shutil.rmtree(base, ignore_errors=True)
    corpus.mkdir(parents=True)
    n_docs = n_passages // SYN_PASSAGES_PER_DOC
    t = time.perf_counter()
    ranks = np.minimum(rng.zipf(1.2, size=(n_passages, SYN_WORDS)) - 1, SYN_VOCAB - 1)

    def para(i: int) -> str:
        return " ".join(vocab[int(w)] for w in ranks[i])

    def docs() -> Any:
        for d in range(n_docs):
            p = d * SYN_PASSAGES_PER_DOC
            yield Document(id=f"syn{d}", title=f"Synthetic {d} {vocab[d % SYN_VOCAB]}", lead=[para(p)],
                           sections=[Section("Part one", paragraphs=[para(p + 1), para(p + 2)]),
                                     Section("Part two", paragraphs=[para(p + 3), para(p + 4)])],
                           keep_paragraphs=True)

    store = CorpusStore(corpus, create=True)
    store.ingest(docs())
    c = read_corpus(store, fulltext=True)
    store.close()
    print(f"synthetic: {len(c.passage_texts):,} passages, {n_docs:,} documents ingested in "
          f"{time.perf_counter() - t:.0f}s", flush=True)
    enc = Encoder(DEFAULT_MODEL, use_cache=False, backend=backend)
    cache = EmbeddingCache(cache_dir, enc.cache_key, enc.dim)
    offsets, dim = c.offsets, enc.dim
    summaries = c.summaries
    counts = np.diff(offsets)
    n_topics = max(1, n_docs // 50)
    centres = rng.standard_normal((n_topics, dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    step = 20_000
    for a in range(0, n_docs, step):
        b = min(a + step, n_docs)
        dv = centres[rng.integers(0, n_topics, size=b - a)] + 0.8 / np.sqrt(dim) * rng.standard_normal((b - a, dim))
        dv /= np.linalg.norm(dv, axis=1, keepdims=True)
        pv = np.repeat(dv, counts[a:b], axis=0) + 0.5 / np.sqrt(dim) * rng.standard_normal((int(counts[a:b].sum()), dim))
        pv /= np.linalg.norm(pv, axis=1, keepdims=True)
        ptexts = c.passage_texts[offsets[a] : offsets[b]]
        items = [(text_hash(enc.document_prompt + s), v) for s, v in zip(ptexts, pv, strict=True)]
        items += [(text_hash(enc.document_prompt + s), v) for s, v in zip(summaries[a:b], dv, strict=True)]
        # the name table's vectors (hiera.index.names): a synthetic title's is its document's
        items += [(text_hash(enc.document_prompt + d.title), v) for d, v in zip(c.docs[a:b], dv, strict=True)]
        cache.put_many(items)
    cache.close()
    done.write_text(json.dumps({"passages": len(c.passage_texts), "documents": n_docs, "backend": backend,
                                "seconds": round(time.perf_counter() - t, 1)}))
    print(f"synthetic: vectors cached in {time.perf_counter() - t:.0f}s", flush=True)
    return corpus, cache_dir, qs
