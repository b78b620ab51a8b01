"""``hiera answer COLL "question" --reader DIR [--retriever NAME --k K --set ...] [--json]``.

Retrieves ``K`` passages, reads them in one batch and prints ranked answers,
each highlighted in its passage with the breadcrumb (``--json``: the same
object as the API's ``/answer``). ``--set`` takes retriever parameters and
reader parameters (``hiera methods`` lists both; ``reader.NAME=VALUE``
targets the reader).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from hiera.cli.common import AddCommand, add_device_option, once_more_if_changed
from hiera.cli.search import trace_lines


def cmd_answer(args: argparse.Namespace) -> int:
    from hiera.builds import open_collection
    from hiera.index.exact import resolve_placement
    from hiera.read.pipeline import answer
    from hiera.read.reader import Reader
    from hiera.retrieve import get_retriever
    from hiera.spec import parse_reader_assignments

    search_params, read_params = parse_reader_assignments(args.set, [args.retriever])
    # the reader first: a wrong directory fails before the indexes load
    placement = resolve_placement(args.device, args.dense_search)  # a bad choice is refused before any model loads
    reader = Reader(args.reader, device=placement.device)

    def answered() -> Any:
        col = open_collection(args.index, device=args.device, dense_search=args.dense_search)
        retriever = get_retriever(args.retriever, col)
        if args.rerank:
            from hiera.crossencoder import Reranker
            from hiera.retrieve.rerank import RerankRetriever

            retriever = RerankRetriever(retriever, Reranker(args.rerank, device=placement.device),
                                        depth=args.rerank_depth)  # as search, eval and serve rerank
        return answer(retriever, reader, args.query, k=args.k,
                      search_params={**search_params[args.retriever], **({"filter": args.filter} if args.filter else {})},
                      read_params=read_params, sep=col.store.title_sep)

    out = once_more_if_changed(answered)
    if args.json:
        print(json.dumps(out.to_dict(), indent=2, ensure_ascii=False))
        return 0
    timings, where = trace_lines(out.trace)
    print(f"{out.results.retriever} → {reader.name} · {len(out.results.hits)} passages read · {timings}")
    if where:
        print(where)
    if not out.answers:
        print("no answer: the passages hold no span the reader accepts")
    texts = {h.passage_id: h.text for h in out.results.hits}
    for i, a in enumerate(out.answers, 1):
        print(f"\n{i:>2}. {a['text']}    [{a['score']:.3f}]")
        print(f"    {a['breadcrumb']}  (passage #{a['passage_rank']}, chars {a['start']}–{a['end']})")
        print(f"    {_highlight(texts.get(a['passage_id'], ''), a['start'], a['end'])}")
        others = [e for e in a["evidence"][1:]]
        if others:
            print(f"    also in: {', '.join(e['breadcrumb'] for e in others[:5])}")
    return 0


def _highlight(text: str, start: int, end: int, width: int = 110) -> str:
    """The answer in ``[[ ]]`` with some context either side."""
    left = max(0, start - width // 2)
    right = min(len(text), end + width // 2)
    pre = ("…" if left else "") + text[left:start]
    post = text[end:right] + ("…" if right < len(text) else "")
    return f"{pre}[[{text[start:end]}]]{post}"


def register(add: AddCommand) -> None:
    from hiera.spec import MAX_K, add_set_option, method_names

    sp = add("answer", cmd_answer, "retrieve passages and read answers from them (a trained reader)")
    sp.add_argument("index")
    sp.add_argument("query")
    sp.add_argument("--reader", required=True, help="reader directory (from `hiera train-reader`)")
    sp.add_argument("--retriever", "-r", default="dhr", choices=method_names())
    sp.add_argument("--k", "-k", type=int, default=10, help=f"passages retrieved and read (1 to {MAX_K})")
    sp.add_argument("--filter", default=None, metavar="EXPR",
                    help="retrieve only what EXPR allows (docs/FILTERS.md)")
    add_set_option(sp, "a retriever or reader parameter, e.g. lam=0.5 or max_answer_tokens=20")
    sp.add_argument("--rerank", default=None, help="cross-encoder directory: rerank before reading")
    sp.add_argument("--rerank-depth", type=int, default=20)
    sp.add_argument("--json", action="store_true")
    add_device_option(sp, search=True)
