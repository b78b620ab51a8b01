"""``hiera ingest``, ``hiera add`` and ``hiera stats``: documents into a collection, and what it holds."""

from __future__ import annotations

import argparse
from pathlib import Path

from hiera.cli.common import AddCommand, add_device_option, log, log_unless, print_json
from hiera.errors import HieraError


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
    if report.merged:
        msg += f"; merged {report.merged} documents into the one another source already held"
    if report.duplicates:
        msg += f"; skipped {report.duplicates} documents another source already held"
    if args.skip_bad:
        msg += f"; skipped {report.skipped} bad records"
    log(msg)
    for ex in report.skipped_examples:
        log(f"  skipped: {ex}")


def cmd_ingest(args: argparse.Namespace) -> int:
    from hiera.corpus.ingest import ingest

    report = ingest(args.sources, args.format, args.index, rules=_rules(args), skip_bad=args.skip_bad,
                    progress=not args.quiet, duplicates=args.duplicates)
    _report_ingest(report, args)
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    """Ingest, then rebuild incrementally: old vectors are copied, not re-encoded.

    The writer lock is held across both steps, so no other writer slips in between.
    """
    from hiera.corpus.store import CorpusStore
    from hiera.index.publish import live_build_dir
    from hiera.lock import writer_lock

    CorpusStore(Path(args.index))  # no collection: refused before a lock file is created
    if live_build_dir(Path(args.index)) is None:
        raise HieraError(f"{args.index} has no index yet; use `hiera ingest` then `hiera build`")
    with writer_lock(Path(args.index), "hiera add"):
        return _add(args)


def _add(args: argparse.Namespace) -> int:
    from hiera.builds import build_collection
    from hiera.corpus.ingest import ingest
    from hiera.index.build import BuildOptions
    from hiera.index.manifest import Manifest
    from hiera.index.publish import live_build_dir, remove_unused_builds
    from hiera.lock import writer_lock

    build_dir = live_build_dir(Path(args.index))
    if build_dir is None:
        raise HieraError(f"{args.index} has no index yet; use `hiera ingest` then `hiera build`")
    old = Manifest.read(build_dir)
    opts = BuildOptions.from_manifest(old)
    opts.progress = not args.quiet
    opts.device = args.device
    progress = log_unless(args.quiet)
    # The new index is built inside the ingest's transaction and swapped in just before it commits:
    # a failure or a kill before that leaves the collection exactly as it was (documents and index).
    # The lock spans the clean-up too: it settles the swap's marker, which another writer must not see half-done.
    with writer_lock(Path(args.index), "hiera add"):
        report = ingest(
            args.sources, args.format, args.index, skip_bad=args.skip_bad, progress=not args.quiet,
            duplicates=args.duplicates,
            before_commit=lambda store: build_collection(args.index, opts, log=progress, store=store),
        )
        remove_unused_builds(Path(args.index))
    _report_ingest(report, args)
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    from hiera.corpus.store import CorpusStore
    from hiera.index.manifest import Manifest
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
        }
        if not stats["index"]["stale"] and not m.shards:
            from hiera.builds import open_collection
            from hiera.index.filters import fields_of

            # what --filter can name: each field with its type, level and how many documents (passages) have it
            stats["filter_fields"] = fields_of(open_collection(Path(args.index)))
    if args.json:
        print_json(stats)
    else:
        fields = stats.pop("filter_fields", None)
        for k, v in stats.items():
            print(f"{k:>18}: {v}")
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


def register(add: AddCommand) -> None:
    from hiera.corpus.readers import FORMATS

    sp = add("ingest", cmd_ingest, "create or update a collection from source files")
    sp.add_argument("sources", nargs="+")
    sp.add_argument("--format", "-f", required=True, help=f"one of: {', '.join(sorted(FORMATS))}")
    sp.add_argument("--index", "-i", required=True, help="collection directory")
    sp.add_argument("--skip-bad", action="store_true", help="skip malformed records and count them")
    sp.add_argument("--max-words", type=int, default=None, help="passage length limit (default 100)")
    sp.add_argument("--title-sep", default=None, help='passage title separator (default ", ")')
    _duplicates_option(sp)

    sp = add("add", cmd_add, "append documents to an indexed collection (old vectors are reused)")
    sp.add_argument("index")
    sp.add_argument("sources", nargs="+")
    sp.add_argument("--format", "-f", required=True)
    sp.add_argument("--skip-bad", action="store_true")
    _duplicates_option(sp)
    add_device_option(sp)

    sp = add("stats", cmd_stats, "print collection statistics")
    sp.add_argument("index")
    sp.add_argument("--json", action="store_true")
