"""Hierarchical at millions of passages (issue 33): the pooled corpus plus ≥ 1M real-text distractor passages.

Parts (``--parts``, comma-separated, in this order):

``prepare``
    writes ``bench/work/scale_real/distractors-<N>.jsonl`` (:mod:`bench.distractors`:
    sentences of documents no evaluation question is about, recombined, their
    titles kept) and ingests the pooled corpus (``bench.pooled``) and the
    distractors into ``bench/work/scale_real/real-<N>``; then builds it with
    the default options, which fills the embedding cache once (≈ 3.5 h for
    1M passages on 2 quiet cores with onnx-int8; interrupt and rerun to
    resume: every encoded batch is cached). Later builds of any profile
    reuse the cached vectors.

Run from the repository root: ``nice python -m bench.scale_real --parts prepare``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from bench.common import WORK, data_dir

HERE = WORK / "scale_real"
DEFAULT_PASSAGES = 1_000_000


def collection_dir(passages: int) -> Path:
    return HERE / f"real-{passages // 1000}k"


def prepare(passages: int, seed: int) -> Path:
    """The store of pooled + distractors, built with the default options (the encode happens here)."""
    from bench.distractors import VERSION, write_jsonl
    from bench.pooled import pooled_sources
    from hiera.builds import build_collection
    from hiera.corpus.ingest import ingest
    from hiera.corpus.store import STORE_FILE
    from hiera.index.build import BuildOptions
    from hiera.index.publish import live_build_dir

    HERE.mkdir(parents=True, exist_ok=True)
    jsonl = HERE / f"distractors-v{VERSION}-{passages // 1000}k-s{seed}.jsonl"
    if not jsonl.exists():
        t = time.perf_counter()
        n = write_jsonl(jsonl, data_dir(), passages, seed)
        print(f"wrote {n} distractor documents to {jsonl} ({time.perf_counter() - t:.0f}s)", flush=True)
    root = collection_dir(passages)
    if not (root / STORE_FILE).exists():
        for paths, fmt in [*pooled_sources(data_dir()), ([jsonl], "hiera-jsonl")]:
            t = time.perf_counter()
            rep = ingest(paths, fmt, root)
            print(f"ingested {fmt}: {rep.documents} documents, {rep.passages} passages "
                  f"({time.perf_counter() - t:.0f}s)", flush=True)
    if live_build_dir(root) is None:
        t = time.perf_counter()
        build_collection(root, BuildOptions(progress=True))
        print(f"built {root} in {time.perf_counter() - t:.0f}s", flush=True)
    return root


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="prepare")
    ap.add_argument("--passages", type=int, default=DEFAULT_PASSAGES, help="distractor passages (at least 1M for the issue)")
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    if "prepare" in parts:
        prepare(args.passages, args.seed)


if __name__ == "__main__":
    main()
