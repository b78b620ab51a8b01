"""DHR's passage stage alone: rank the gold document's passages (an oracle document stage).

Once the document stage has found the right article, DHR's answer depends
only on how the passage encoder orders that article's passages, which is
exactly what In-Doc and In-Sec negatives train. This measures it directly,
for any number of passage encoders, on the pooled collection's SQuAD dev
articles: top-1 / top-5 = an answer-bearing passage first / in the first five
among the gold document's passages. A BM25 row (passage index scores
restricted to the same passages) is the lexical reference.

It encodes only the dev articles' passages (~2k texts, cached), so comparing
training recipes costs a minute per model instead of a full re-index.

    python -m bench.passage_stage --models all-MiniLM-L6-v2,bench/work/models/passage [--limit N]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from bench.common import Report, data_dir
from bench.pooled import POOLED
from hiera.builds import open_collection
from hiera.encode import Encoder
from hiera.eval.questions import load_questions
from hiera.train.pool import PassagePool


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=POOLED)
    ap.add_argument("--models", default="all-MiniLM-L6-v2", help="comma-separated model names or directories")
    ap.add_argument("--limit", type=int, default=None, help="first N dev questions only")
    ap.add_argument("--name", default="passage_stage")
    args = ap.parse_args()
    col = open_collection(args.root)
    pool = PassagePool.from_collection(col)
    dev = load_questions(data_dir() / "squad" / "dev-v1.1.first24.json", "squad", limit=args.limit)
    qs = [q for q in dev if len(q.gold_docs) == 1 and next(iter(q.gold_docs)) in pool.doc_position]
    docs = sorted({pool.doc_position[next(iter(q.gold_docs))] for q in qs})
    passages = np.concatenate([np.arange(pool.doc_offsets[d], pool.doc_offsets[d + 1]) for d in docs])
    local = {int(p): i for i, p in enumerate(passages)}
    print(f"{len(qs)} questions over {len(docs)} gold documents, {len(passages)} passages")
    # answer flags once: which candidate passages hold each question's answer
    flags = []
    for q in qs:
        d = pool.doc_position[next(iter(q.gold_docs))]
        rng = np.arange(pool.doc_offsets[d], pool.doc_offsets[d + 1])
        flags.append((rng, np.array([pool.passage_has(int(p), q.answers, q.answer_mode) for p in rng])))
    answerable = np.mean([f.any() for _, f in flags])

    def accuracy(score_of) -> dict[str, float]:
        top1 = top5 = 0
        for qi, (rng, f) in enumerate(flags):
            order = np.argsort(-score_of(qi, rng), kind="stable")
            top1 += bool(f[order[0]])
            top5 += bool(f[order[:5]].any())
        return {"top1": 100 * top1 / len(flags), "top5": 100 * top5 / len(flags)}

    report = Report(args.name)
    bm25 = col.bm25_passages
    t = time.perf_counter()
    bm = [bm25.scores(q.text) for q in qs]
    report.add({"model": "bm25 (reference)", **accuracy(lambda qi, rng: bm[qi][rng]),
                "seconds": round(time.perf_counter() - t, 1)})
    for name in [m for m in args.models.split(",") if m]:
        t = time.perf_counter()
        enc = Encoder(name)
        pv = enc.encode_document([pool.passage_input[int(p)] for p in passages], progress=True, desc=f"encode {name}")
        qv = enc.encode_query([q.text for q in qs])
        report.add({"model": name, **accuracy(lambda qi, rng, pv=pv, qv=qv: pv[[local[int(p)] for p in rng]] @ qv[qi]),
                    "seconds": round(time.perf_counter() - t, 1)})
    report.print(f"Oracle document stage: {len(qs)} SQuAD dev questions; ranking only the gold document's passages "
                 f"(answer in the document for {100 * answerable:.1f}%). Accuracy in %.")
    report.write(questions=len(qs), passages=len(passages))


if __name__ == "__main__":
    main()
