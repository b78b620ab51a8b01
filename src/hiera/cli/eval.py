"""``hiera eval`` and ``hiera tune``."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from hiera.cli.common import AddCommand, add_device_option
from hiera.errors import BadInputError
from hiera.io import write_json_atomic
from hiera.spec import add_set_option


def _ints(text: str, flag: str) -> list[int]:
    try:
        ks = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise BadInputError(f"{flag} must be a comma-separated list of integers, got {text!r}") from None
    if not ks or ks[0] <= 0:
        raise BadInputError(f"{flag} values must be positive integers")
    return ks


def _question_options(args: argparse.Namespace) -> dict[str, Any]:
    """``--pool PATH``: HotpotQA's paragraph pool when it is not beside the question file (gold ids are pool ids)."""
    if args.pool is None:
        return {}
    if args.format != "hotpotqa":
        raise BadInputError(f"--pool applies to --format hotpotqa (its gold ids are pool ids), not {args.format}")
    return {"pool": args.pool}


def _log(msg: str) -> None:
    print(msg, file=sys.stderr)


def cmd_eval(args: argparse.Namespace) -> int:
    from hiera.builds import open_collection
    from hiera.errors import CollectionChangedError
    from hiera.eval.questions import load_questions, squad_unanswerable
    from hiera.eval.run import (
        evaluate_retriever,
        markdown_table,
        plot_topk,
        questions_without_gold,
        questions_without_relevant,
        write_trec,
    )
    from hiera.index.exact import resolve_placement
    from hiera.retrieve import get_retriever
    from hiera.spec import MAX_K, parse_assignments, parse_reader_assignments

    names = list(dict.fromkeys(n.strip() for n in args.retrievers.split(",") if n.strip()))
    if not names:
        raise BadInputError("--retrievers names no retriever")
    placement = resolve_placement(args.device, args.dense_search)
    # unknown names and bad values fail before any work; reader parameters only with a reader
    _question_options(args)
    params, read_params = parse_reader_assignments(args.set, names) if args.reader else (parse_assignments(args.set, names), {})
    if args.out:
        _output_dir(Path(args.out))  # a file there, or no right to write: said now, not after the evaluation
    if args.format == "quest":
        if args.filter:
            raise BadInputError("--filter does not apply to --format quest yet")
        if args.reader:
            raise BadInputError("--reader does not apply to --format quest (set queries have no answer strings)")
        return _eval_sets(args, names, params)
    ks = _ints(args.ks, "--ks")
    read_ks = _ints(args.read_k, "--read-k") if args.reader else []
    if read_ks and read_ks[-1] > ks[-1]:
        ks = sorted({*ks, read_ks[-1]})  # the reader needs that many passages retrieved
    if ks[-1] > MAX_K:
        given = "--read-k" if read_ks and read_ks[-1] == ks[-1] else "--ks"
        raise BadInputError(f"{given} {ks[-1]} is larger than the limit {MAX_K}")
    reader = None
    if args.reader:
        from hiera.read.reader import Reader
        from hiera.spec import method

        unread = [n for n in names if "passage" not in method(n).levels]
        if len(unread) == len(names):
            raise BadInputError(f"--reader reads passages, and {', '.join(unread)} rank{'s' if len(unread) == 1 else ''} "
                                "documents only")
        if unread:
            _log(f"note: {', '.join(unread)} rank{'s' if len(unread) == 1 else ''} documents only: evaluated without "
                 "the reader (no em@K / f1@K)")

        reader = Reader(args.reader, device=placement.device, **read_params)  # fails before any retrieval
    col = open_collection(args.index, vectors=args.vectors, backend=args.backend, device=args.device,
                          dense_search=args.dense_search)
    if args.filter:
        from hiera.index.filters import compile_filter

        compile_filter(col, args.filter)  # a bad filter fails before any search
    questions = load_questions(args.questions, args.format, limit=args.limit, rules=col.store.rules,
                               **_question_options(args))
    log = _log if not args.quiet else (lambda m: None)
    absent = questions_without_gold(col, questions)
    if absent:
        _log(f"note: {absent} of {len(questions)} questions name gold documents {args.index} does not hold; "
             "every retriever misses them (is this the collection the questions were written for?)")
    unanswerable = squad_unanswerable(args.questions) if args.format == "squad" else 0
    if unanswerable:
        _log(f"note: {unanswerable} SQuAD 2.0 questions of {args.questions} are unanswerable (is_impossible) and are "
             f"left out; the figures cover the {len(questions)} answerable questions evaluated")
    unjudged = questions_without_relevant(questions)
    if unjudged:
        _log(f"note: {unjudged} of {len(questions)} questions are judged with no relevant document; the document "
             "metrics leave them out of their means")
    reranker = None
    if args.rerank:
        from hiera.crossencoder import Reranker
        from hiera.retrieve.rerank import RerankRetriever

        reranker = Reranker(args.rerank, device=placement.device)
    for n in names:  # a method this build cannot serve is refused before any other has run
        col.check_method(n)
    runs = {}
    for n in names:
        t = time.perf_counter()
        r = get_retriever(n, col, **params[n])
        if reranker is not None:
            r = RerankRetriever(r, reranker, depth=args.rerank_depth)
        try:
            runs[r.name] = evaluate_retriever(
                col, r.name, questions, ks, retriever=r, progress=not args.quiet, latency_sample=args.latency_sample,
                filter=args.filter,
            )
        except CollectionChangedError:  # searching on would mix two collections in one comparison
            raise CollectionChangedError(
                f"the evaluation stopped at {r.name}: another process removed documents from {args.index} while it "
                "ran, and its figures would mix two collections; run it again once no writer is changing it"
            ) from None
        if reader is not None and runs[r.name].passage_runs:
            from hiera.eval.read import read_runs

            sep = col.store.title_sep
            read_m, _ = read_runs(reader, questions, runs[r.name].passage_runs, read_ks, sep=sep,
                                  progress=not args.quiet, desc=f"read {r.name}")
            runs[r.name].metrics.update(read_m)
        log(f"{r.name}: {len(questions)} questions in {time.perf_counter() - t:.1f}s")
    result: dict[str, Any] = {n: r.metrics for n, r in runs.items()}
    if args.out:

        def runs_files(out: Path) -> list[Path]:
            written = write_trec(runs, questions, out)
            plot = plot_topk(runs, out, max(ks))
            return written + ([plot] if plot else [])

        _write_outputs(Path(args.out), runs, result, markdown_table(runs), runs_files,
                       {**_run_record(args, col, len(questions), ks), "questions_without_gold": absent,
                        "questions_without_relevant": unjudged,
                        "questions_unanswerable_left_out": unanswerable})
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(markdown_table(runs))
    return 0


