"""Ingest throughput and memory flatness on the Wikipedia dump excerpt.

Reports pages/s and passages/s for reading + splitting + storing the gensim
dump excerpt, and the resident memory after each of 20 consecutive passes of
streaming the same excerpt (the readers must not grow with input size).

    python -m bench.ingest [--passes 20]
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import psutil

from bench.common import Report
from hiera.corpus.ingest import ingest
from hiera.corpus.readers import get_reader
from hiera.corpus.readers.wikipedia_xml import gensim_dump_path
from hiera.corpus.split import split_document
from hiera.corpus.tree import Document


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--passes", type=int, default=20)
    args = ap.parse_args()
    dump = gensim_dump_path()
    proc = psutil.Process()

    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        ing = ingest([dump], "wikipedia-xml", Path(tmp) / "c", progress=False)
        ingest_s = time.perf_counter() - t
    pages = ing.documents + ing.redirects

    reader = get_reader("wikipedia-xml")
    rss = []
    t = time.perf_counter()
    n_docs = n_passages = 0
    for _ in range(args.passes):
        for rec in reader(dump):
            if isinstance(rec, Document):
                n_docs += 1
                n_passages += len(split_document(rec))
        rss.append(proc.memory_info().rss / 2**20)
    stream_s = time.perf_counter() - t
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    report = Report("ingest")
    for row in [
        {"measure": "ingest (read+split+SQLite) pages/s", "value": pages / ingest_s},
        {"measure": "ingest documents/s", "value": ing.documents / ingest_s},
        {"measure": "ingest passages/s", "value": ing.passages / ingest_s},
        {"measure": "documents / redirects / passages", "value": f"{ing.documents} / {ing.redirects} / {ing.passages}"},
        {"measure": f"stream x{args.passes}: documents/s", "value": n_docs / stream_s},
        {"measure": f"stream x{args.passes}: passages/s", "value": n_passages / stream_s},
        {"measure": "RSS after pass 1 / 10 / last (MB)", "value": f"{rss[0]:.0f} / {rss[min(9, len(rss) - 1)]:.0f} / {rss[-1]:.0f}"},
        {"measure": "peak RSS (MB)", "value": peak_mb},
    ]:
        report.add(row, echo=False)
    report.print()
    report.write(
        ingest_seconds=ingest_s,
        pages_per_s=pages / ingest_s,
        passages_per_s=ing.passages / ingest_s,
        documents=ing.documents,
        redirects=ing.redirects,
        passages=ing.passages,
        stream_passes=args.passes,
        rss_mb_per_pass=rss,
        peak_rss_mb=peak_mb,
    )


if __name__ == "__main__":
    main()
