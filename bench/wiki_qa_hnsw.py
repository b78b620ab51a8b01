"""Does an HNSW passage/document index cost the hybrid-max document stage quality? (issue 7)

Evaluates ``dhr`` with the hybrid-max stage on a copy of the pooled corpus
built with ``--passage-index HNSW32 --doc-index HNSW32`` (vectors from the
embedding cache), with the α, λ and k1 tuned on the flat build by
``bench/wiki_qa_trained.py``, so the two rows differ only in the index.

    hiera build bench/work/pooled-hnsw --passage-index HNSW32 --doc-index HNSW32   # after copying corpus.sqlite
    python bench/wiki_qa_hnsw.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import WORK, data_dir, write_json  # noqa: E402

from hiera.collection import Collection  # noqa: E402
from hiera.eval.questions import load_questions  # noqa: E402
from hiera.eval.run import evaluate_retriever  # noqa: E402
from hiera.retrieve import get_retriever  # noqa: E402

PARAMS = {"doc_stage": "hybrid-max", "doc_alpha": 0.4, "lam": 1.59, "k1": 20}  # zero-shot row of wiki_qa_trained


def main() -> None:
    col = Collection(WORK / "pooled-hnsw")
    col.warmup()
    dev = load_questions(data_dir() / "squad" / "dev-v1.1.first24.json", "squad")
    run = evaluate_retriever(col, "dhr", dev, (1, 5, 20, 100), retriever=get_retriever("dhr", col, **PARAMS),
                             latency_sample=0, progress=False)
    keys = ("top1", "top5", "top20", "top100", "doc_top1", "doc_top20", "doc_top100")
    print(json.dumps({k: round(100 * run.metrics[k], 1) for k in keys}), col.manifest.faiss)
    print(f"wrote {write_json('wiki_qa_hnsw', {'params': PARAMS, 'metrics': run.metrics, 'faiss': col.manifest.faiss})}")


if __name__ == "__main__":
    main()
