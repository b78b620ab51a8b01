"""``hiera ingest``, ``hiera add``, ``hiera remove`` and ``hiera stats``: documents into and out of a collection."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hiera.cli.common import AddCommand, add_device_option, log, log_unless, positive_int, print_json
from hiera.errors import HieraError


def _rules(args: argparse.Namespace):
    from hiera.corpus.tree import PassageRules

    if args.max_words is None and args.title_sep is None:
        return None
    return PassageRules(max_words=100 if args.max_words is None else args.max_words, title_sep=args.title_sep if args.title_sep is not None else ", ")


def _report_ingest(report, args: argparse.Namespace) -> None:
    msg = (
        f"ingested {report.documents} documents ({report.replaced} replaced), {report.passages} passages, "
        f"{report.redirects} redirects"
    )
    if report.unchanged:
        msg += f"; {report.unchanged} documents were unchanged and left as they were"
    if report.merged:
        msg += f"; merged {report.merged} documents into the one another source already held"
    if report.duplicates:
        msg += f"; skipped {report.duplicates} documents another source already held"
    if report.repeated:
        ids = list(dict.fromkeys(report.repeated))
        shown = ", ".join(repr(i) for i in ids[:5]) + (", …" if len(ids) > 5 else "")
        n = len(report.repeated)
        msg += (f"; {n} record{'s' if n != 1 else ''} repeated an id given earlier in the same file, and the last "
                f"record of each id was kept: {shown}")
    if args.skip_bad:
        msg += f"; skipped {report.skipped} bad records"
    log(msg)
    for ex in report.skipped_examples:
        log(f"  skipped: {ex}")


def _build_state(root: Path, compact_at: float) -> str:
    """What the live build is after a change: a segment's generation and dead share, or a rewrite."""
    from hiera.index.manifest import Manifest
    from hiera.index.publish import live_build_dir

    build_dir = live_build_dir(root)
    if build_dir is None:
        return "no index"
    m = Manifest.read(build_dir)
    if not m.updates:
        return f"the build was rewritten without dead rows ({m.documents} documents, {m.passages} passages)"
    dead = int(m.updates.get("dead", {}).get("passages", 0))
    return (f"generation {m.updates.get('generation', 0)}, {dead} of {m.passages} passages dead "
            f"(compaction at {compact_at:.0%})")


def _live_build(root: Path, hint: str) -> Path:
    """The live build of the collection at ``root``; a one-line error (nothing created) when it has none."""
    from hiera.corpus.store import CorpusStore
    from hiera.index.publish import live_build_dir

    CorpusStore(root)  # no collection: refused before a lock file is created
    build_dir = live_build_dir(root)
    if build_dir is None:
        raise HieraError(f"{root} has no index yet; {hint}")
    return build_dir


def _ingest_updating(args: argparse.Namespace, command: str, rules: Any = None) -> int:
    """Ingest, and publish the build that serves the new documents inside the ingest's transaction.

    A delta segment and tombstones (:func:`hiera.builds.update_collection`):
    replaced documents are masked, new text is indexed on its own, old vectors
    are reused; past ``--compact-at`` the build is rewritten instead. A failure
    or a kill before the commit leaves the collection exactly as it was
    (documents and index). The writer lock spans the clean-up too: it settles
    the swap's marker, which another writer must not see half-done.
    """
    from hiera.builds import add_documents

    root = Path(args.index)
    report = add_documents(root, args.sources, args.format, rules=rules, skip_bad=args.skip_bad,
                           duplicates=args.duplicates, log=log_unless(args.quiet), device=args.device,
                           progress=not args.quiet, compact_at=args.compact_at, command=command)
    _report_ingest(report, args)
    if report.changed:
        log(f"index updated: {_build_state(root, args.compact_at)}")
    else:
        log("nothing changed: the collection and its index are as they were")
    return 0


def cmd_ingest(args: argparse.Namespace) -> int:
    """Store the documents; a collection with a build gets its build updated in the same transaction."""
    from hiera.corpus.ingest import ingest
    from hiera.corpus.store import STORE_FILE
    from hiera.index.publish import live_build_dir

    root = Path(args.index)
    if not args.no_index and (root / STORE_FILE).is_file() and live_build_dir(root) is not None:
        return _ingest_updating(args, "hiera ingest", rules=_rules(args))
    report = ingest(args.sources, args.format, args.index, rules=_rules(args), skip_bad=args.skip_bad,
                    progress=not args.quiet, duplicates=args.duplicates)
    _report_ingest(report, args)
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    """Ingest into an indexed collection and update its build in one transaction: old vectors are reused."""
    _live_build(Path(args.index), "use `hiera ingest` then `hiera build`")
    return _ingest_updating(args, "hiera add")


def cmd_remove(args: argparse.Namespace) -> int:
    """Remove the named documents and publish the build without them, in one transaction."""
    from hiera.builds import remove_documents, select_documents

    root = Path(args.index)
    _live_build(root, f"remove documents after `hiera build {root}`")
    by_doc = {"ids": args.ids or (), "titles": args.titles or (), "filter": args.filter}
    # --source takes what that source contributed: a merged document keeps its other sources' parts
    ids = select_documents(root, **by_doc) if any(by_doc.values()) or not args.source else []
    of_source = select_documents(root, source=args.source) if args.source else []
    report = remove_documents(root, ids, log=log_unless(args.quiet), device=args.device, compact_at=args.compact_at,
                              progress=not args.quiet, source=args.source, of_source=of_source)
    parts = f" and {report.parts} parts of merged documents" if report.parts else ""
    log(f"removed {report.documents} documents{parts} ({report.passages} passages); "
        f"{_build_state(root, args.compact_at)}")
    return 0


