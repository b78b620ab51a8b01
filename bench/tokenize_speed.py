"""Tokenization throughput: one worker against several, on real passages, as the streaming encoder tokenizes.

    python -m bench.tokenize_speed [--workers 2] [--batch 1024] [--rounds 3]

Passages: every passage of the SQuAD files (train 44 articles, both dev
halves) and the HotpotQA paragraph pool of ``../shared/data``, split as a
build splits them and titled as the passage encoder reads them (about 14,000
texts). Each row tokenizes all of them in batches of ``--batch`` through
:class:`hiera.backends.TokenizerPool` into the packed form the encoder's workers hand back
(:meth:`hiera.backends.FastTokenizer.packed`; the tokenizer's own batch
parallelism off, ``TOKENIZERS_PARALLELISM=false``: one worker is one core),
batches handed back in order; the best of ``--rounds`` rounds, pool start-up
excluded. Beside them, the two ways a batch was tokenized before the pool:
sentence-transformers' ``preprocess`` (transformers' tokenizer, one call a
batch) and the model's ``tokenizers`` batch call with its own parallelism on.

The figure kept in bench/expected.yaml is the ratio of the workers' row to
the one-worker row, measured in the same run (target ≥ 1.8 with 2 workers on
a 2-core machine). Writes ``bench/out/tokenize_speed.json`` (``$OUT/tokenize_speed.json`` where ``OUT`` is set).
"""

from __future__ import annotations

import argparse
import os
import time
from collections import deque
from pathlib import Path
from typing import Any

from bench.common import Report, data_dir

# The real-text sources every measurement of encoding speed reads (bench.gpu_encode too): (path under
# ../shared/data, hiera format).
SOURCES = (
    ("squad/train-du2017-44articles.json", "squad"),
    ("squad/dev-v1.1.first24.json", "squad"),
    ("squad/dev-v1.1.last24.corpus-only.json", "squad"),
    ("hotpotqa/paragraph_pool.500q.jsonl", "hotpotqa-pool"),
)


def real_passages(data: Path, sources: tuple[tuple[str, str], ...] = SOURCES) -> list[str]:
    """Every passage of ``sources``, split and titled as a build's passage encoder reads them."""
    from hiera.corpus.readers import get_reader
    from hiera.corpus.split import split_document
    from hiera.corpus.tree import Document, PassageRules

    rules = PassageRules()
    out: list[str] = []
    for rel, fmt in sources:
        for rec in get_reader(fmt)(data / rel):
            if isinstance(rec, Document):
                out += [p.titled_text(rules.title_sep) for p in split_document(rec, rules)]
    return out


def _through(pool: Any, batches: list[list[str]], prefetch: int) -> None:
    """Every batch through ``pool``, ``prefetch`` in flight, results taken in order (as the encoder takes them)."""
    ahead: deque = deque()
    for b in batches:
        ahead.append(pool.submit(b))
        if len(ahead) >= prefetch:
            ahead.popleft().result()
    while ahead:
        ahead.popleft().result()


def _best(fn: Any, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def measure(texts: list[str], workers: int, batch: int, rounds: int) -> dict[str, Any]:
    from hiera.backends import FastTokenizer, TokenizerPool
    from hiera.encode import resolve_model_path

    path = resolve_model_path("all-MiniLM-L6-v2")
    fast = FastTokenizer.load(path)
    assert fast is not None, "all-MiniLM-L6-v2 is a plain pipeline"
    batches = [texts[s : s + batch] for s in range(0, len(texts), batch)]
    rows: dict[str, Any] = {}

    setups = (("1 worker (thread)", 1, "thread"), (f"{workers} workers (threads)", workers, "thread"),
              (f"{workers} workers (processes)", workers, "process"))
    # as the streaming encoder's workers tokenize: packed int32 ids and lengths
    pools = {label: TokenizerPool(fast.packing(), n, kind) for label, n, kind in setups}
    try:
        for (_, n, _), pool in zip(setups, pools.values(), strict=True):
            _through(pool, batches[:n], n)  # start-up and a first batch per worker, not timed
        best = dict.fromkeys(pools, float("inf"))
        for _ in range(rounds):  # the setups take turns, so a machine whose load drifts moves them alike
            for (label, n, _), pool in zip(setups, pools.values(), strict=True):
                best[label] = min(best[label], _best(lambda p=pool, n=n: _through(p, batches, 2 * n), 1))
    finally:
        for pool in pools.values():
            pool.close()
    for label, n, kind in setups:
        rows[label] = {"workers": n, "kind": kind, "seconds": round(best[label], 3),
                       "passages_per_s": len(texts) / best[label]}
    # the ways a batch was tokenized before: the tokenizer's own parallelism, and transformers as ST calls it
    os.environ["TOKENIZERS_PARALLELISM"] = "true"
    own = fast.copy()
    seconds = _best(lambda: [own.tokenizer.encode_batch(b) for b in batches], rounds)
    rows["tokenizers batch call, its own parallelism (ids only)"] = {
        "workers": 1, "kind": "rayon", "seconds": round(seconds, 3), "passages_per_s": len(texts) / seconds}
    from sentence_transformers import SentenceTransformer

    from hiera.models import quiet_transformers

    with quiet_transformers():
        st = SentenceTransformer(str(path), device="cpu")
    seconds = _best(lambda: [st.preprocess(b) for b in batches], rounds)
    rows["sentence-transformers preprocess (transformers tokenizer)"] = {
        "workers": 1, "kind": "transformers", "seconds": round(seconds, 3), "passages_per_s": len(texts) / seconds}
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one worker is one core
    texts = real_passages(data_dir())
    print(f"{len(texts):,} real passages; {os.cpu_count()} CPUs", flush=True)
    rows = measure(texts, args.workers, args.batch, args.rounds)
    one = rows["1 worker (thread)"]["passages_per_s"]
    rep = Report("tokenize_speed", columns=["tokenizing", "passages/s", "× one worker"])
    for label, r in rows.items():
        r["over_one_worker"] = r["passages_per_s"] / one
        rep.add({"tokenizing": label, "passages/s": f"{r['passages_per_s']:,.0f}",
                 "× one worker": f"{r['over_one_worker']:.2f}"}, r, key=label)
    best = max(rows[f"{args.workers} workers (threads)"]["over_one_worker"],
               rows[f"{args.workers} workers (processes)"]["over_one_worker"])
    rep.print(f"Tokenization, {len(texts):,} real passages, batches of {args.batch} ({os.cpu_count()} CPUs)")
    dest = Path(os.environ["OUT"]) / "tokenize_speed.json" if os.environ.get("OUT") else None  # a lent machine's
    rep.write(dest, passages=len(texts), args=vars(args), workers_over_one=best,
              threads_over_one=rows[f"{args.workers} workers (threads)"]["over_one_worker"],
              processes_over_one=rows[f"{args.workers} workers (processes)"]["over_one_worker"])


if __name__ == "__main__":
    main()
