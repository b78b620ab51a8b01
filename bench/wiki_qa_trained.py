"""Trained encoders and a reranker on the pooled Wikipedia-QA corpus (issue 5).

Trains, on the SQuAD *train* articles' questions only (never on the dev
questions reported):

* ``passage``: the passage encoder, iterations 1 and 2 (BM25 + In-Doc + In-Sec
  negatives, then + negatives mined by iteration 1);
* ``doc``: the document encoder over summaries (abstract + all-text negatives);
* ``reranker``: a cross-encoder (BM25 + random negatives), threshold calibrated
  on held-out train questions;

then rebuilds the pooled collection with each encoder (a copy of the corpus
per model, vectors from the shared embedding cache) and reports top-k on
``dev-v1.1.first24.json`` for zero-shot, iteration 1 and iteration 2, flat
(``dense``) and hierarchical (``dhr``), with λ and top_docs tuned on train
questions, plus ``dhr`` + reranker.

    python -m bench.wiki_qa_trained --steps train-passage,train-doc,train-reranker,eval

Each step skips work already done (models with a ``hiera-train.json``,
collections already built), so an interrupted run resumes. The zero-shot
collection is ``bench/work/pooled`` (``python -m bench.pooled`` builds it).
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from bench.common import REFERENCE_BACKEND, TOPK, WORK, Report, data_dir, percent, table, tune, write_json
from bench.pooled import POOLED, ensure_pooled
from hiera.eval.questions import load_questions
from hiera.train.args import RerankerArgs, TrainArgs

MODELS = WORK / "models"
STEPS = ("train-passage", "train-doc", "train-reranker", "eval", "eval-doc", "train-passage-cont", "eval-cont")


def train_questions(data: Path):
    return load_questions(data / "squad" / "train-du2017-44articles.json", "squad")


def step_train_passage(args, data: Path) -> dict:
    from hiera.train.biencoder import train_biencoder

    out = MODELS / "passage"
    if (out / "hiera-train.json").exists():
        return json.loads((out / "hiera-train.json").read_text())
    targs = TrainArgs(
        level="passage",
        negatives=("in-batch", "bm25", "in-doc", "in-sec"),
        iterations=2,
        iter2_init=args.iter2_init,
        max_examples=args.examples,
        max_seq_length=args.max_seq_length,
        batch_size=32,
        hard_negatives=1,
        max_minutes=args.max_minutes,
    )
    return train_biencoder(args.root, train_questions(data), out, targs)


def step_train_doc(args, data: Path) -> dict:
    from hiera.train.biencoder import train_biencoder

    out = MODELS / "doc"
    if (out / "hiera-train.json").exists():
        return json.loads((out / "hiera-train.json").read_text())
    targs = TrainArgs(
        level="doc",
        negatives=("in-batch", "abstract", "all-text"),
        iterations=1,
        max_examples=args.doc_examples,
        max_seq_length=args.max_seq_length,
        batch_size=32,
        hard_negatives=1,
        max_minutes=args.max_minutes,
    )
    return train_biencoder(args.root, train_questions(data), out, targs)


def step_train_reranker(args, data: Path) -> dict:
    from hiera.train.reranker import train_reranker

    out = MODELS / "reranker"
    if (out / "hiera-reranker.json").exists():
        return json.loads((out / "hiera-reranker.json").read_text())
    rargs = RerankerArgs(
        max_examples=args.reranker_examples,
        max_minutes=args.max_minutes,
        max_length=args.max_seq_length,
        learning_rate=args.reranker_lr,
    )
    return train_reranker(args.root, train_questions(data), out, rargs)


def collection_for(src: Path, name: str, passage_encoder: str, doc_encoder: str) -> Path:
    """A copy of the pooled corpus built with the given encoders (vectors come from the cache)."""
    from hiera.encode import model_fingerprint, resolve_model_path
    from hiera.index.build import BuildOptions, build
    from hiera.index.manifest import Manifest

    root = WORK / f"pooled-{name}"
    if (root / "index" / "manifest.json").exists():
        models = Manifest.read(root / "index").models
        want = {lvl: model_fingerprint(resolve_model_path(m)) for lvl, m in (("passage", passage_encoder), ("doc", doc_encoder))}
        if all(models.get(lvl, {}).get("fingerprint") == fp for lvl, fp in want.items()):
            return root
        print(f"{root}: built with other encoders; rebuilding")
    else:
        root.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / "corpus.sqlite", root / "corpus.sqlite")
    build(root, BuildOptions(passage_encoder=passage_encoder, doc_encoder=doc_encoder, backend=REFERENCE_BACKEND))
    return root


COLUMNS = ["model", "retriever", "questions", *TOPK, "doc_top1", "doc_top20", "doc_top100", "lam / top_docs / doc_alpha",
           "p50 ms"]


def _params_cell(params: dict) -> str:
    return " / ".join(str(params[k]) for k in ("lam", "top_docs", "doc_alpha") if k in params) or "–"


def _eval_rows(col, name: str, dev, tune_qs, stages: list[str], rerank, rerank_limit: int) -> Report:
    from hiera.crossencoder import Reranker
    from hiera.eval.run import evaluate_retriever
    from hiera.eval.tune import tune_doc_alpha
    from hiera.retrieve import get_retriever
    from hiera.retrieve.rerank import RerankRetriever

    report = Report(name, COLUMNS)

    def record(label: str, retriever, questions, params: dict) -> None:
        t = time.perf_counter()
        run = evaluate_retriever(col, label, questions, (1, 5, 20, 100), retriever=retriever, latency_sample=100)
        row = {"model": name, "retriever": label, "questions": len(questions),
               **percent(run.metrics, (*TOPK, "doc_top1", "doc_top20", "doc_top100"))}
        row["p50 ms"] = round(run.metrics.get("latency_ms_p50", float("nan")), 1)
        row["lam / top_docs / doc_alpha"] = _params_cell(params)
        report.add(row, {"metrics": run.metrics, "params": params, "stage_ms": run.stage_ms}, key=f"{name} {label}",
                   echo=f"{name} {label}: top1 {row['top1']} top20 {row['top20']} doc_top1 {row['doc_top1']} "
                        f"({time.perf_counter() - t:.0f}s)")

    record("dense", get_retriever("dense", col), dev, {})
    for stage in stages:
        params: dict = {"doc_stage": stage}
        if stage == "hybrid-max":
            params["doc_alpha"], _ = tune_doc_alpha(col, tune_qs, progress=False)
        best, _ = tune(col, tune_qs, doc_stage=stage, doc_alpha=params.get("doc_alpha"))
        params.update(best)
        label = f"dhr[{stage}]"
        dhr = get_retriever("dhr", col, **params)
        record(label, dhr, dev, params)
        if stage == "hybrid-max":  # the same stage with lam, top_docs tuned for top-1 (what the targets compare)
            best1, _ = tune(col, tune_qs, doc_stage=stage, target_k=1, doc_alpha=params["doc_alpha"])
            p1 = {**params, **best1}
            record(f"{label} top1-tuned", get_retriever("dhr", col, **p1), dev, p1)
        if rerank is not None and stage == stages[-1]:
            sub = dev[:rerank_limit]
            record(f"{label} @{len(sub)}q", dhr, sub, params)  # the same questions, without the reranker
            rr = RerankRetriever(dhr, Reranker(rerank), depth=20, levels=("passage",))
            record(f"{label} + rerank@20 @{len(sub)}q", rr, sub, params)
    return report


def step_eval(args, data: Path) -> dict:
    from hiera.builds import open_collection

    dev = load_questions(data / "squad" / "dev-v1.1.first24.json", "squad", limit=args.limit)
    train = train_questions(data)
    step = max(1, len(train) // args.tune_limit)
    tune_qs = train[::step][: args.tune_limit]
    base = "all-MiniLM-L6-v2"
    doc_model = MODELS / "doc"
    d_enc = str(doc_model) if (doc_model / "hiera-train.json").exists() else base
    reranker = MODELS / "reranker"
    variants = {
        "zero-shot": (args.root, None),
        "iter1": (None, str(MODELS / "passage-iter1")),
        "iter2": (None, str(MODELS / "passage")),
    }
    report = Report("eval", COLUMNS)
    for name, (root, p_enc) in variants.items():
        if root is None:
            if not Path(p_enc).exists():
                print(f"skip {name}: {p_enc} missing")
                continue
            root = collection_for(args.root, name, p_enc, d_enc)
        col = open_collection(root)
        col.warmup()
        stages = ["hybrid-max"] if name != "iter2" or d_enc == base else ["summary", "hybrid-max"]
        use_rr = reranker if name == "iter2" and (reranker / "hiera-reranker.json").exists() else None
        report.extend(_eval_rows(col, name, dev, tune_qs, stages, use_rr, args.rerank_limit))
    return report.to_dict(doc_encoder=d_enc)


def step_eval_doc(args, data: Path) -> dict:
    """The paper's summary document stage with the trained document encoder (zero-shot: bench/wiki_qa.py)."""
    from hiera.builds import open_collection
    from hiera.eval.run import evaluate_retriever
    from hiera.retrieve import get_retriever

    if not (MODELS / "doc" / "hiera-train.json").exists():
        raise SystemExit("train the document encoder first (--steps train-doc)")
    dev = load_questions(data / "squad" / "dev-v1.1.first24.json", "squad", limit=args.limit)
    train = train_questions(data)
    tune_qs = train[:: max(1, len(train) // args.tune_limit)][: args.tune_limit]
    report = Report("eval-doc", COLUMNS)
    for name, p_enc in (("zero-shot passage", "all-MiniLM-L6-v2"),):  # the document encoder is what changes
        root = collection_for(args.root, "doc-" + name.split()[0], p_enc, str(MODELS / "doc"))
        col = open_collection(root)
        col.warmup()
        best, _ = tune(col, tune_qs, doc_stage="summary")
        params = {"doc_stage": "summary", **best}
        run = evaluate_retriever(col, "dhr[summary]", dev, (1, 5, 20, 100), retriever=get_retriever("dhr", col, **params),
                                 latency_sample=50)
        row = {"model": f"trained doc encoder + {name}", "retriever": "dhr[summary]", "questions": len(dev),
               **percent(run.metrics, (*TOPK, "doc_top1", "doc_top20", "doc_top100")),
               "lam / top_docs / doc_alpha": _params_cell(params)}
        report.add(row, {"metrics": run.metrics, "params": params}, key=row["model"])
    return report.to_dict()


def step_train_passage_cont(args, data: Path) -> dict:
    """Iteration 2 continued from iteration 1 (``--iter2-init iter1``) on the same examples and mined negatives.

    Reuses ``train-passage``'s examples and iteration-1 model instead of
    retraining them: the rows and arguments are the ones ``hiera train
    --iterations 2 --iter2-init iter1`` builds.
    """
    from hiera.builds import open_collection
    from hiera.index.manifest import write_json_atomic
    from hiera.train.biencoder import fit, training_rows
    from hiera.train.examples import load_examples
    from hiera.train.pool import PassagePool

    out = MODELS / "passage-cont"
    if (out / "hiera-train.json").exists():
        return json.loads((out / "hiera-train.json").read_text())
    path = MODELS / "passage.work" / "iter2-examples.jsonl"
    meta = json.loads(path.read_text(encoding="utf-8").split("\n", 1)[0])["meta"]
    examples = load_examples(path, meta)
    pool = PassagePool.from_collection(open_collection(args.root))
    targs = TrainArgs(level="passage", negatives=("in-batch", "bm25", "in-doc", "in-sec"), iterations=2,
                      iter2_init="iter1", base_model=str(MODELS / "passage-iter1"), max_examples=args.examples,
                      max_seq_length=args.max_seq_length, batch_size=32, hard_negatives=1, max_minutes=args.max_minutes)
    rows = training_rows(examples, pool, "passage", ["bm25", "in-doc", "in-sec", "mined"], 1, targs.seed + 1)
    stats = fit(rows, targs, MODELS / "passage-cont.work", out)
    report = {"args": targs.to_dict(), "iterations": [{"model": str(out), "init": targs.base_model, **stats}]}
    write_json_atomic(out / "hiera-train.json", report)
    return report


def step_eval_cont(args, data: Path) -> dict:
    from hiera.builds import open_collection

    dev = load_questions(data / "squad" / "dev-v1.1.first24.json", "squad", limit=args.limit)
    train = train_questions(data)
    tune_qs = train[:: max(1, len(train) // args.tune_limit)][: args.tune_limit]
    root = collection_for(args.root, "iter2-cont", str(MODELS / "passage-cont"), "all-MiniLM-L6-v2")
    col = open_collection(root)
    col.warmup()
    return _eval_rows(col, "iter2-cont", dev, tune_qs, ["hybrid-max"], None, args.rerank_limit).to_dict()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--root",
        type=Path,
        default=POOLED,
        help="the pooled collection (python -m bench.pooled builds it; so does this script)",
    )
    ap.add_argument("--steps", default=",".join(STEPS))
    ap.add_argument(
        "--examples", type=int, default=5000, help="training questions per passage-encoder iteration"
    )
    ap.add_argument("--iter2-init", choices=["base", "iter1"], default="iter1",
                    help="iteration 2 starts from the base model (the paper) or continues from iteration 1")
    ap.add_argument("--doc-examples", type=int, default=1500)
    ap.add_argument("--reranker-examples", type=int, default=4000)
    ap.add_argument("--reranker-lr", type=float, default=8e-5, help="a fresh classifier head needs a high rate in few steps")
    ap.add_argument("--max-seq-length", type=int, default=160)
    ap.add_argument("--max-minutes", type=float, default=30.0, help="hard cap per model (the issue's budget)")
    ap.add_argument("--limit", type=int, default=None, help="first N dev questions only")
    ap.add_argument("--tune-limit", type=int, default=1000)
    ap.add_argument("--rerank-limit", type=int, default=1000, help="dev questions for the reranker rows (CPU)")
    args = ap.parse_args()
    data = data_dir()
    steps = [s for s in args.steps.split(",") if s]
    unknown = set(steps) - set(STEPS)
    if unknown:
        ap.error(f"unknown steps {sorted(unknown)}; valid: {', '.join(STEPS)}")
    ensure_pooled(args.root)
    report: dict = {}
    for s in steps:
        t = time.perf_counter()
        report[s] = {
            "train-passage": step_train_passage,
            "train-doc": step_train_doc,
            "train-reranker": step_train_reranker,
            "eval": step_eval,
            "eval-doc": step_eval_doc,
            "train-passage-cont": step_train_passage_cont,
            "eval-cont": step_eval_cont,
        }[s](args, data)
        print(f"== {s} done in {time.perf_counter() - t:.0f}s", flush=True)
    for key in ("eval", "eval-doc", "eval-cont"):
        if key in report:
            print(table(report[key]["rows"], COLUMNS))
    path = write_json("wiki_qa_trained" if "eval" in report else "wiki_qa_trained_" + "_".join(steps), report)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
