"""``hiera search`` (one query, any method, ``--explain``) and ``hiera methods`` (the registry)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hiera.cli.common import AddCommand, add_device_option, once_more_if_changed, print_json
from hiera.spec import add_set_option

if TYPE_CHECKING:
    from hiera.results import TraceStep

RETRIEVER_FLAGS = ("--retriever", "-r")


def start_early(argv: Sequence[str]) -> Any:
    """The spaCy model of a ``search`` whose method loads spaCy, started before the parser is even built.

    A cold ``hiera search -r linking`` waits on spaCy's load in the child
    process (:meth:`SpacyModel.beside`), so the child starts at the first
    moment: building the whole parser imports ≈ 0.2 s of modules for other
    commands' choices. A misread costs nothing: the real parser decides, and
    :func:`cmd_search` stops a model it does not use.
    """
    if not argv or argv[0] != "search":
        return None
    peek = argparse.ArgumentParser(add_help=False)
    peek.add_argument(*RETRIEVER_FLAGS, dest="retriever", default="dhr")
    known, _ = peek.parse_known_args(list(argv[1:]))
    return _spacy_for(known.retriever)


def _loads_spacy(method: str) -> bool:
    from hiera.spec import METHODS

    return method in METHODS and "spacy" in METHODS[method].loads


def _spacy_for(method: str) -> Any:
    if not _loads_spacy(method):
        return None
    from hiera.link.nlp import SpacyModel

    return SpacyModel.beside()  # spaCy loads in a child while this process opens the build


def cmd_search(args: argparse.Namespace) -> int:
    nlp = vars(args).pop("early_spacy", None)
    if nlp is not None and not _loads_spacy(args.retriever):  # the peek misread the method
        nlp.close()
        nlp = None
    if nlp is None:
        nlp = _spacy_for(args.retriever)
    try:
        return _search(args, nlp)
    finally:
        if nlp is not None:
            nlp.close()


def _search(args: argparse.Namespace, nlp: Any) -> int:
    from hiera.builds import open_collection
    from hiera.retrieve import get_retriever
    from hiera.spec import parse_assignments

    params = parse_assignments(args.set, [args.retriever])[args.retriever]
    if args.decomposer_url:  # the linking pipeline's model decomposer (an OpenAI-compatible endpoint)
        params.update(parse_assignments(["decomposer=endpoint", f"decomposer_url={args.decomposer_url}"],
                                        [args.retriever])[args.retriever])

    def searched() -> Any:
        col = open_collection(args.index, doc_encoder=args.doc_encoder, passage_encoder=args.passage_encoder,
                              backend=args.backend, device=args.device, dense_search=args.dense_search)
        if nlp is not None:
            from hiera.link.pipeline import linker_for

            linker_for(col, nlp)
        retriever = get_retriever(args.retriever, col)
        if args.rerank:
            from hiera.crossencoder import Reranker
            from hiera.retrieve.rerank import RerankRetriever

            retriever = RerankRetriever(retriever, Reranker(args.rerank, device=col.placement.device),
                                        depth=args.rerank_depth)
        return retriever.search(args.query, k=args.k, level=args.level, filter=args.filter, **params)

    res = once_more_if_changed(searched)
    if args.json:
        print_json(res.to_dict())
        return 0
    timings, where = trace_lines(res.trace)
    print(f"{res.retriever} · {res.level} · {len(res)} results · {timings}")
    if where:
        print(where)
    print("params: " + ", ".join(f"{k}={v}" for k, v in res.params.items()))
    members = res.answer_set
    if members is not None:  # a set query: which hits are the answer, and the sentence that says so
        parse = next((s.detail for s in res.trace if s.name == "parse"), {})
        expr = parse.get("expression")
        print(f"answer set: {len(members)} member{'s' if len(members) != 1 else ''}" + (f" of {expr}" if expr else ""))
        if parse.get("fallback_from"):  # the parser asked for failed (its first note says why): here, not only in --json
            print(f"note: {parse['notes'][0]}")
    for h in res:
        mark = "" if members is None else ("  ∈ answer set" if h.doc_id in members else "  (not a member)")
        print(f"\n{h.rank:>3}. {h.breadcrumb()}    [{h.score:.4f}]{mark}")
        print(f"     {h.reason()}")
        body = h.text
        if h.passage_id is None and body.startswith(h.title + "\n"):  # a document's summary: its title is above
            body = body[len(h.title) + 1:]
        text = " ".join(body.split())  # one line, whatever newlines the text holds
        print(f"     {text if len(text) <= 300 else text[:297] + '...'}")
        for constraint, sentence in (h.support or {}).items():
            print(f"     ✓ {constraint}: {' '.join(sentence.split())}")
    if args.explain:
        from hiera.retrieve.explain import trace_tree

        print("\n" + trace_tree(res))
    return 0


def trace_lines(trace: Sequence[TraceStep]) -> tuple[str, str]:
    """A trace as the terminal shows it: the timed steps on one line, and where the search ran (or "")."""
    timings = ", ".join(f"{s.name} {s.ms:.1f} ms" for s in trace if s.name != "answered-by")
    where = next((s.detail for s in trace if s.name == "answered-by"), None)
    if not where:
        return timings, ""
    how = f"{where['dense_search']} dense search" if "dense_search" in where else "BM25"
    stage = f", passage stage {where['passage_stage']}" if "passage_stage" in where else ""
    return timings, f"answered by: {how} on {where['device']}{stage}"


def cmd_methods(args: argparse.Namespace) -> int:
    from hiera.spec import METHODS, READERS, methods_json

    if args.json:
        print_json(methods_json())
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


def register(add: AddCommand) -> None:
    from hiera.backends import BACKENDS
    from hiera.spec import MAX_K, method_names

    sp = add("search", cmd_search, "search a collection")
    sp.add_argument("index")
    sp.add_argument("query")
    sp.add_argument(*RETRIEVER_FLAGS, default="dhr", choices=method_names())
    sp.add_argument("--k", "-k", type=int, default=10, help=f"number of hits (1 to {MAX_K})")
    sp.add_argument("--level", choices=["passage", "doc"], default=None)
    sp.add_argument("--filter", default=None, metavar="EXPR",
                    help="search only what EXPR allows, e.g. \"source = wikipedia and year >= 2019\" or "
                         "\"section prefix History\" (docs/FILTERS.md; `hiera stats` lists the fields)")
    add_set_option(sp, "a parameter of the retriever for this search, e.g. lam=0.5")
    sp.add_argument("--doc-encoder", default=None, help="refuse to search unless the index used this model")
    sp.add_argument("--passage-encoder", default=None)
    sp.add_argument("--backend", default=None, choices=list(BACKENDS),
                    help="what runs the query encoder (default: the backend the build encoded with)")
    add_device_option(sp, search=True)
    sp.add_argument("--json", action="store_true")
    sp.add_argument("--rerank", default=None, help="cross-encoder directory (from `hiera train-reranker`)")
    sp.add_argument("--rerank-depth", type=int, default=20, help="how many results the reranker rescores")
    sp.add_argument("--explain", action="store_true", help="print the trace (every step, e.g. linking's) as an indented tree")
    sp.add_argument("--decomposer-url", default=None, metavar="URL",
                    help="linking: decompose the question with this OpenAI-compatible chat-completions endpoint "
                    "(off by default; falls back to the rules decomposer, with a warning, when it fails)")

    sp = add("methods", cmd_methods, "list every retrieval method with its parameters and requirements")
    sp.add_argument("--json", action="store_true")