def _eval_sets(args: argparse.Namespace, names: list[str], params: dict[str, dict[str, Any]]) -> int:
    """``--format quest``: QUEST's set metrics (avg P/R/F1 of the predicted sets, Recall@K, MRecall@K, per template)."""
    from hiera.builds import open_collection
    from hiera.eval.metrics import QUEST_KS
    from hiera.eval.sets import evaluate_sets, markdown_table
    from hiera.retrieve import get_retriever
    from hiera.sets.queries import load_set_queries

    if args.rerank:
        raise BadInputError("--rerank does not apply to --format quest (the sets method classifies its candidates)")
    col = open_collection(args.index, vectors=args.vectors, backend=args.backend, device=args.device,
                          dense_search=args.dense_search)
    queries = load_set_queries(args.questions, limit=args.limit, require_docs=True)
    log = _log if not args.quiet else (lambda m: None)
    for n in names:  # a method this build cannot serve is refused before any other has run
        col.check_method(n)
    runs = {}
    for n in names:
        t = time.perf_counter()
        r = get_retriever(n, col, **params[n])
        runs[n] = evaluate_sets(col, n, queries, r, set_k=args.set_k, ks=QUEST_KS, progress=not args.quiet)
        log(f"{n}: {len(queries)} set queries in {time.perf_counter() - t:.1f}s")
    result: dict[str, Any] = {n: r.metrics for n, r in runs.items()}
    if args.out:

        def runs_files(out: Path) -> list[Path]:
            return [p for r in runs.values() for p in r.write(out)]  # QUEST's prediction format

        _write_outputs(Path(args.out), runs, result, markdown_table(runs), runs_files,
                       _run_record(args, col, len(queries), list(QUEST_KS)))
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
    else:
        print(markdown_table(runs))
    return 0


