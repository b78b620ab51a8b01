"""``hiera eval`` and ``hiera tune``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from hiera.errors import BadInputError


def _ks(text: str) -> list[int]:
    try:
        ks = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise BadInputError(f"--k must be a comma-separated list of integers, got {text!r}") from None
    if not ks or ks[0] <= 0:
        raise BadInputError("--k values must be positive")
    return ks


def _log(msg: str) -> None:
    print(msg, file=sys.stderr)


def cmd_eval(args: argparse.Namespace) -> int:
    from hiera.collection import Collection
    from hiera.eval.questions import load_questions
    from hiera.eval.run import evaluate, markdown_table, plot_topk, write_trec
    from hiera.retrieve import RETRIEVERS

    names = [n.strip() for n in args.retrievers.split(",") if n.strip()]
    unknown = [n for n in names if n not in RETRIEVERS]
    if unknown or not names:
        raise BadInputError(f"unknown retriever(s) {', '.join(unknown) or '(none given)'}; valid: {', '.join(RETRIEVERS)}")
    ks = _ks(args.k)
    questions = load_questions(args.questions, args.format, limit=args.limit)
    col = Collection(args.index, vectors=args.vectors)
    log = _log if not args.quiet else (lambda m: None)
    if args.rerank:
        from hiera.eval.run import evaluate_retriever
        from hiera.rerank import Reranker, RerankRetriever
        from hiera.retrieve import get_retriever

        reranker = Reranker(args.rerank)
        runs = {}
        for n in names:
            r = RerankRetriever(get_retriever(n, col), reranker, depth=args.rerank_depth)
            runs[r.name] = evaluate_retriever(col, r.name, questions, ks, retriever=r, progress=not args.quiet)
            log(f"{r.name}: {len(questions)} questions")
    else:
        runs = evaluate(col, questions, names, ks, progress=not args.quiet, log=log)
    result: dict[str, Any] = {n: r.metrics for n, r in runs.items()}
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.md").write_text(markdown_table(runs) + "\n", encoding="utf-8")
        (out / "results.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
        write_trec(runs, questions, out)
        plot_topk(runs, out, max(ks))
        _log(f"wrote {out}/results.md, results.json, *.trec, topk.png")
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(markdown_table(runs))
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
    from hiera.collection import Collection
    from hiera.eval.questions import load_questions
    from hiera.eval.tune import save_defaults, tune_dhr, tune_doc_alpha

    if args.retriever != "dhr":
        raise BadInputError("only the dhr retriever has λ and k1 to tune")
    questions = load_questions(args.questions, args.format, limit=args.limit)
    col = Collection(args.index)
    stage = args.doc_stage or str(col.manifest.doc_stage.get("name", "summary"))
    alpha = None
    if stage == "hybrid-max" and any(q.gold_docs for q in questions):
        alpha, _ = tune_doc_alpha(col, questions, progress=not args.quiet)
        _log(f"hybrid-max document stage: α = {alpha}")
    if args.target_k <= 0:
        raise BadInputError(f"--target-k must be a positive integer, got {args.target_k}")
    res = tune_dhr(col, questions, _ks(args.k1), doc_stage=stage, target_k=args.target_k, progress=not args.quiet,
                   log=_log, doc_alpha=alpha)
    if not args.dry_run:
        save_defaults(Path(args.index), res.lam, res.k1, doc_alpha=alpha)
    print(json.dumps({"lambda": res.lam, "k1": res.k1, "doc_alpha": alpha, f"top{args.target_k}": res.target, "top1": res.top1,
                      "saved": not args.dry_run}))
    return 0


def register(add: Any) -> None:
    from hiera.eval.questions import QUESTION_FORMATS

    fmts = ", ".join(sorted(QUESTION_FORMATS))
    sp = add("eval", cmd_eval, "evaluate retrievers on a question set")
    sp.add_argument("index")
    sp.add_argument("--questions", required=True)
    sp.add_argument("--format", required=True, help=f"question format: {fmts}")
    sp.add_argument("--retrievers", default="bm25,dense,dhr")
    sp.add_argument("--k", default="1,5,20,100")
    sp.add_argument("--limit", type=int, default=None, help="only the first N questions")
    sp.add_argument("--json", action="store_true")
    sp.add_argument("--out", default=None, help="also write results.md, TREC runs and topk.png here")
    sp.add_argument("--rerank", default=None, help="rerank every retriever's results with this cross-encoder")
    sp.add_argument("--rerank-depth", type=int, default=20)
    sp.add_argument("--vectors", choices=["float16", "float32"], default="float16", help="float32 keeps the vector matrices upcast in memory (2x their size, faster dense scoring); float16 memory-maps them")

    sp = add("tune", cmd_tune, "grid-search dhr's λ and k1 for top-k accuracy and save them as defaults")
    sp.add_argument("index")
    sp.add_argument("--questions", required=True)
    sp.add_argument("--format", required=True, help=f"question format: {fmts}")
    sp.add_argument("--retriever", default="dhr")
    sp.add_argument("--k1", default="10,20,50,100", help="k1 values to try")
    sp.add_argument("--doc-stage", default=None)
    sp.add_argument(
        "--target-k",
        type=int,
        default=20,
        help="maximize top-K accuracy (20: the paper; 1 when a reader or an LLM takes only the first passage)",
    )
    sp.add_argument("--limit", type=int, default=None)
    sp.add_argument("--dry-run", action="store_true", help="print the best values without saving")
