"""``hiera build``: every index of a collection, local or sharded (``--shards N``, ``--engine ray``)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from hiera.cli.common import AddCommand, add_device_option, log, log_unless, positive_int
from hiera.errors import BadInputError, HieraError
from hiera.spec import add_set_option


def _build_size(build_dir: Path) -> int:
    """Bytes of every file of a build (shards' included); a file hard-linked from another build counts too."""
    return sum(p.stat().st_size for p in build_dir.rglob("*") if p.is_file())


def _human(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


def _compact(args: argparse.Namespace) -> int:
    """``--compact``: the live build rewritten without its dead rows and delta, with its own options, vectors reused."""
    from hiera.builds import build_collection
    from hiera.corpus.store import CorpusStore
    from hiera.index.build import BuildOptions
    from hiera.index.manifest import Manifest
    from hiera.index.publish import live_build_dir

    root = Path(args.index)
    given = [flag for dest, (flag, default) in getattr(args, "compact_refuses", {}).items()
             if getattr(args, dest, default) != default]
    if given:
        raise BadInputError(f"--compact keeps the live build's options: drop {', '.join(given)} "
                            "(or build without --compact to change them)")
    CorpusStore(root)  # no collection: refused in one line
    live = live_build_dir(root)
    if live is None:
        raise HieraError(f"{root} has no index to compact; run `hiera build {root}`")
    old = Manifest.read(live)
    before = _build_size(live)
    opts = BuildOptions.from_manifest(old)
    opts.device, opts.progress = args.device, not args.quiet
    t = time.perf_counter()
    m = build_collection(root, opts, log=log_unless(args.quiet))
    dead = (old.updates or {}).get("dead", {})
    delta = (old.updates or {}).get("delta", {})
    after = live_build_dir(root)
    size = f"{_human(before)} → {_human(_build_size(after)) if after is not None else '?'}"
    log(f"compacted {root}: removed {int(dead.get('documents', 0))} dead documents ({int(dead.get('passages', 0))} "
        f"passages), merged a delta of {int(delta.get('documents', 0))} documents; {m.documents} documents, "
        f"{m.passages} passages; build size {size} in {time.perf_counter() - t:.1f}s")
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    if args.compact:
        return _compact(args)
    from hiera.builds import build_collection
    from hiera.index.bm25 import Bm25Config
    from hiera.index.build import BuildOptions
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
        profile=args.profile,
        bm25_config=Bm25Config(k1=args.bm25_k1, b=args.bm25_b),
        bm25_doc_text=args.bm25_doc_text,
        batch_size=args.batch_size,
        device=args.device,
        progress=not args.quiet,
        defaults=defaults or None,
        shards=args.shards or 0,
        engine=args.engine,
        ray_address=args.ray_address,
        workers=args.workers,
    )
    t = time.perf_counter()
    m = build_collection(args.index, opts, log=log_unless(args.quiet))
    log(f"built {args.index}: {m.documents} documents, {m.passages} passages in {time.perf_counter() - t:.1f}s")
    return 0


def register(add: AddCommand) -> None:
    from hiera.backends import BACKENDS
    from hiera.encode import DEFAULT_BACKEND, DEFAULT_MODEL
    from hiera.index.profile import COMPRESSED_AT, COMPRESSED_FACTORY, LARGE_AT, LARGE_FACTORY, PROFILES

    sp = add("build", cmd_build, "build BM25 and dense indexes for a collection")
    sp.add_argument("index")
    sp.add_argument("--compact", action="store_true",
                    help="rewrite the live build without its removed and replaced documents, its new text merged in: "
                         "the live build's options are kept (giving another option here is an error), every vector "
                         "reused")
    sp.add_argument("--no-dense", action="store_true", help="BM25 only (no encoding)")
    sp.add_argument("--no-bm25", action="store_true")
    sp.add_argument("--doc-encoder", default=DEFAULT_MODEL, help="model name or local directory")
    sp.add_argument("--passage-encoder", default=DEFAULT_MODEL)
    sp.add_argument("--backend", default=DEFAULT_BACKEND, choices=list(BACKENDS),
                    help="what runs the encoders: torch, or the model exported to ONNX Runtime (int8 too) or OpenVINO; "
                         "default auto: the fastest installed one within 0.5 points of torch's retrieval (onnx-int8 "
                         "where ONNX Runtime is); recorded in the manifest, and searches use it too")
    sp.add_argument("--profile", default="auto", choices=list(PROFILES),
                    help=f"index types and the default method's settings: small (Flat indexes, the hybrid-max document "
                         f"stage over every passage), large ({LARGE_FACTORY} graphs, {COMPRESSED_FACTORY} from "
                         f"{COMPRESSED_AT:,} passages: approximate search, cost grows far slower than passages), auto "
                         f"(large from {LARGE_AT:,} passages); recorded in the manifest. A sharded build (--shards) "
                         f"keeps Flat indexes, whose per-shard results merge exactly; the profile then sets the "
                         f"default method's settings only")
    sp.add_argument("--passage-index", default=None,
                    help="FAISS factory string (Flat, HNSW32, IVF1024,PQ32 …); default: the profile's")
    sp.add_argument("--doc-index", default=None, help="FAISS factory string of the document indexes; default: the profile's")
    sp.add_argument("--bm25-k1", type=float, default=0.9, help="BM25 term-frequency saturation")
    sp.add_argument("--bm25-b", type=float, default=0.4, help="BM25 length normalization")
    sp.add_argument("--bm25-doc-text", choices=["fulltext", "summary"], default="fulltext")
    add_set_option(sp, "default of a method parameter saved with the build, e.g. doc_stage=summary, lam=0.5")
    sp.add_argument("--batch-size", type=int, default=None,
                    help="texts per encoder call (default: 32 on a CPU, 1024 on a GPU)")
    add_device_option(sp)
    sp.add_argument("--shards", type=positive_int, default=None, metavar="N",
                    help="split the index into N shards of contiguous documents (searches return the same results)")
    sp.add_argument("--engine", choices=["local", "ray"], default="local",
                    help="sharded builds: in this process, or as Ray tasks with Ray Data encoding (pip install 'hiera[ray]')")
    sp.add_argument("--ray-address", default=None, metavar="auto|ADDRESS",
                    help="--engine ray: the cluster to use (default: start a local Ray)")
    sp.add_argument("--workers", type=int, default=None, help="--engine ray: encoding actors (default: the cluster's CPUs)")
    # what --compact does not take (it keeps the live build's options): refused when given, never silently dropped
    sp.set_defaults(compact_refuses={a.dest: (a.option_strings[0], a.default) for a in sp._actions
                                     if a.option_strings and a.dest not in {"help", "compact", "device", "quiet"}})