def _output_dir(out: Path) -> None:
    """Create ``--out`` (or find it) and check that it takes files; a one-line error otherwise."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise BadInputError(f"--out {out}: a file is in the way; give a directory") from None
    except OSError as e:
        raise BadInputError(f"--out {out}: cannot create it ({e.strerror})") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise BadInputError(f"--out {out}: cannot write there (permission denied)")


def _run_record(args: argparse.Namespace, col: Any, questions: int, ks: list[int]) -> dict[str, Any]:
    """What a figure in ``results.json`` was measured on: the questions, the collection's build, the options."""
    from hiera.version import __version__

    pool = getattr(args, "pool", None)
    return {
        "questions": {"path": str(args.questions), "format": args.format, "limit": args.limit, "count": questions,
                      **({"pool": str(pool)} if pool is not None else {})},
        "collection": {"path": str(args.index), "build": col.build_dir.name,
                       "corpus_version": col.manifest.corpus_version},
        "ks": ks, "filter": args.filter, "rerank": args.rerank,
        "rerank_depth": getattr(args, "rerank_depth", None) if args.rerank else None,
        "reader": getattr(args, "reader", None),
        "read_k": getattr(args, "read_k", None) if getattr(args, "reader", None) else None,
        # how the collection was opened: what can change a query vector or a score
        "backend": getattr(args, "backend", None), "vectors": getattr(args, "vectors", None),
        "device": getattr(args, "device", None), "dense_search": getattr(args, "dense_search", None),
        "latency_sample": getattr(args, "latency_sample", None),
        "hiera": __version__,
    }


STAGING = ".hiera-eval-"  # the hidden folder inside --out where a run's files are written before they land


def _write_outputs(
    out: Path, runs: dict[str, Any], result: dict[str, Any], markdown: str, runs_files: Any, run: dict[str, Any]
) -> None:
    """``--out``: the table, the metrics, each retriever's parameters and what the run read, then the runs in
    their own format. ``run.json`` lists the run files; those an earlier run into the same directory listed and
    this one did not write are removed, so every file there describes this run (nothing else is touched).

    Every file is written into a hidden folder inside ``out`` first and moved into place by rename once all are
    whole, ``run.json`` last: a kill or a full disk while writing leaves the earlier run's files as they were.
    Only the moves themselves (a few renames) can be cut short, and then ``run.json`` still names the earlier
    run and the error says how far they got."""
    import shutil
    import tempfile

    from hiera.errors import HieraError

    try:
        out.mkdir(parents=True, exist_ok=True)
        for left in out.glob(f"{STAGING}*"):  # a run killed while writing; another run's that is alive stays
            if not _alive(left.name[len(STAGING):].split("-")[0]):
                shutil.rmtree(left, ignore_errors=True)
        stage = Path(tempfile.mkdtemp(prefix=f"{STAGING}{os.getpid()}-", dir=out))
    except OSError as e:
        raise HieraError(f"cannot write the results to {out} ({e.strerror})") from None
    moved = 0
    try:
        earlier = _listed_files(out)
        (stage / "results.md").write_text(markdown + "\n", encoding="utf-8")
        write_json_atomic(stage / "results.json", result)
        write_json_atomic(stage / "params.json", {n: _jsonable(r.params) for n, r in runs.items()})
        written = [p.name for p in runs_files(stage)]
        write_json_atomic(stage / "run.json", {**run, "files": written})
        for name in (*written, "results.md", "results.json", "params.json"):
            os.replace(stage / name, out / name)
            moved += 1
        stale = sorted(earlier - set(written))
        for name in stale:
            (out / name).unlink(missing_ok=True)
        os.replace(stage / "run.json", out / "run.json")  # last: it says which run the files there are
    except OSError as e:
        where = ("the files there are the earlier run's" if not moved else
                 f"{moved} of its files were moved in before it; run.json still describes the earlier run")
        raise HieraError(f"could not write the results to {out} ({e.strerror}); {where}") from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    gone = f"; removed the earlier run's {', '.join(stale)}" if stale else ""
    _log(f"wrote {out}/results.md, results.json, params.json, run.json, {', '.join(written)}{gone}")


