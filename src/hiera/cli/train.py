"""``hiera train`` (dual encoders), ``hiera train-reranker`` and ``hiera train-classifier`` (cross-encoders),
``hiera train-reader`` (the extractive reader) and ``hiera tune-reader`` (its decoding), and ``hiera train-fetchhr``
(FetchHR's per-layer heads)."""

from __future__ import annotations

import argparse
import json

from hiera.cli.common import AddCommand, add_device_option, log_unless, positive_float, positive_int
from hiera.errors import BadInputError


def questions_of(args: argparse.Namespace, path: str | None = None, fmt: str | None = None) -> list:
    from hiera.corpus.store import CorpusStore
    from hiera.eval.questions import load_questions

    store = CorpusStore(args.index)  # gold passage ids depend on how the collection was split
    try:
        rules = store.rules
    finally:
        store.close()
    qs = load_questions(path or args.questions, fmt or args.format, limit=args.limit, rules=rules)
    if not qs:
        raise BadInputError(f"{path or args.questions} holds no questions")
    return qs


def cmd_train(args: argparse.Namespace) -> int:
    from hiera.train.args import TrainArgs
    from hiera.train.biencoder import train_biencoder

    targs = TrainArgs(
        level=args.level,
        negatives=tuple(x.strip() for x in args.negatives.split(",") if x.strip()),
        hard_negatives=args.hard_negatives,
        per_kind=args.per_kind,
        iterations=args.iterations,
        iter2_init=args.iter2_init,
        iter2_questions=args.iter2_questions,
        max_seq_length=args.max_seq_length,
        **common_fields(args),
    )
    report = train_biencoder(
        args.index, questions_of(args), args.out, targs, log=log_unless(args.quiet)
    )
    print(
        json.dumps(
            {
                "model": args.out,
                "iterations": report["iterations"],
                "seconds": report["seconds_total"],
                "peak_rss_mb": report["peak_rss_mb"],
            },
            indent=2,
        )
    )
    return 0


def common_fields(args: argparse.Namespace) -> dict:
    """The options every trainer takes (the run's model, budget, seed, checkpoints, device), as the dataclasses name them."""
    from hiera.models import resolve_device

    resolve_device(args.device)  # --device cuda without a GPU: refused before the questions load
    return {
        "base_model": args.base_model,
        "batch_size": args.batch_size,
        "epochs": args.epochs,
        "max_steps": args.max_steps,
        "max_examples": args.max_examples,
        **({"learning_rate": args.lr} if args.lr is not None else {}),
        "seed": args.seed,
        "save_steps": args.save_steps,
        "max_minutes": args.max_minutes,
        "progress": not args.quiet,
        "device": args.device,
    }


def _run_fields(args: argparse.Namespace) -> dict:
    """The options the cross-encoder and reader trainers share: the common ones and ``max_length``."""
    return {**common_fields(args), "max_length": args.max_length}


def _cross_encoder_fields(args: argparse.Namespace) -> dict:
    """What ``train-reranker`` and ``train-classifier`` share: the run's fields and the calibration hold-out."""
    return {**_run_fields(args), "dev_fraction": args.dev_fraction}


def cmd_train_reranker(args: argparse.Namespace) -> int:
    from hiera.train.args import RerankerArgs
    from hiera.train.reranker import train_reranker

    rargs = RerankerArgs(
        negatives_per_positive=args.negatives_per_positive,
        negatives_from=args.negatives_from,
        **_cross_encoder_fields(args),
    )
    dev = questions_of(args, args.dev_questions, args.dev_format or args.format) if args.dev_questions else None
    if args.calibrate_only:
        from hiera.train.reranker import recalibrate_reranker

        meta = recalibrate_reranker(args.index, questions_of(args), args.out, rargs, dev_questions=dev,
                                    log=log_unless(args.quiet))
        print(json.dumps({"model": args.out, "weight": meta["weight"], "weight_fit": meta["weight_fit"]}, indent=2))
        return 0
    report = train_reranker(
        args.index,
        questions_of(args),
        args.out,
        rargs,
        dev_questions=dev,
        log=log_unless(args.quiet),
    )
    print(
        json.dumps(
            {
                "model": args.out,
                "threshold": report["threshold"],
                "weight": report.get("weight", 1.0),
                "dev": report["dev"],
                "train": report["train"],
                "peak_rss_mb": report["peak_rss_mb"],
            },
            indent=2,
        )
    )
    return 0


