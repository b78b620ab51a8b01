"""Stream sources through a reader into the store, all-or-nothing.

One ingest call is one store transaction, so a malformed record (without
``skip_bad``) leaves the collection exactly as it was; a collection directory
created by a failed first ingest is removed again. A first ingest writes its
store under another name and renames it into place once committed, so one
killed outright (where no cleanup runs) leaves no collection that looks
valid, only a file the next first ingest clears. The collection's writer
lock (:mod:`hiera.lock`) is held throughout: a second writer is refused.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from tqdm import tqdm

from hiera.corpus.readers import Record, get_reader
from hiera.corpus.store import (
    FIRST_INGEST_FILE,
    STORE_FILE,
    CorpusStore,
    IngestReport,
    clear_first_ingest,
    publish_first_ingest,
    remove_new_collection,
)
from hiera.corpus.tree import PassageRules
from hiera.errors import BadInputError, BadRecordError, HieraError
from hiera.lock import writer_lock


def ingest(
    sources: Sequence[str | Path],
    fmt: str,
    root: str | Path,
    *,
    rules: PassageRules | None = None,
    skip_bad: bool = False,
    progress: bool = True,
    before_commit: Callable[[CorpusStore], None] | None = None,
    duplicates: str = "merge",
) -> IngestReport:
    """Read every source with the ``fmt`` reader and insert/replace its documents.

    ``before_commit(store)`` runs inside the ingest's transaction (see
    :meth:`CorpusStore.ingest`); if it raises, nothing is ingested.
    ``duplicates``: ``merge`` (default), ``keep`` or ``skip`` a document
    another source already holds (:mod:`hiera.corpus.dedup`).
    """
    reader = get_reader(fmt)
    root = Path(root)
    dir_existed = root.exists()
    skipped: list[str] = []
    reading = [", ".join(map(str, sources))]  # the file being read: each document's origin

    def on_bad(err: BadRecordError) -> None:
        if not skip_bad:
            raise err
        skipped.append(str(err))

    def records() -> Iterator[Record]:
        for src in sources:
            reading[0] = str(src)
            n, bad = 0, len(skipped)
            for rec in reader(Path(src), on_bad):
                n += 1
                yield rec
            if n == 0 and len(skipped) == bad:  # parsed, yet nothing in it: the wrong format, or an empty export
                raise BadInputError(f"{src}: no documents in it as --format {fmt}; the collection is unchanged")

    with writer_lock(root, "hiera ingest", create=True):
        created = not (root / STORE_FILE).exists()  # under the lock: another first ingest may have just published
        try:
            if created:  # filled under another name and renamed once committed: a kill leaves no collection
                clear_first_ingest(root)
            store = CorpusStore(root, create=True, file=FIRST_INGEST_FILE if created else STORE_FILE)
            try:
                with tqdm(desc=f"ingest {fmt}", unit="doc", disable=not progress, leave=False) as bar:
                    report = store.ingest(
                        records(), rules=rules, on_bad=on_bad, progress=bar, source=lambda: reading[0],
                        before_commit=(lambda: before_commit(store)) if before_commit is not None else None,
                        duplicates=duplicates,
                    )
            finally:
                store.close()
            if created:
                publish_first_ingest(root)
        except BaseException as e:
            if created:
                remove_new_collection(root, dir_existed=dir_existed)
            if isinstance(e, OSError) and e.filename and Path(e.filename).resolve().parent != root.resolve():
                raise BadInputError(f"{e.filename}: cannot read ({e.strerror}); the collection is unchanged") from None
            if isinstance(e, OSError | sqlite3.OperationalError):  # disk full, file size limit, read-only
                reason = " ".join(str(e).split()) or type(e).__name__
                hint = " (disk full or a file size limit?)" if any(w in reason.lower() for w in ("disk", "full", "too large")) else ""
                raise HieraError(
                    f"cannot write the corpus store of {root}: {reason}{hint}; the collection is unchanged"
                ) from None
            raise
    report.skipped += len(skipped)
    report.skipped_examples = list(itertools.islice(skipped, 5))
    return report