def _alive(pid: str) -> bool:
    """Whether the process that made a staging folder still runs (an unreadable name counts as gone)."""
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _listed_files(out: Path) -> set[str]:
    """The run files an earlier ``run.json`` in ``out`` lists (plain names only: nothing outside ``out``)."""
    try:
        files = json.loads((out / "run.json").read_text(encoding="utf-8")).get("files", [])
    except (OSError, ValueError, AttributeError):
        return set()
    return {f for f in files if isinstance(f, str) and f == Path(f).name and f not in _FIXED_OUTPUTS}


_FIXED_OUTPUTS = frozenset({"results.md", "results.json", "params.json", "run.json"})


def _jsonable(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v if isinstance(v, str | int | float | bool) or v is None else str(v) for k, v in d.items()}


def cmd_tune(args: argparse.Namespace) -> int:
    """Tunes, then saves beside the build: the writer lock is held for the whole run unless ``--dry-run``."""
    if args.dry_run:
        return _tune(args)
    from hiera.corpus.store import CorpusStore
    from hiera.lock import writer_lock

    CorpusStore(Path(args.index))  # not a collection: refused before a lock file is created

    with writer_lock(Path(args.index), "hiera tune"):
        return _tune(args)


def _tune(args: argparse.Namespace) -> int:
    from hiera.builds import open_collection
    from hiera.eval.questions import load_questions
    from hiera.eval.tune import save_tuned, tune_dhr, tune_doc_alpha
    from hiera.spec import PASSAGE_ALPHA, TOP_DOCS, parse_assignments

    if args.retriever != "dhr":
        raise BadInputError("hiera tune fits dhr's parameters only (lam, top_docs, passage_alpha, doc_alpha)")
    fixed = parse_assignments(args.set, ["dhr"])["dhr"]
    grid = parse_assignments([g.split(",")[0] for g in args.grid], ["dhr"])["dhr"] if args.grid else {}
    unknown = sorted(set(grid) - {"top_docs"})
    if unknown:
        raise BadInputError(f"--grid takes top_docs=V1,V2,...; lam and doc_alpha use their built-in grids (got {unknown})")
    top_docs = [TOP_DOCS.parse(v) for g in args.grid for v in g.split("=", 1)[1].split(",") if v.strip()] or TOP_DOCS.grid
    if args.target_k <= 0:
        raise BadInputError(f"--target-k must be a positive integer, got {args.target_k}")
    col = open_collection(args.index)
    questions = load_questions(args.questions, args.format, limit=args.limit, rules=col.store.rules,
                               **_question_options(args))
    from hiera.retrieve.dhr import DhrRetriever

    stage = DhrRetriever(col, **fixed).defaults["doc_stage"]
    alpha = fixed.get("doc_alpha")
    if alpha is None and stage == "hybrid-max" and any(q.gold_docs for q in questions):
        alpha, _ = tune_doc_alpha(col, questions, progress=not args.quiet)
        _log(f"hybrid-max document stage: doc_alpha = {alpha}")
    # every tunable parameter is fitted unless held fixed with --set; the hybrid passage stage needs BM25
    if "passage_alpha" in fixed:
        pas: tuple[float, ...] = (fixed["passage_alpha"],)
    else:
        pas = PASSAGE_ALPHA.grid if "bm25" in col.built else (0.0,)
    res = tune_dhr(col, questions, top_docs, doc_stage=stage, target_k=args.target_k, progress=not args.quiet,
                   log=_log, doc_alpha=alpha, passage_alphas=pas)
    chosen = {**res.params, "doc_stage": stage, **({"doc_alpha": alpha} if alpha is not None else {})}
    saved = None
    if not args.dry_run:
        meta = {"questions": str(args.questions), "n": len(questions), "target_k": args.target_k,
                f"top{args.target_k}": res.target, "top1": res.top1}
        saved = str(save_tuned(Path(args.index), chosen, meta, build_dir=col.build_dir))
    print(json.dumps({"retriever": "dhr", "params": chosen, f"top{args.target_k}": res.target, "top1": res.top1,
                      "saved": saved}))
    return 0