def cmd_train_classifier(args: argparse.Namespace) -> int:
    from hiera.sets.queries import load_set_queries
    from hiera.train.args import ClassifierArgs
    from hiera.train.classifier import train_classifier

    if args.format != "quest":
        raise BadInputError(f"train-classifier reads QUEST-format set queries (--format quest), not {args.format!r}")
    cargs = ClassifierArgs(
        negatives=args.negatives,
        units=args.units,
        atom_text=args.atom_text,
        or_positives=args.or_positives,
        **_cross_encoder_fields(args),
    )
    queries = load_set_queries(args.questions, limit=args.limit, require_docs=True)
    dev = load_set_queries(args.dev_questions, require_docs=True) if args.dev_questions else None
    report = train_classifier(
        args.index, queries, args.out, cargs, dev_queries=dev, log=log_unless(args.quiet)
    )
    print(
        json.dumps(
            {
                "model": args.out,
                "threshold": report["threshold"],
                "dev": report["dev"],
                "train": report["train"],
                "seconds_total": report["seconds_total"],
                "peak_rss_mb": report["peak_rss_mb"],
            },
            indent=2,
        )
    )
    return 0


def cmd_train_reader(args: argparse.Namespace) -> int:
    from hiera.train.args import READER_DEVICE_DEFAULTS, ReaderArgs
    from hiera.train.reader import train_reader

    given = {"negatives": args.negatives, "stride": args.stride, "init": args.init, "interpolate": args.interpolate,
             **_run_fields(args)}
    if args.train_embeddings is not None:
        given["freeze_embeddings"] = not args.train_embeddings
    # what the device's recipe decides unless an option says otherwise
    for name in READER_DEVICE_DEFAULTS["cpu"]:
        if given.get(name) is None:
            given.pop(name, None)
    rargs = ReaderArgs.for_device(given.pop("device"), **given)
    report = train_reader(args.index, questions_of(args), args.out, rargs, log=log_unless(args.quiet))
    print(json.dumps({"model": args.out, "examples": report["examples"], "train": report["train"],
                      "seconds_total": report["seconds_total"], "peak_rss_mb": report["peak_rss_mb"]}, indent=2))
    return 0


def cmd_tune_reader(args: argparse.Namespace) -> int:
    """Calibrate the reader's decoding over the collection's retrieval of train questions; saved in the reader."""
    from hiera.builds import open_collection
    from hiera.eval.tune_reader import tune_reader
    from hiera.index.exact import resolve_placement
    from hiera.read.calibrate import save_decoding
    from hiera.read.reader import Reader
    from hiera.retrieve import get_retriever
    from hiera.train.common import sample_questions

    placement = resolve_placement(args.device, "auto")
    reader = Reader(args.reader, device=placement.device)  # not a reader: refused before the collection loads
    try:
        read_ks = sorted({int(x) for x in args.read_k.split(",") if x.strip()})
    except ValueError:
        read_ks = []
    if not read_ks or read_ks[0] < 1 or len(read_ks) < 2:
        raise BadInputError(f"--read-k takes two or more positive read-ks, like 1,5,20 (got {args.read_k!r})")
    col = open_collection(args.index, device=args.device)
    name = args.retriever or ("dhr" if "dense" in col.built else "bm25")
    retriever = get_retriever(name, col)
    qs = sample_questions(questions_of(args), args.max_examples, args.seed)
    report = tune_reader(reader, retriever, qs, read_ks, col.store.title_sep, progress=not args.quiet)
    if not args.dry_run:
        save_decoding(args.reader, report["chosen"], report)
    print(json.dumps({"reader": args.reader, "retriever": name, "questions": report["questions"],
                      "chosen": report["chosen"], "chosen_em": report["chosen_em"],
                      "never_loses": report["any_never_loses"], "saved": not args.dry_run}, indent=2))
    return 0


def _common(sp: argparse.ArgumentParser, fmts: str, lr: str) -> None:
    sp.add_argument("index", help="a built collection (BM25 is needed for positives and negatives)")
    sp.add_argument("--questions", required=True, help="training questions (never the ones you report on)")
    sp.add_argument("--format", required=True, help=f"question format: {fmts}")
    sp.add_argument(
        "--out", required=True,
        help="model directory to write: new, empty, or one this command wrote before (replaced only when training "
        "succeeds)",
    )
    sp.add_argument("--limit", type=int, default=None, help="only the first N questions of the file")
    sp.add_argument(
        "--max-examples", type=positive_int, default=None, help="a seeded sample of N questions (CPU budgets)"
    )
    sp.add_argument(
        "--base-model", default="all-MiniLM-L6-v2", help="model name or local directory to start from"
    )
    sp.add_argument("--batch-size", type=positive_int, default=32)
    sp.add_argument("--epochs", type=positive_float, default=1.0)
    sp.add_argument("--max-steps", type=positive_int, default=None, help="stop after N optimizer steps (default: no limit)")
    sp.add_argument("--lr", type=positive_float, default=None, help=f"learning rate (default: {lr})")
    sp.add_argument("--seed", type=int, default=42)
    sp.add_argument("--max-minutes", type=float, default=None, help="stop and save after this long")
    add_device_option(sp)