def _updates_stats(m: Any) -> dict[str, Any]:
    """What the live build's changes left in it: live, deleted and superseded documents, the delta, the dead share.

    A build from scratch is generation 0 with nothing dead and no delta.
    """
    u = m.updates or {}
    dead, delta = u.get("dead", {}), u.get("delta", {})
    dead_docs, dead_passages = int(dead.get("documents", 0)), int(dead.get("passages", 0))
    return {
        "generation": int(u.get("generation", 0)),
        "live_documents": m.documents - dead_docs,
        "live_passages": m.passages - dead_passages,
        "deleted": int(dead.get("deleted", 0)),
        "superseded": int(dead.get("superseded", 0)),
        "dead_documents": dead_docs,
        "dead_passages": dead_passages,
        "delta_documents": int(delta.get("documents", 0)),
        "delta_passages": int(delta.get("passages", 0)),
        "dead_share": round(dead_passages / max(1, m.passages), 4),
    }


def cmd_stats(args: argparse.Namespace) -> int:
    from hiera.corpus.store import CorpusStore
    from hiera.index.manifest import Manifest, read_tuned
    from hiera.index.publish import live_build_dir

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
            "profile": m.profile or {"name": "small", "why": "built before profiles existed"},
            "defaults": m.defaults,
            "tuned": read_tuned(build_dir),  # hiera tune's values: in force on top of the defaults
            "updates": _updates_stats(m),
        }
        if m.shards:
            stats["index"]["shards"] = len(m.shards)
        if not stats["index"]["stale"]:
            from hiera.builds import open_collection
            from hiera.index.filters import fields_of

            # what --filter can name: each field with its type, level and how many documents (passages) have it
            with open_collection(Path(args.index)) as col:
                stats["filter_fields"] = fields_of(col)
    if args.json:
        print_json(stats)
    else:
        fields = stats.pop("filter_fields", None)
        updates = stats["index"].pop("updates") if "index" in stats else None
        for k, v in stats.items():
            print(f"{k:>18}: {v}")
        if updates is not None:
            print(f"{'updates':>18}: generation {updates['generation']}; {updates['live_documents']} live documents "
                  f"({updates['live_passages']} passages); dead {updates['dead_documents']} documents "
                  f"({updates['deleted']} deleted, {updates['superseded']} superseded), {updates['dead_passages']} "
                  f"passages, {updates['dead_share']:.1%} of the build; delta {updates['delta_documents']} documents "
                  f"({updates['delta_passages']} passages)")
        if fields is not None:
            print(f"{'filter fields':>18}: " + ", ".join(f"{f['field']} ({f['type']}, {f['level']}, {f['count']})"
                                                       for f in fields))
    return 0


def _duplicates_option(sp: argparse.ArgumentParser) -> None:
    from hiera.corpus.dedup import DUPLICATE_MODES

    sp.add_argument(
        "--duplicates", choices=DUPLICATE_MODES, default="merge",
        help="a document another source already holds (same title up to Wikipedia's first-letter rule and "
        "underscores, or a stored redirect): merge it into that one, which keeps its id and gains a "
        "'From <source>' section with the text it lacked (default), keep both, or skip it",
    )


def _share(text: str) -> float:
    """``--compact-at``'s type: a share in (0, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text}")
    return value


def _change_options(sp: argparse.ArgumentParser) -> None:
    """``--compact-at`` and ``--device``: how a change updates the live build."""
    from hiera.index.segments import COMPACT_AT

    sp.add_argument("--compact-at", type=_share, default=COMPACT_AT, metavar="F",
                    help=f"rewrite the whole build instead of adding a segment once dead and new passages would "
                         f"pass this share of the build's (default {COMPACT_AT})")
    add_device_option(sp)


def register(add: AddCommand) -> None:
    from hiera.corpus.readers import FORMATS

    sp = add("ingest", cmd_ingest, "create or update a collection from source files (and its build, if it has one)")
    sp.add_argument("sources", nargs="+")
    sp.add_argument("--format", "-f", required=True, help=f"one of: {', '.join(sorted(FORMATS))}")
    sp.add_argument("--index", "-i", required=True, help="collection directory")
    sp.add_argument("--skip-bad", action="store_true", help="skip malformed records and count them")
    sp.add_argument("--max-words", type=positive_int, default=None, help="passage length limit (default 100)")
    sp.add_argument("--title-sep", default=None, help='passage title separator (default ", ")')
    sp.add_argument("--no-index", action="store_true",
                    help="store the documents only: a built collection's searches are then refused until "
                         "`hiera build` (by default its build is updated in the same transaction, as `hiera add` does)")
    _duplicates_option(sp)
    _change_options(sp)

    sp = add("add", cmd_add, "add or replace documents of an indexed collection (old vectors are reused)")
    sp.add_argument("index")
    sp.add_argument("sources", nargs="+")
    sp.add_argument("--format", "-f", required=True)
    sp.add_argument("--skip-bad", action="store_true")
    _duplicates_option(sp)
    _change_options(sp)

    sp = add("remove", cmd_remove, "remove documents from an indexed collection (its build is updated, not rebuilt)")
    sp.add_argument("index")
    sp.add_argument("--ids", nargs="+", metavar="ID", help="document ids")
    sp.add_argument("--titles", nargs="+", metavar="TITLE", help="document titles or redirects to them, as Wikipedia compares titles (_ is a space; the first letter's case does not count)")
    sp.add_argument("--source", default=None, metavar="NAME",
                    help="what this source contributed: its documents, and its parts of documents merged with other "
                         "sources (those keep the rest)")
    sp.add_argument("--filter", default=None, metavar="EXPR", help="every document this filter matches (as in search)")
    _change_options(sp)

    sp = add("stats", cmd_stats, "print collection statistics")
    sp.add_argument("index")
    sp.add_argument("--json", action="store_true")