def register(add: AddCommand) -> None:
    from hiera.backends import BACKENDS
    from hiera.eval.questions import QUESTION_FORMATS

    fmts = ", ".join(sorted(QUESTION_FORMATS))
    sp = add("eval", cmd_eval, "evaluate retrievers on a question set")
    sp.add_argument("index")
    sp.add_argument("--questions", required=True)
    sp.add_argument("--format", required=True, help=f"question format: {fmts}")
    sp.add_argument("--retrievers", default="bm25,dense,dhr", help="comma-separated method names (`hiera methods`)")
    sp.add_argument("--ks", default="1,5,20,100", help="cut-offs for top-k accuracy, recall, nDCG …")
    add_set_option(sp, "a parameter for every listed retriever that has it")
    sp.add_argument("--limit", type=int, default=None, help="only the first N questions")
    sp.add_argument("--filter", default=None, metavar="EXPR",
                    help="search only what EXPR allows (docs/FILTERS.md); reports how many questions have their gold "
                         "outside it (filter_gold_outside) and the metrics without them (…_gold_inside)")
    sp.add_argument("--pool", default=None, metavar="PATH",
                    help="--format hotpotqa: the paragraph pool jsonl its gold ids refer to (default: "
                    "paragraph_pool.500q.jsonl beside the question file)")
    sp.add_argument("--latency-sample", type=int, default=200, help="questions timed one by one (0: none)")
    sp.add_argument("--json", action="store_true")
    sp.add_argument("--out", default=None, help="also write results.md/.json, params.json, run.json (the questions, build and options measured), TREC runs and topk.png here")
    sp.add_argument("--rerank", default=None, help="rerank every retriever's results with this cross-encoder")
    sp.add_argument("--rerank-depth", type=int, default=20)
    sp.add_argument("--reader", default=None,
                    help="reader directory (hiera train-reader): also read each retriever's passages and report em@K, f1@K")
    sp.add_argument("--read-k", default="1,5,20", help="--reader: passages read per question (comma list)")
    sp.add_argument("--set-k", type=int, default=10,
                    help="--format quest: a method without an answer set predicts its top K documents (default 10)")
    sp.add_argument("--vectors", choices=["float16", "float32"], default="float16", help="float32 keeps the vector matrices upcast in memory (2x their size, faster dense scoring); float16 memory-maps them")
    sp.add_argument("--backend", default=None, choices=list(BACKENDS),
                    help="what runs the query encoder (default: the backend the build encoded with)")
    add_device_option(sp, search=True)

    sp = add("tune", cmd_tune, "grid-search dhr's lam, top_docs, passage_alpha (and doc_alpha) for top-k accuracy; saved beside the build")
    sp.add_argument("index")
    sp.add_argument("--questions", required=True)
    sp.add_argument("--format", required=True, help=f"question format: {fmts}")
    sp.add_argument("--retriever", default="dhr")
    sp.add_argument("--pool", default=None, metavar="PATH",
                    help="--format hotpotqa: the paragraph pool jsonl its gold ids refer to (default: "
                    "paragraph_pool.500q.jsonl beside the question file)")
    add_set_option(sp, "a dhr parameter held fixed while tuning (e.g. doc_stage=summary, doc_alpha=0.4)")
    sp.add_argument("--grid", action="append", default=[], metavar="top_docs=V1,V2,...",
                    help="values to try (default: the registry's grid 10,20,50,100)")
    sp.add_argument(
        "--target-k",
        type=int,
        default=20,
        help="maximize top-K accuracy (20: the paper; 1 when a reader or an LLM takes only the first passage)",
    )
    sp.add_argument("--limit", type=int, default=None)
    sp.add_argument("--dry-run", action="store_true", help="print the best values without saving")