def cmd_train_fetchhr(args: argparse.Namespace) -> int:
    from hiera.train.fetchhr import FetchHRArgs, train_fetchhr

    fargs = FetchHRArgs(
        layers=args.layers,
        warmup_ratio=args.warmup_ratio,
        hard_negatives=args.hard_negatives,
        dropout=args.dropout,
        **common_fields(args),
    )
    report = train_fetchhr(args.index, questions_of(args), args.out, fargs, log=log_unless(args.quiet))
    print(json.dumps({k: report[k] for k in ("layers", "steps", "loss_first", "loss_last", "train_seconds",
                                              "stopped_by_budget", "peak_rss_mb")} | {"model": args.out}, indent=2))
    return 0


def register(add: AddCommand) -> None:
    from hiera.eval.questions import QUESTION_FORMATS
    from hiera.train.args import READER_DEVICE_DEFAULTS, ClassifierArgs, RerankerArgs, TrainArgs
    from hiera.train.fetchhr import FetchHRArgs
    from hiera.train.negatives import DOC_KINDS, PASSAGE_KINDS

    def num(x: float) -> str:  # 1e-4, not 0.0001
        return f"{x:.0e}".replace("e-0", "e-")

    reader_lr = ", ".join(f"{num(r['learning_rate'])} on {d}" for d, r in READER_DEVICE_DEFAULTS.items())

    fmts = ", ".join(sorted(QUESTION_FORMATS))
    sp = add("train", cmd_train, "train a document- or passage-level dual encoder with DHR's negatives")
    _common(sp, fmts, num(TrainArgs.learning_rate))
    sp.add_argument("--level", choices=["passage", "doc"], default="passage")
    sp.add_argument(
        "--negatives",
        default="in-batch,bm25",
        help=f"comma list; passage: {', '.join(PASSAGE_KINDS)}; doc: {', '.join(DOC_KINDS)} "
        "(mined is added by --iterations 2)",
    )
    sp.add_argument(
        "--hard-negatives", type=int, default=1, help="hard negatives per example (kinds taken in turn)"
    )
    sp.add_argument("--per-kind", type=int, default=4, help="negatives of each kind kept per question")
    sp.add_argument("--iterations", type=int, default=1, choices=[1, 2])
    sp.add_argument("--iter2-init", choices=["base", "iter1"], default="base", help="where iteration 2 starts from")
    sp.add_argument(
        "--iter2-questions",
        choices=["same", "fresh"],
        default="same",
        help="iteration 2 on the iteration-1 questions (the paper) or on a disjoint sample of the rest",
    )
    sp.add_argument("--max-seq-length", type=int, default=None)
    sp.add_argument("--save-steps", type=positive_int, default=50)

    sp = add(
        "train-reranker", cmd_train_reranker, "train a cross-encoder reranker and calibrate its threshold"
    )
    _common(sp, fmts, num(RerankerArgs.learning_rate))
    sp.add_argument("--negatives-per-positive", type=int, default=2, help="half hard, half random")
    sp.add_argument(
        "--calibrate-only",
        action="store_true",
        help="do not train: fit the weight of the existing model at --out on the held-out questions (the same "
        "split a training run with these arguments makes) and rewrite its metadata",
    )
    sp.add_argument(
        "--negatives-from",
        default="bm25",
        metavar="METHOD",
        help="retriever whose top passages without the answer are the hard negatives (bm25, dense, hybrid, dhr)",
    )
    sp.add_argument("--max-length", type=int, default=256)
    sp.add_argument("--save-steps", type=positive_int, default=100)
    sp.add_argument(
        "--dev-questions", default=None, help="calibration questions (default: hold out --dev-fraction)"
    )
    sp.add_argument("--dev-format", default=None)
    sp.add_argument("--dev-fraction", type=float, default=0.1)

    sp = add(
        "train-classifier",
        cmd_train_classifier,
        "train the set-query (QUEST) relevance classifier: a cross-encoder over (constraint, document)",
    )
    _common(sp, "quest", num(ClassifierArgs.learning_rate))
    sp.set_defaults(batch_size=16)  # ClassifierArgs' default: more updates in a short CPU budget
    sp.add_argument("--negatives", type=int, default=16, help="per constraint: half BM25 / known non-members, half random; positives replicated to match")
    sp.add_argument("--units", choices=["atoms+queries", "atoms"], default="atoms+queries",
                    help="train on the atomic constraints and the whole queries (the undecomposed baseline), or atoms only")
    sp.add_argument("--atom-text", choices=["parsed", "gold"], default="parsed",
                    help="a constraint's text as the set parser reads it (what search sees) or as annotated")
    sp.add_argument("--or-positives", choices=["bm25", "none"], default="bm25",
                    help="a union's gold documents: positives of the alternative BM25 scores clearly highest, or of none")
    sp.add_argument("--max-length", type=int, default=64, help="input tokens: constraint, title, about the lead sentence")
    sp.add_argument("--save-steps", type=positive_int, default=100)
    sp.add_argument("--dev-questions", default=None, help="queries whose constraints calibrate the pair threshold "
                    "(default: hold out --dev-fraction of the constraints)")
    sp.add_argument("--dev-fraction", type=float, default=0.1)

    sp = add("train-fetchhr", cmd_train_fetchhr,
             "train FetchHR's per-layer retrieval heads over a frozen query encoder and passage index")
    _common(sp, fmts, num(FetchHRArgs.learning_rate))
    sp.set_defaults(base_model=None, batch_size=64)
    sp.add_argument("--layers", default=None, help="layers that get a head, like 1-6 or 1,3,6 (default: all)")
    sp.add_argument("--hard-negatives", type=int, default=0, help="BM25 hard negatives per question (0: in-batch only)")
    sp.add_argument("--warmup-ratio", type=float, default=0.1)
    sp.add_argument("--dropout", type=float, default=0.1)
    sp.add_argument("--save-steps", type=positive_int, default=100)

    sp = add(
        "train-reader",
        cmd_train_reader,
        "train the extractive reader (span + passage-selection heads) from all-MiniLM-L6-v2",
    )
    _common(sp, fmts, reader_lr)
    # batch size, epochs, learning rate and frozen embeddings: the device's recipe unless given
    sp.set_defaults(batch_size=None, epochs=None)
    sp.epilog = ("defaults per device: on cpu batches of 16 questions, 1 epoch, lr 1e-4, word embeddings frozen; "
                 "on cuda batches of 64, 3 epochs, lr 4e-4, word embeddings trained")
    sp.add_argument("--negatives", type=int, default=1, help="BM25 passages without the answer per question")
    sp.add_argument("--max-length", type=int, default=256, help="window length in tokens (question + title + passage)")
    sp.add_argument("--stride", type=int, default=64, help="tokens shared by neighbouring windows of a long passage")
    sp.add_argument("--train-embeddings", action=argparse.BooleanOptionalAction, default=None,
                    help="update the word embeddings too (default: on cuda, not on cpu, where it is slower)")
    sp.add_argument("--save-steps", type=positive_int, default=50)
    sp.add_argument("--init", default=None, metavar="READER",
                    help="continue training this trained reader (its encoder and heads) instead of fresh heads on "
                         "--base-model, e.g. on questions phrased another way; its decoding is kept")
    sp.add_argument("--interpolate", type=float, default=None, metavar="W",
                    help="with --init: save init + W·(trained − init), 0 < W ≤ 1, so the reader keeps more of what "
                         "--init read well (a weight-space ensemble); another W reuses the run's last checkpoint")

    sp = add("tune-reader", cmd_tune_reader,
             "calibrate a reader's decoding (passage_weight, rank_weight, merge) on train questions so that reading "
             "more passages does not lose answers on average; saved in the reader as its defaults")
    sp.add_argument("index", help="a built collection that holds the questions' answers")
    sp.add_argument("--reader", required=True, help="a reader directory from hiera train-reader")
    sp.add_argument("--questions", required=True, help="train questions the reader was not trained on, if you "
                    "have them (never the ones you report on)")
    sp.add_argument("--format", required=True, help=f"question format: {fmts}")
    sp.add_argument("--retriever", default=None,
                    help="the method whose passages are read (default: dhr, or bm25 on a build without dense)")
    sp.add_argument("--read-k", default="1,5,20", help="passages read per question, the read-ks to keep from losing")
    sp.add_argument("--limit", type=int, default=None, help="only the first N questions of the file")
    sp.add_argument("--max-examples", type=positive_int, default=200,
                    help="a seeded sample of N questions (each is read at the largest read-k)")
    sp.add_argument("--seed", type=int, default=42)
    sp.add_argument("--dry-run", action="store_true", help="report the choice without saving it")
    add_device_option(sp)
