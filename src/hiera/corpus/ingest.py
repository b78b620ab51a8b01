"""Stream sources through a reader into the store, all-or-nothing.

One ingest call is one store transaction, so a malformed record (without
``skip_bad``) leaves the collection exactly as it was; a collection directory
created by a failed first ingest is removed again.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path

from tqdm import tqdm

from hiera.corpus.readers import Record, get_reader
from hiera.corpus.store import STORE_FILE, CorpusStore, IngestReport, remove_new_collection
from hiera.corpus.tree import PassageRules
from hiera.errors import BadRecordError


def ingest(
    sources: Sequence[str | Path],
    fmt: str,
    root: str | Path,
    *,
    rules: PassageRules | None = None,
    skip_bad: bool = False,
    progress: bool = True,
) -> IngestReport:
    """Read every source with the ``fmt`` reader and insert/replace its documents."""
    reader = get_reader(fmt)
    root = Path(root)
    created = not (root / STORE_FILE).exists()
    dir_existed = root.exists()
    skipped: list[str] = []

    def on_bad(err: BadRecordError) -> None:
        if not skip_bad:
            raise err
        skipped.append(str(err))

    def records() -> Iterator[Record]:
        for src in sources:
            yield from reader(Path(src), on_bad)

    try:
        store = CorpusStore(root, create=True)
        with tqdm(desc=f"ingest {fmt}", unit="doc", disable=not progress, leave=False) as bar:
            report = store.ingest(records(), rules=rules, on_bad=on_bad, progress=bar, source=", ".join(map(str, sources)))
        store.close()
    except BaseException:
        if created:
            remove_new_collection(root, dir_existed=dir_existed)
        raise
    report.skipped += len(skipped)
    report.skipped_examples = list(itertools.islice(skipped, 5))
    return report
