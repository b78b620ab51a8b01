"""The ``hiera`` command line: one sub-command per subsystem.

Errors a user can cause print one line (``hiera: error: …``) and exit 2; pass
``--debug`` (or set ``HIERA_DEBUG=1``) to see the traceback instead.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hiera.errors import HieraError

Handler = Callable[[argparse.Namespace], int]
# Sub-commands that load encoder or cross-encoder weights (they take --trust-pickle).
MODEL_COMMANDS = frozenset({"build", "search", "add", "eval", "tune", "serve", "train", "train-reranker", "train-classifier", "train-reader", "answer", "sets", "demo"})


def _print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, ensure_ascii=False))


def _log(msg: str) -> None:
    print(msg, file=sys.stderr)


# -- ingest / add / stats ---------------------------------------------------
def _rules(args: argparse.Namespace):
    from hiera.corpus.tree import PassageRules

    if args.max_words is None and args.title_sep is None:
        return None
    return PassageRules(max_words=args.max_words or 100, title_sep=args.title_sep if args.title_sep is not None else ", ")


def _report_ingest(report, args: argparse.Namespace) -> None:
    msg = (
        f"ingested {report.documents} documents ({report.replaced} replaced), {report.passages} passages, "
        f"{report.redirects} redirects"
    )
    if args.skip_bad:
        msg += f"; skipped {report.skipped} bad records"
    _log(msg)
    for ex in report.skipped_examples:
        _log(f"  skipped: {ex}")


def cmd_ingest(args: argparse.Namespace) -> int:
    from hiera.corpus.ingest import ingest

    report = ingest(args.sources, args.format, args.index, rules=_rules(args), skip_bad=args.skip_bad, progress=not args.quiet)
    _report_ingest(report, args)
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    """Ingest, then rebuild incrementally: old vectors are copied, not re-encoded.

    The writer lock is held across both steps, so no other writer slips in between.
    """
    from hiera.corpus.store import CorpusStore
    from hiera.index.build import live_build_dir
    from hiera.lock import writer_lock

    CorpusStore(Path(args.index))  # no collection: refused before a lock file is created
    if live_build_dir(Path(args.index)) is None:
        raise HieraError(f"{args.index} has no index yet; use `hiera ingest` then `hiera build`")
    with writer_lock(Path(args.index), "hiera add"):
        return _add(args)


def _add(args: argparse.Namespace) -> int:
    from hiera.corpus.ingest import ingest
    from hiera.index.build import BuildOptions, build, live_build_dir, remove_unused_builds
    from hiera.index.manifest import Manifest

    build_dir = live_build_dir(Path(args.index))
    if build_dir is None:
        raise HieraError(f"{args.index} has no index yet; use `hiera ingest` then `hiera build`")
    old = Manifest.read(build_dir)
    opts = BuildOptions.from_manifest(old)
    opts.progress = not args.quiet
    log = _log if not args.quiet else (lambda m: None)
    # The new index is built inside the ingest's transaction and swapped in just before it commits:
    # a failure or a kill before that leaves the collection exactly as it was (documents and index).
    report = ingest(
        args.sources, args.format, args.index, skip_bad=args.skip_bad, progress=not args.quiet,
        before_commit=lambda store: build(args.index, opts, log=log, store=store),
    )
    remove_unused_builds(Path(args.index))
    _report_ingest(report, args)
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    from hiera.corpus.store import CorpusStore
    from hiera.index.build import live_build_dir
    from hiera.index.manifest import Manifest

    store = CorpusStore(Path(args.index))
    stats = store.stats()
    build_dir = live_build_dir(Path(args.index))
    if build_dir is not None:
        m = Manifest.read(build_dir)
        stats["index"] = {
            "built_at_version": m.corpus_version,
            "stale": m.corpus_version != stats["version"],
            "bm25": m.bm25 is not None,
            "dense": {k: v["name"] for k, v in m.models.items()},
            "faiss": m.faiss,
            "defaults": m.defaults,
        }
    if args.json:
        _print_json(stats)
    else:
        for k, v in stats.items():
            print(f"{k:>18}: {v}")
    return 0


# -- build / search --------------------------------------------------------
def cmd_build(args: argparse.Namespace) -> int:
    from hiera.index.bm25 import Bm25Config
    from hiera.index.build import BuildOptions, build
    from hiera.spec import method_names, parse_assignments

    defaults = {name: p for name, p in parse_assignments(args.set, method_names()).items() if p}
    opts = BuildOptions(
        bm25=not args.no_bm25,
        dense=not args.no_dense,
        doc_encoder=args.doc_encoder,
        passage_encoder=args.passage_encoder,
        backend=args.backend,
        passage_factory=args.passage_index,
        doc_factory=args.doc_index,
        bm25_config=Bm25Config(k1=args.bm25_k1, b=args.bm25_b),
        bm25_doc_text=args.bm25_doc_text,
        batch_size=args.batch_size,
        progress=not args.quiet,
        defaults=defaults or None,
        shards=args.shards,
        engine=args.engine,
        ray_address=args.ray_address,
        workers=args.workers,
    )
    t = time.perf_counter()
    m = build(args.index, opts, log=_log if not args.quiet else (lambda m: None))
    _log(f"built {args.index}: {m.documents} documents, {m.passages} passages in {time.perf_counter() - t:.1f}s")
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    from hiera.collection import Collection
    from hiera.retrieve import get_retriever
    from hiera.spec import parse_assignments

    params = parse_assignments(args.set, [args.retriever])[args.retriever]
    if args.decomposer_url:  # the linking pipeline's model decomposer (an OpenAI-compatible endpoint)
        params.update(parse_assignments(["decomposer=endpoint", f"decomposer_url={args.decomposer_url}"],
                                        [args.retriever])[args.retriever])
    col = Collection(args.index, doc_encoder=args.doc_encoder, passage_encoder=args.passage_encoder,
                     backend=args.backend, device=args.device)
    retriever = get_retriever(args.retriever, col)
    if args.rerank:
        from hiera.rerank import Reranker, RerankRetriever

        retriever = RerankRetriever(retriever, Reranker(args.rerank), depth=args.rerank_depth)
    res = retriever.search(args.query, k=args.k, level=args.level, **params)
    if args.json:
        _print_json(res.to_dict())
        return 0
    print(f"{res.retriever} · {res.level} · {len(res)} results · " + ", ".join(f"{s.name} {s.ms:.1f} ms" for s in res.trace))
    print("params: " + ", ".join(f"{k}={v}" for k, v in res.params.items()))
    for h in res:
        print(f"\n{h.rank:>3}. {h.breadcrumb()}    [{h.score:.4f}]")
        print(f"     {h.reason()}")
        text = h.text if len(h.text) <= 300 else h.text[:297] + "..."
        print(f"     {text}")
    if args.explain:
        from hiera.retrieve.explain import trace_tree

        print("\n" + trace_tree(res))
    return 0


def cmd_methods(args: argparse.Namespace) -> int:
    from hiera.spec import METHODS, READERS, methods_json

    if args.json:
        _print_json(methods_json())
        return 0
    for spec in (*METHODS.values(), *READERS.values()):
        if spec.kind == "reader":
            print(f"{spec.name}  [reader: hiera answer --reader DIR, hiera eval --reader DIR, hiera serve --reader DIR]")
        else:
            print(f"{spec.name}  [{', '.join(spec.levels)}; needs {' + '.join(spec.requires) or 'nothing'}]")
        print(f"    {spec.help}")
        for prm in spec.params:
            extra = f" (alias {', '.join(prm.aliases)})" if prm.aliases else ""
            tune = "; tunable" if prm.tunable else ""
            print(f"    --set {prm.name}=<{prm.describe_type()}>  default {prm.default}{extra}{tune}")
            print(f"        {prm.help}")
    return 0


def add_set_option(sp: argparse.ArgumentParser, what: str) -> None:
    """``--set NAME=VALUE`` (repeatable): the one way to pass method parameters (see `hiera methods`)."""
    sp.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE",
        help=f"{what}; METHOD.NAME=VALUE targets one method; `hiera methods` lists every parameter",
    )


# -- parser ----------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    from hiera import __version__

    p = argparse.ArgumentParser(prog="hiera", description="Hierarchical retrieval for open-domain QA.")
    p.add_argument("--version", action="version", version=f"hiera {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = p.add_subparsers(dest="command", required=True)

    def add(name: str, handler: Handler, help_: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_, description=help_)
        sp.set_defaults(handler=handler)
        sp.add_argument("--quiet", "-q", action="store_true", help="no progress output")
        if name in MODEL_COMMANDS:
            sp.add_argument(
                "--trust-pickle", action="store_true",
                help="also load pickle model weights (*.bin, *.pt), which can run code: only for models you trust "
                "(default: safetensors only; env HIERA_TRUST_PICKLE=1)",
            )
        return sp

    from hiera.corpus.readers import FORMATS

    sp = add("ingest", cmd_ingest, "create or update a collection from source files")
    sp.add_argument("sources", nargs="+")
    sp.add_argument("--format", "-f", required=True, help=f"one of: {', '.join(sorted(FORMATS))}")
    sp.add_argument("--index", "-i", required=True, help="collection directory")
    sp.add_argument("--skip-bad", action="store_true", help="skip malformed records and count them")
    sp.add_argument("--max-words", type=int, default=None, help="passage length limit (default 100)")
    sp.add_argument("--title-sep", default=None, help='passage title separator (default ", ")')

    sp = add("add", cmd_add, "append documents to an indexed collection (old vectors are reused)")
    sp.add_argument("index")
    sp.add_argument("sources", nargs="+")
    sp.add_argument("--format", "-f", required=True)
    sp.add_argument("--skip-bad", action="store_true")

    sp = add("stats", cmd_stats, "print collection statistics")
    sp.add_argument("index")
    sp.add_argument("--json", action="store_true")

    from hiera.backends import BACKENDS
    from hiera.encode import DEFAULT_BACKEND, DEFAULT_MODEL
    from hiera.index.exact import DEVICES
    from hiera.spec import MAX_K
    from hiera.spec import method_names as _names

    RETRIEVERS = _names()

    sp = add("build", cmd_build, "build BM25 and dense indexes for a collection")
    sp.add_argument("index")
    sp.add_argument("--no-dense", action="store_true", help="BM25 only (no encoding)")
    sp.add_argument("--no-bm25", action="store_true")
    sp.add_argument("--doc-encoder", default=DEFAULT_MODEL, help="model name or local directory")
    sp.add_argument("--passage-encoder", default=DEFAULT_MODEL)
    sp.add_argument("--backend", default=DEFAULT_BACKEND, choices=list(BACKENDS),
                    help="what runs the encoders: torch, or the model exported to ONNX Runtime (int8 too) or OpenVINO; "
                         "default auto: the fastest installed one within 0.5 points of torch's retrieval (onnx-int8 "
                         "where ONNX Runtime is); recorded in the manifest, and searches use it too")
    sp.add_argument("--passage-index", default="Flat", help="FAISS factory string (Flat, HNSW32, IVF1024,PQ32 …)")
    sp.add_argument("--doc-index", default="Flat")
    sp.add_argument("--bm25-k1", type=float, default=0.9, help="BM25 term-frequency saturation")
    sp.add_argument("--bm25-b", type=float, default=0.4, help="BM25 length normalization")
    sp.add_argument("--bm25-doc-text", choices=["fulltext", "summary"], default="fulltext")
    add_set_option(sp, "default of a method parameter saved with the build, e.g. doc_stage=summary, lam=0.5")
    sp.add_argument("--batch-size", type=int, default=32)
    sp.add_argument("--shards", type=int, default=0, metavar="N",
                    help="split the index into N shards of contiguous documents (searches return the same results)")
    sp.add_argument("--engine", choices=["local", "ray"], default="local",
                    help="sharded builds: in this process, or as Ray tasks with Ray Data encoding (pip install 'hiera[ray]')")
    sp.add_argument("--ray-address", default=None, metavar="auto|ADDRESS",
                    help="--engine ray: the cluster to use (default: start a local Ray)")
    sp.add_argument("--workers", type=int, default=None, help="--engine ray: encoding actors (default: the cluster's CPUs)")

    sp = add("search", cmd_search, "search a collection")
    sp.add_argument("index")
    sp.add_argument("query")
    sp.add_argument("--retriever", "-r", default="dhr", choices=RETRIEVERS)
    sp.add_argument("--k", "-k", type=int, default=10, help=f"number of hits (1 to {MAX_K})")
    sp.add_argument("--level", choices=["passage", "doc"], default=None)
    add_set_option(sp, "a parameter of the retriever for this search, e.g. lam=0.5")
    sp.add_argument("--doc-encoder", default=None, help="refuse to search unless the index used this model")
    sp.add_argument("--passage-encoder", default=None)
    sp.add_argument("--backend", default=None, choices=list(BACKENDS),
                    help="what runs the query encoder (default: the backend the build encoded with)")
    sp.add_argument("--device", default="auto", choices=list(DEVICES),
                    help="where dense indexes are searched: exactly with torch on cuda or cpu, or the FAISS indexes "
                         "as built; auto: cuda when there is a GPU, else faiss")
    sp.add_argument("--json", action="store_true")
    sp.add_argument("--rerank", default=None, help="cross-encoder directory (from `hiera train-reranker`)")
    sp.add_argument("--rerank-depth", type=int, default=20, help="how many results the reranker rescores")
    sp.add_argument("--explain", action="store_true", help="print the trace (every step, e.g. linking's) as an indented tree")
    sp.add_argument("--decomposer-url", default=None, metavar="URL",
                    help="linking: decompose the question with this OpenAI-compatible chat-completions endpoint "
                    "(off by default; falls back to the rules decomposer, with a warning, when it fails)")

    sp = add("methods", cmd_methods, "list every retrieval method with its parameters and requirements")
    sp.add_argument("--json", action="store_true")

    for register in _extra_commands():
        register(add)
    return p


def _extra_commands() -> list[Callable]:
    """Sub-commands owned by other modules (eval, serve, demo, train, sets, check, answer)."""
    out = []
    for mod in (
        "hiera.eval.cli", "hiera.train.cli", "hiera.serve.cli", "hiera.demo", "hiera.sets.cli", "hiera.check",
        "hiera.read.cli",
    ):
        try:
            module = __import__(mod, fromlist=["register"])
        except ModuleNotFoundError as e:
            if e.name != mod:
                raise
            continue
        out.append(module.register)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    from hiera.models import passive_threads

    passive_threads()  # before torch or FAISS loads (lazily, in the handlers)
    parser = build_parser()
    args = parser.parse_args(argv)
    debug = args.debug or os.environ.get("HIERA_DEBUG") == "1"
    if getattr(args, "trust_pickle", False):
        from hiera.models import TRUST_ENV

        os.environ[TRUST_ENV] = "1"  # every model load of this run (Encoder, Reranker, trainers) reads it
    try:
        return args.handler(args)
    except HieraError as e:
        if debug:
            raise
        print(f"hiera: error: {e}", file=sys.stderr)
        return 2
    except sqlite3.DatabaseError as e:  # a damaged corpus store or embedding cache: say so, in one line
        if debug:
            raise
        print(f"hiera: error: a SQLite database is damaged or unreadable ({e}); run `hiera check DIR`", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("hiera: interrupted (work done so far is kept in the cache; rerun to resume)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
