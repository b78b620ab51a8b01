"""Does an HNSW passage/document index cost the hybrid-max document stage quality? (issue 7)

Evaluates ``dhr`` with the hybrid-max stage on ``bench/work/pooled-hnsw``:
the pooled corpus (the sources of ``bench/pooled.py``) built with HNSW32
passage and document indexes (vectors from the embedding cache), with the
``doc_alpha``, ``lam`` and ``top_docs`` tuned on the flat build by
``bench/wiki_qa_trained.py`` (its zero-shot row), so the two rows differ only
in the index. The collection is ingested and built on the first run.

    python -m bench.wiki_qa_hnsw [--build-only]

The same figure from the CLI (what ``bench/expected.yaml`` runs):

    hiera eval bench/work/pooled-hnsw --questions ../shared/data/squad/dev-v1.1.first24.json --format squad \\
        --retrievers dhr --ks 1,5,20,100 --set doc_stage=hybrid-max --set doc_alpha=0.4 --set lam=1.59 --set top_docs=20
"""

from __future__ import annotations

import argparse
import json

from bench.common import DOC_TOPK, REFERENCE_BACKEND, TOPK, WORK, Report, data_dir, percent
from bench.pooled import ensure_pooled

ROOT = WORK / "pooled-hnsw"
FACTORY = "HNSW32"
PARAMS = {"doc_stage": "hybrid-max", "doc_alpha": 0.4, "lam": 1.59, "top_docs": 20}  # zero-shot row of wiki_qa_trained


def ensure_pooled_hnsw() -> None:
    """Ingest the pooled sources into ``ROOT`` and build them with HNSW32 passage and document indexes."""
    from hiera.index.build import BuildOptions
    from hiera.index.manifest import Manifest

    ensure_pooled(ROOT, BuildOptions(passage_factory=FACTORY, doc_factory=FACTORY, backend=REFERENCE_BACKEND))
    faiss = Manifest.read(ROOT / "index").faiss
    if faiss.get("passage") != FACTORY or faiss.get("doc") != FACTORY:
        raise SystemExit(f"{ROOT} is built with {faiss}, not {FACTORY}: remove it and rerun")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-only", action="store_true", help="build the collection, evaluate nothing")
    args = ap.parse_args()
    ensure_pooled_hnsw()
    if args.build_only:
        return

    from hiera.builds import open_collection
    from hiera.eval.questions import load_questions
    from hiera.eval.run import evaluate_retriever
    from hiera.retrieve import get_retriever

    col = open_collection(ROOT)
    col.warmup()
    dev = load_questions(data_dir() / "squad" / "dev-v1.1.first24.json", "squad", rules=col.store.rules)
    run = evaluate_retriever(col, "dhr", dev, (1, 5, 20, 100), retriever=get_retriever("dhr", col, **PARAMS),
                             latency_sample=0, progress=False)
    report = Report("wiki_qa_hnsw")
    report.add({"retriever": "dhr[hybrid-max]", **percent(run.metrics, TOPK + DOC_TOPK)},
               {"metrics": run.metrics, "params": PARAMS}, echo=False)
    report.print(f"{len(dev)} SQuAD dev questions; indexes {json.dumps(col.manifest.faiss)}. Accuracy in %.")
    report.write(faiss=col.manifest.faiss)


if __name__ == "__main__":
    main()
