"""Fault trials: SIGKILL every writing command at random moments, fill the disk, race two writers.

    python -m bench.reliability                      # quick: a few trials of each fault (minutes)
    python -m bench.reliability --trials 20 --dense-trials 20 --writer-trials 10 --fuzz big   # the full counts
    python -m bench.reliability --render bench/out/reliability.json        # rewrite the document from a JSON
    python -m bench.reliability --ray-trials 10 --fuzz none --trials 0 --dense-trials 0 --writer-trials 0  # Ray only

Every trial runs the real ``hiera`` command in a subprocess, on a private copy
of a small synthetic collection (seeded), with the embedding cache kept warm
across trials so that a dense command spends its time where it writes. The
invariant checked after each trial:

* ``hiera check`` finds no error (warnings — leftovers of a killed build, a
  dead lock holder — are allowed: the next writer clears them);
* the collection's *state* — its documents and passages in store order, plus
  the results (ids, scores, parameters) of a fixed set of searches, or the
  refusal a search gets — is exactly the state before the command or exactly
  the state after a clean run of it, never anything else;
* rerunning the killed command succeeds and ends in the clean run's state.

Kills land at a uniformly random time over the whole clean-run duration on
even trials, and at a random time after the command starts writing (a
journal file or a ``builds/*.partial`` directory appears) on odd trials, so
the interesting window is hit often. A kill counts only if it ended the
process (exit by SIGKILL): one that comes after the command exited is retried
with half the delay, then none, and the trial fails if it never lands. ``hiera train`` and ``train-reranker``
write no collection (they publish a model directory by rename) and are not
part of these trials.

Disk full is simulated with ``RLIMIT_FSIZE`` (the process may not grow a
file past the limit; Python ignores SIGXFSZ, so the write fails with EFBIG).
Two writers: a second writer started while the first holds the lock must be
refused at once; after the holder is SIGKILLed, the next writer proceeds. The
holder is frozen (SIGSTOP) once it writes, so that the overlap does not depend
on how fast the machine finishes a small build.

The fuzz rows come from the test suite (``tests/test_fuzz_*.py``), run with
``--fuzz quick|big`` (hypothesis example counts per test: 40 / 400).

``--ray-trials N`` adds the faults of a multi-node Ray cluster
(:mod:`bench.ray_faults`: a worker node killed during a sharded Ray build, a
shard replica killed under load, ``--ray-head-trials`` head restarts), N of the
first two each, as a section of their own.

Writes ``bench/out/reliability.json`` (``--out``) and ``docs/RELIABILITY.md``
(``--doc``; ``--no-doc`` to skip).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import OUT, REPO, Report, write_json

DOC = REPO / "docs" / "RELIABILITY.md"
QUERIES_PER_STATE = 8
UPDATE_FIXTURES = ("remove", "update", "compact")

# -- a seeded synthetic corpus ------------------------------------------------------------------------------
_SYL = ["ka", "lo", "mi", "ren", "tor", "vas", "qui", "del", "sun", "bar", "nel", "pho", "gri", "zen", "mur", "tal"]


def _vocab(rng: random.Random, n: int) -> list[str]:
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(_SYL) for _ in range(rng.randint(2, 3))))
    return sorted(words)


def synthetic_docs(n: int, seed: int, prefix: str = "d", vocab_seed: int = 7) -> list[Any]:
    """``n`` documents with a lead, sections and sub-sections of seeded pseudo-words."""
    from hiera.corpus.tree import Document, Section

    vocab = _vocab(random.Random(vocab_seed), 600)
    rng = random.Random(seed)

    def para(words: int) -> str:
        return " ".join(rng.choice(vocab) for _ in range(words)).capitalize() + "."

    docs = []
    for i in range(n):
        sections = []
        for s in range(rng.randint(1, 3)):
            children = [Section(f"Part {s}.{c}", level=2, paragraphs=[para(rng.randint(20, 90))]) for c in range(rng.randint(0, 2))]
            sections.append(Section(f"Section {s} {rng.choice(vocab)}", paragraphs=[para(rng.randint(20, 140))], children=children))
        docs.append(Document(id=f"{prefix}{i}", title=f"{rng.choice(vocab).title()} {rng.choice(vocab)} {i}",
                             lead=[para(rng.randint(15, 60))], sections=sections))
    return docs


def write_docs(path: Path, docs: list[Any]) -> Path:
    path.write_text("".join(json.dumps(d.to_dict()) + "\n" for d in docs), encoding="utf-8")
    return path


def write_questions(path: Path, docs: list[Any], n: int, seed: int) -> Path:
    """dpr-jsonl questions: a few words of a passage, answered by a word of that passage."""
    rng = random.Random(seed)
    lines = []
    for doc in rng.sample(docs, min(n, len(docs))):
        words = doc.sections[0].paragraphs[0].rstrip(".").split()
        q = " ".join(rng.sample(words, min(6, len(words))))
        lines.append(json.dumps({"question": q, "answer": [rng.choice(words).lower()]}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def queries(docs: list[Any], n: int = QUERIES_PER_STATE, seed: int = 99) -> list[str]:
    rng = random.Random(seed)
    out = []
    for doc in rng.sample(docs, min(n, len(docs))):
        words = " ".join(doc.lead).rstrip(".").split()
        out.append(" ".join(rng.sample(words, min(4, len(words)))))
    return out


# -- the state of a collection ------------------------------------------------------------------------------
class StateProbe:
    """The digest of what a user can observe: stored documents and the answers to fixed searches."""

    def __init__(self, qs: list[str], dense: bool) -> None:
        self.queries = qs
        self.dense = dense
        self.methods = ["bm25", "dhr"] if dense else ["bm25", "bm25-dhr"]
        self._encoder = None
        if dense:
            from hiera.encode import DEFAULT_MODEL, Encoder

            self._encoder = Encoder(DEFAULT_MODEL, use_cache=False)

    def digest(self, root: Path) -> str:
        from hiera.builds import open_collection
        from hiera.corpus.store import CorpusStore
        from hiera.errors import HieraError
        from hiera.retrieve import get_retriever

        h = hashlib.sha256()
        if not (root / "corpus.sqlite").exists():
            return "no collection"
        store = CorpusStore(root)
        for d in store.iter_docs():
            doc = store.get_document(d.id)
            h.update(json.dumps(doc.to_dict() if doc else None, sort_keys=True).encode())
        for _, p in store.iter_passages():
            h.update(f"{p.id}|{p.section_path}|{p.text}".encode())
        store.close()
        try:
            col = open_collection(root)
        except HieraError as e:
            h.update(f"refused: {type(e).__name__}".encode())
            return h.hexdigest()
        if self._encoder is not None and col.has_dense:
            # one model load for the whole run (the fingerprint is the one the manifest checks)
            col.view.__dict__["passage_encoder"] = col.view.__dict__["doc_encoder"] = self._encoder
        for name in self.methods:
            r = get_retriever(name, col)
            for res in r.batch_search(self.queries, k=10):
                h.update(json.dumps(res.params, sort_keys=True, default=str).encode())
                for hit in res.hits:
                    h.update(f"{hit.doc_id}|{hit.passage_id}|{hit.score:.4f}".encode())
        col.store.close()
        return h.hexdigest()


    def returned(self, root: Path, doc_ids: set[str]) -> int:
        """How many hits of the fixed searches (every method of the probe) are documents of ``doc_ids``."""
        from hiera.builds import open_collection
        from hiera.errors import HieraError
        from hiera.retrieve import get_retriever

        if not doc_ids or not (root / "corpus.sqlite").exists():
            return 0
        try:
            col = open_collection(root)
        except HieraError:
            return 0
        if self._encoder is not None and col.has_dense:
            col.view.__dict__["passage_encoder"] = col.view.__dict__["doc_encoder"] = self._encoder
        n = sum(1 for name in self.methods for res in get_retriever(name, col).batch_search(self.queries, k=10)
                for hit in res.hits if hit.doc_id in doc_ids)
        col.store.close()
        return n


# -- fixtures: a collection before the command, and the command ----------------------------------------------
@dataclass
class Fixture:
    name: str
    fault: str  # the row label
    template: Path  # the collection before the command (copied for each trial)
    argv: Callable[[Path], list[str]]
    marker: Callable[[Path], bool] | None
    probe: StateProbe
    before: str = ""
    after: str = ""
    clean_s: float = 0.0
    to_marker_s: float = 0.0
    removed: frozenset[str] = frozenset()  # documents the command removes: no search may return them afterwards
    versions: tuple[int | None, int | None] = (None, None)  # the store's version before and after a clean run


def hiera(*args: str) -> list[str]:
    return [sys.executable, "-m", "hiera", *args]


def python(code: str) -> list[str]:
    """A change made through the library (``hiera.builds``) in a subprocess of its own, run from the repository root."""
    return [sys.executable, "-c", code]


def remove_argv(ids: list[str], compact_at: float | None = None) -> Callable[[Path], list[str]]:
    extra = "" if compact_at is None else f", compact_at={compact_at}"
    # only the ids still held: a rerun after a removal that landed has nothing left to remove (and must not fail)
    return lambda r: python(
        "from hiera.builds import remove_documents; from hiera.corpus.store import CorpusStore; "
        f"left = [i for i in {ids!r} if CorpusStore({str(r)!r}).canonical_id(i) is not None]; "
        f"left and remove_documents({str(r)!r}, left, log=lambda s: None, progress=False{extra})")


def update_argv(path: Path, compact_at: float | None = None) -> Callable[[Path], list[str]]:
    """Re-ingest ``path`` with the build published inside the ingest's transaction (a delta segment)."""
    extra = "" if compact_at is None else f", compact_at={compact_at}"
    return lambda r: python(
        "from hiera.builds import update_collection; from hiera.corpus.ingest import ingest; "
        f"ingest([{str(path)!r}], 'hiera-jsonl', {str(r)!r}, progress=False, "
        f"before_commit=lambda st: update_collection({str(r)!r}, st, log=lambda s: None, progress=False{extra}))")


def store_version(root: Path) -> int | None:
    from hiera.corpus.store import CorpusStore

    if not (root / "corpus.sqlite").exists():
        return None
    store = CorpusStore(root)
    try:
        return store.version
    finally:
        store.close()


def compact_argv() -> Callable[[Path], list[str]]:
    return lambda r: python(f"from pathlib import Path; from bench.updates import compact; compact(Path({str(r)!r}))")


def revised(docs: list[Any]) -> list[Any]:
    """``docs`` with one section changed each: a sentence appended to its first paragraph."""
    out = []
    for d in docs:
        d = type(d).from_dict(d.to_dict())
        d.sections[0].paragraphs[0] += f" Revised text for {d.id} talvas."
        out.append(d)
    return out


def journal_marker(root: Path) -> bool:
    return (root / "corpus.sqlite-journal").exists()


def partial_marker(root: Path) -> bool:
    b = root / "builds"
    return b.is_dir() and any(p.name.endswith(".partial") for p in b.iterdir())


def run_env(cache: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(HIERA_CACHE_DIR=str(cache), OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1", TOKENIZERS_PARALLELISM="false")
    return env


def ingest_and_build(root: Path, docs_path: Path, dense: bool, cache: Path, extra: tuple[str, ...] = ()) -> None:
    env = run_env(cache)
    subprocess.run(hiera("ingest", str(docs_path), "--format", "hiera-jsonl", "--index", str(root), "-q"), env=env, check=True)
    build = hiera("build", str(root), "-q", *extra) + ([] if dense else ["--no-dense"])
    subprocess.run(build, env=env, check=True)


def make_fixtures(work: Path, n_docs: int, n_dense_docs: int, seed: int, with_dense: bool) -> list[Fixture]:
    cache = work / "cache"
    data = work / "data"
    data.mkdir(parents=True, exist_ok=True)
    base = synthetic_docs(n_docs, seed)
    extra = synthetic_docs(n_docs // 3, seed + 1, prefix="x") + synthetic_docs(n_docs // 10, seed + 2)[: n_docs // 10]
    a = write_docs(data / "a.jsonl", base)
    b = write_docs(data / "b.jsonl", extra)  # new documents and replacements of existing ones
    probe = StateProbe(queries(base + extra), dense=False)
    fixtures = []
    t = work / "templates"
    bm25 = t / "bm25"
    if not bm25.exists():
        ingest_and_build(bm25, a, dense=False, cache=cache)
    fixtures += [
        Fixture("ingest", "SIGKILL `hiera ingest` (new + replaced documents)", bm25,
                lambda r: hiera("ingest", str(b), "--format", "hiera-jsonl", "--index", str(r), "-q"), journal_marker, probe),
        Fixture("add", "SIGKILL `hiera add` (BM25 build)", bm25,
                lambda r: hiera("add", str(r), str(b), "--format", "hiera-jsonl", "-q"), journal_marker, probe),
        Fixture("build", "SIGKILL `hiera build` (BM25, other parameters)", bm25,
                lambda r: hiera("build", str(r), "--no-dense", "--bm25-k1", "1.5", "--bm25-b", "0.6", "-q"), partial_marker, probe),
    ]
    # a living collection: removals, re-ingested documents and compaction of a segmented build
    rng = random.Random(seed + 5)
    gone = sorted(d.id for d in rng.sample(base, max(2, n_docs // 10)))
    kept = [d for d in base if d.id not in set(gone)]
    changed = write_docs(data / "changed.jsonl", revised(rng.sample(kept, max(2, n_docs // 10))))
    segmented = t / "segmented"
    if not segmented.exists():
        shutil.copytree(bm25, segmented, symlinks=True)
        subprocess.run(remove_argv(gone, compact_at=1.0)(segmented), env=run_env(cache), check=True)
        subprocess.run(update_argv(changed, compact_at=1.0)(segmented), env=run_env(cache), check=True)
    fixtures += [
        Fixture("remove", "SIGKILL a removal (`hiera.builds.remove_documents`, 10% of the documents)", bm25,
                remove_argv(gone, compact_at=1.0), journal_marker, probe, removed=frozenset(gone)),
        Fixture("update", "SIGKILL an update (re-ingest, delta segment published in the transaction)", bm25,
                update_argv(changed), journal_marker, probe),
        Fixture("compact", "SIGKILL a compaction (segmented build rewritten in a store transaction)", segmented,
                compact_argv(), partial_marker, probe, removed=frozenset(gone)),
    ]
    if with_dense:
        dbase = synthetic_docs(n_dense_docs, seed + 3, prefix="v")
        dextra = synthetic_docs(max(2, n_dense_docs // 4), seed + 4, prefix="w")
        da = write_docs(data / "dense-a.jsonl", dbase)
        db = write_docs(data / "dense-b.jsonl", dextra)
        qs = write_questions(data / "questions.jsonl", dbase, 16, seed)
        dprobe = StateProbe(queries(dbase + dextra), dense=True)
        dense = t / "dense"
        if not dense.exists():
            ingest_and_build(dense, da, dense=True, cache=cache)
        fixtures += [
            Fixture("add-dense", "SIGKILL `hiera add` (dense + BM25 build)", dense,
                    lambda r: hiera("add", str(r), str(db), "--format", "hiera-jsonl", "-q"), journal_marker, dprobe),
            Fixture("build-dense", "SIGKILL `hiera build` (dense + BM25, HNSW)", dense,
                    lambda r: hiera("build", str(r), "--passage-index", "HNSW16", "--bm25-k1", "1.2", "-q"), partial_marker, dprobe),
            Fixture("tune", "SIGKILL `hiera tune` (saves beside the build)", dense,
                    lambda r: hiera("tune", str(r), "--questions", str(qs), "--format", "dpr-jsonl",
                                    "--grid", "top_docs=3,5", "-q"), None, dprobe),
        ]
    return fixtures


# -- one trial ----------------------------------------------------------------------------------------------
@dataclass
class Outcome:
    killed: bool  # the SIGKILL ended the process (it had not exited by itself first)
    state: str  # before | after | OTHER
    check_errors: list[str]
    rerun_ok: bool
    rerun_state: str
    note: str = ""
    missed: bool = False  # a kill trial whose kill never landed: it tested nothing

    @property
    def ok(self) -> bool:
        return (self.state in ("before", "after") and not self.check_errors and self.rerun_ok
                and self.rerun_state == "after" and not self.missed)


def _check_errors(root: Path) -> list[str]:
    from hiera.check import check_collection
    from hiera.errors import HieraError

    if not (root / "corpus.sqlite").exists():
        return []
    try:
        return [f.line() for f in check_collection(root) if f.status == "error"]
    except HieraError as e:
        return [str(e)]


def _classify(fx: Fixture, digest: str) -> str:
    return "before" if digest == fx.before else "after" if digest == fx.after else "OTHER"


def prepare(fx: Fixture, work: Path, env: dict[str, str]) -> None:
    """Digest before; a warm-up run (fills the embedding cache), then a clean run, timed (to the marker too), for the digest after."""
    fx.before = fx.probe.digest(fx.template)
    fx.versions = (store_version(fx.template), None)
    warm = fresh_copy(fx, work, "warm")
    subprocess.run(fx.argv(warm), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    shutil.rmtree(warm, ignore_errors=True)
    root = fresh_copy(fx, work, "clean")
    t0 = time.perf_counter()
    proc = subprocess.Popen(fx.argv(root), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen = None
    while proc.poll() is None:
        if seen is None and fx.marker is not None and fx.marker(root):
            seen = time.perf_counter() - t0
        time.sleep(0.002)
    err = proc.stderr.read() if proc.stderr else ""
    if proc.returncode != 0:
        raise SystemExit(f"the clean run of {fx.name} failed ({proc.returncode}): {err}")
    fx.clean_s = time.perf_counter() - t0
    fx.to_marker_s = seen if seen is not None else 0.0
    fx.after = fx.probe.digest(root)
    fx.versions = (fx.versions[0], store_version(root))
    if fx.after == fx.before:
        raise SystemExit(f"{fx.name}: the command does not change the observable state; the trial would prove nothing")
    shutil.rmtree(root)


def fresh_copy(fx: Fixture, work: Path, tag: str) -> Path:
    root = work / "trials" / f"{fx.name}-{tag}"
    if root.exists():
        shutil.rmtree(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(fx.template, root, symlinks=True)
    return root


def trial_delay(fx: Fixture, i: int, rng: random.Random) -> tuple[bool, float]:
    """(wait for the marker first?, seconds until the kill): even trials over the whole run, odd ones after the marker."""
    after_marker = fx.marker is not None and i % 2 == 1
    span = max(0.05, fx.clean_s - fx.to_marker_s) if after_marker else fx.clean_s
    return after_marker, rng.uniform(0, span)


def kill_trial(fx: Fixture, tag: str, work: Path, env: dict[str, str], after_marker: bool, delay: float) -> Outcome:
    """Run the command on a fresh copy, SIGKILL it ``delay`` s after its start (or after its marker), then judge."""
    root = fresh_copy(fx, work, tag)
    proc = subprocess.Popen(fx.argv(root), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0 = time.perf_counter()
    if after_marker and fx.marker is not None:
        while proc.poll() is None and not fx.marker(root):
            time.sleep(0.001)
        t0 = time.perf_counter()
    while proc.poll() is None and time.perf_counter() - t0 < delay:
        time.sleep(0.001)
    proc.send_signal(signal.SIGKILL)  # a no-op when the command has already exited
    # killed only when the signal ended it: a command that exits between the poll and the kill exits 0, not -9
    killed = proc.wait() == -signal.SIGKILL
    return _after(fx, root, killed, env)


def landed_kill_trial(fx: Fixture, tag: str, work: Path, env: dict[str, str], after_marker: bool, delay: float,
                      attempts: int = 3) -> Outcome:
    """:func:`kill_trial` until its kill lands before the command finishes: half the delay, then none.

    A kill that comes after the command exited proves nothing about crash safety (the state is simply
    "after"), so such a trial is rerun sooner; if the command wins every time, the outcome is ``missed``.
    """
    o = kill_trial(fx, tag, work, env, after_marker, delay)
    for attempt in range(1, attempts):
        if o.killed:
            return o
        delay = delay / 2 if attempt < attempts - 1 else 0.0
        o = kill_trial(fx, f"{tag}.retry{attempt}", work, env, after_marker, delay)
    if not o.killed:
        o.missed = True
        o.note = f"the command finished before the kill in {attempts} tries (the last {delay:.3f}s in): nothing tested"
    return o


def _after(fx: Fixture, root: Path, killed: bool, env: dict[str, str], note: str = "") -> Outcome:
    errors = _check_errors(root)
    state = _classify(fx, fx.probe.digest(root))
    if fx.removed and state == "after" and (n := fx.probe.returned(root, set(fx.removed))):
        errors.append(f"searches returned {n} hits of removed documents")
    if fx.name in UPDATE_FIXTURES and state in ("before", "after"):
        want = fx.versions[0 if state == "before" else 1]
        if (got := store_version(root)) != want:
            errors.append(f"store version {got} in the {state} state, expected {want}")
    rerun = subprocess.run(fx.argv(root), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    rerun_state = _classify(fx, fx.probe.digest(root)) if rerun.returncode == 0 else f"rc {rerun.returncode}"
    out = Outcome(killed, state, errors, rerun.returncode == 0, rerun_state, note or rerun.stderr.strip()[-300:])
    if out.ok:
        shutil.rmtree(root, ignore_errors=True)
    return out


def disk_full_trial(fx: Fixture, limit: int, work: Path, env: dict[str, str]) -> tuple[Outcome, str]:
    """The command with every file capped at ``limit`` bytes: a one-line error, the collection as before."""
    root = fresh_copy(fx, work, f"fsize-{limit}")

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = subprocess.run(fx.argv(root), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=cap)
    lines = proc.stderr.strip().splitlines()
    one_line = proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("hiera: error: ")
    message = lines[-1] if lines else f"(exit {proc.returncode}, no message)"
    out = _after(fx, root, killed=False, env=env)
    if not one_line:
        out.check_errors.append(f"not a one-line error: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
    if proc.returncode == 0:
        out.check_errors.append("the command succeeded under the limit (limit too large for this fixture)")
    return out, message


SECOND_WRITER = (
    "import sys\n"
    "import hiera.cli, hiera.index.build, hiera.corpus.ingest  # imported before the go: the race is on the lock\n"
    "sys.stdin.readline()\n"
    "sys.exit(hiera.cli.main(sys.argv[1:]))\n"
)


def two_writers_trial(fx: Fixture, i: int, work: Path, env: dict[str, str], attempts: int = 5) -> tuple[bool, str]:
    """A build; once it writes it is frozen (SIGSTOP) and a second writer (already started, imports done) goes: refused at once.

    Then the first is SIGKILLed and a third writer must proceed, clearing its stale lock. An attempt where the
    first writer finished before the second reached the lock proves nothing and is retried.
    """
    for attempt in range(attempts):
        root = fresh_copy(fx, work, f"writers-{i}-{attempt}")
        argv = fx.argv(root)
        second = subprocess.Popen([sys.executable, "-c", SECOND_WRITER, *argv[3:]], env=env, stdin=subprocess.PIPE,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(1.5)  # its imports
        first = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while first.poll() is None and not partial_marker(root):
            time.sleep(0.001)
        if first.poll() is None:
            # frozen while it holds the lock: on a fast machine a small build would otherwise finish before the
            # second writer reaches the lock, and the trial would prove nothing
            first.send_signal(signal.SIGSTOP)
        t = time.perf_counter()
        _, err = second.communicate("go\n")
        waited = time.perf_counter() - t
        if first.poll() is None:
            first.send_signal(signal.SIGKILL)
        from hiera.lock import read_lock_info

        killed = first.wait() == -signal.SIGKILL
        # a clean release empties the lock record: one still there means the holder died holding the lock
        # (under load the kill can land after the release, while the process is only exiting)
        stale = read_lock_info(root) is not None
        busy = second.returncode == 2 and "collection is busy (locked by PID" in err and waited < 10
        if not killed and not busy:
            shutil.rmtree(root, ignore_errors=True)
            continue  # no overlap this time
        third = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        cleared = third.returncode == 0 and (not stale or "cleared a stale lock" in third.stderr)
        errors = _check_errors(root)
        state = _classify(fx, fx.probe.digest(root))
        ok = busy and cleared and not errors and state == "after"
        if ok:
            shutil.rmtree(root, ignore_errors=True)
        last = err.strip().splitlines()[-1] if err.strip() else f"exit {second.returncode}"
        why = f" [busy={busy} killed={killed} stale={stale} third exit {third.returncode}: {third.stderr.strip()[-200:]!r}; " \
              f"check errors {errors}; state {state}]"
        return ok, last if ok else last + why
    return False, f"the first writer always finished before the second reached the lock ({attempts} attempts)"


# -- fuzz rows (from the test suite) ------------------------------------------------------------------------
FUZZ_TESTS = "tests/test_fuzz_inputs.py tests/serve/test_fuzz_api.py"


FUZZ_LABELS = {
    "test_reader_survives_mutations": "fuzz: reader `{}` on a mutated real file (truncated, flipped bytes, bad UTF-8, NUL, nesting, huge lines)",
    "test_failed_ingest_changes_nothing": "fuzz: a failed ingest of a mutated `{}` file leaves the store unchanged",
    "test_question_loader_survives_mutations": "fuzz: question loader `{}` on a mutated real file",
    "test_cli_search_arguments": "fuzz: `hiera search` arguments (query, --k, --level, --set NAME=VALUE)",
    "test_search_parameters": "fuzz: /search, random values for every query parameter and alias",
    "test_repeated_and_odd_parameters": "fuzz: /search with repeated, value-less and raw-byte parameters",
    "test_document_ids": "fuzz: /documents/{{id}} with random ids and path tricks",
    "test_hostile_inputs": "hostile input (regression) `{}`: deep nesting, backtracking bait, entity bombs",
}


def run_fuzz(profile: str, work: Path) -> list[dict[str, Any]]:
    """Run the fuzz tests with the given hypothesis profile; one row per test, with the examples it ran."""
    xml = work / "fuzz.xml"
    counts_path = work / "fuzz-examples.json"
    counts_path.unlink(missing_ok=True)
    env = dict(os.environ, HIERA_FUZZ=profile, HIERA_FUZZ_REPORT=str(counts_path), OMP_NUM_THREADS="1",
               HIERA_CACHE_DIR=str(work / "cache"))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}", *FUZZ_TESTS.split()]
    t = time.perf_counter()
    subprocess.run(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(f"fuzz tests ({profile}) in {time.perf_counter() - t:.0f}s", flush=True)
    examples = json.loads(counts_path.read_text()) if counts_path.exists() else {}
    rows = []
    for case in ET.parse(xml).getroot().iter("testcase"):
        name = case.get("name", "")
        base, _, param = name.partition("[")
        if base not in FUZZ_LABELS:
            continue  # seed checks and the "every format is fuzzed" checks are not faults
        failure = case.find("failure") if case.find("failure") is not None else case.find("error")
        skipped = case.find("skipped") is not None
        rows.append({
            "fault": FUZZ_LABELS[base].format(param.rstrip("]")),
            "trials": examples.get(name, 2 if base == "test_hostile_inputs" else "?"),
            "outcome": "skipped" if skipped else ("FAIL" if failure is not None else "pass"),
            "detail": (failure.get("message", "")[:200] if failure is not None else ""),
        })
    return rows


# -- the document --------------------------------------------------------------------------------------------
INTRO = """# Reliability: what hiera survives, tried and counted

Generated by `python -m bench.reliability` from its JSON (`bench/out/reliability.json`);
do not edit by hand. The run's counts are on its "Run" line. The full run — 20 kills
of every command, the fuzz tests at ten times their default example counts (about
half an hour on 2 cores, most of it loading the encoder in the dense trials):

    python -m bench.reliability --trials 20 --dense-trials 20 --writer-trials 10 --fuzz big

or re-render this page from a JSON with `python -m bench.reliability --render FILE`.
The same trials at small scale run in the default test suite
(`tests/test_reliability.py`, `tests/test_fuzz_inputs.py`, `tests/serve/test_fuzz_api.py`);
`HIERA_SLOW=1` adds the full-count run (`test_full_fault_trials`).

Each crash trial runs the real `hiera` command in a subprocess on a private
copy of a small seeded collection and SIGKILLs it at a random moment (even
trials: uniformly over the clean run's duration; odd trials: after the
command starts writing). A kill that lands after the command has exited would
test nothing: such a trial runs again with half the delay, then none, and
fails if the command always finishes first. Afterwards `hiera check` must
find no error, the collection's observable state (stored documents and passages, plus the ids,
scores and parameters of fixed searches, or the refusal a search gets) must be
exactly the state before the command or exactly the state after a clean run,
and a rerun of the command must succeed and reach the clean run's state.

Disk full: the command runs with `RLIMIT_FSIZE` capping every file it writes;
it must exit 2 with a one-line error and leave the collection as it was.
Two writers: a second writer started while the first holds the lock is refused
at once; after the holder is SIGKILLed, the next writer clears its stale lock.
Fuzz rows are the property tests of the suite (`tests/test_fuzz_inputs.py`,
`tests/serve/test_fuzz_api.py`) run with the example counts shown: each
reader and question loader fed truncated, byte-flipped, non-UTF-8, NUL-laden,
deeply nested and huge-line versions of real files must fail with one
`HieraError` line (or count the record as skipped with `--skip-bad`) within a
time bound, and a failed ingest must leave the collection byte-for-byte
unchanged; every `/search` parameter fed random strings and numbers must get
200 or a 4xx with a one-line `detail`, never a 500.

What is not covered: `hiera train` / `train-reranker` write no collection (they
publish a model directory by rename; an interrupted run resumes from its
checkpoints). Power loss is not simulated (SIGKILL keeps the page cache; the
build fsyncs its files, the manifest and the directories before the swap).
"""


LOAD_JSON = OUT / "load.json"  # bench/load.py's last run, shown beside the fault table


def render_load(load: dict[str, Any]) -> list[str]:
    """The server-under-load rows of ``bench/load.py``'s JSON (it is a run of its own: minutes of wall time)."""
    cols = ["clients", "seconds", "good", "good_errors", "bad", "bad_wrong_status", "throughput_rps", "p50_ms",
            "p95_ms", "p99_ms"]
    lines = ["", "## Server under load (`python -m bench.load`)", "",
             f"`hiera serve {load.get('target', '')}` ({load.get('collection', {}).get('passages', '?')} passages), "
             f"every method ({', '.join(load.get('retrievers', []))}) mixed with "
             f"{round(100 * load.get('bad_fraction', 0))}% bad requests "
             f"({', '.join(b['label'] for b in load.get('bad_requests', []))}), each of which must get its own 4xx; "
             f"clients and server share the machine ({load.get('machine', {}).get('cpus', '?')} cores, "
             f"{load.get('machine', {}).get('when', '')}). Latencies are client-side, in ms, of the good requests; "
             "with more clients than cores they are mostly queueing. Outcome: "
             + ("pass (0 errors, 0 wrong statuses)." if load.get("ok") else "FAIL."), ""]
    lines.append("| " + " | ".join(cols) + " |")
    lines.append("|" + "|".join("---" for _ in cols) + "|")
    for level in load.get("levels", {}).values():
        lines.append("| " + " | ".join(str(level["summary"].get(c, "")) for c in cols) + " |")
    return lines


def render_ray(rows: list[dict[str, Any]]) -> list[str]:
    """The multi-node Ray rows (bench/ray_faults.py; docs/SCALING.md explains the cluster)."""
    from bench.ray_faults import render as render_rows

    lines = ["", "## A multi-node Ray cluster (`python -m bench.ray_faults`)", "",
             "A head and two worker nodes on this machine, each its own `ray start` (node id, CPUs, 200 MB object "
             "store, temp dir); the real commands join it with `--ray-address`. Judged as bench/ray_faults.py "
             "describes: a build ends complete or with one line (live build untouched, rerun complete), then "
             "`hiera check` is clean and every search equals the unsharded build's; under load no answer lacks a "
             "shard without saying so and no status but 200 and the documented 503 appears.", ""]
    lines.append(render_rows(rows))
    for r in rows:
        for name in ("error_example", "message"):
            if r.get(name):
                lines.append(f"\n* {r['fault']}: `{r[name]}`")
    return lines


def render(payload: dict[str, Any], load: dict[str, Any] | None = None) -> str:
    rows = payload["rows"]
    cols = ["fault", "trials", "killed", "before", "after", "other", "check errors", "rerun ok", "outcome"]
    lines = [INTRO, f"Run: {payload.get('run', '')}", ""]
    lines.append("| " + " | ".join(cols) + " |")
    lines.append("|" + "|".join("---" for _ in cols) + "|")
    for r in rows:
        lines.append("| " + " | ".join(str(r.get(c, "")) for c in cols) + " |")
    notes = [r for r in rows if r.get("detail")]
    if notes:
        lines += ["", "Messages and notes:", ""]
        lines += [f"* {r['fault']}: {r['detail']}" for r in notes]
    if payload.get("ray"):
        lines += render_ray(payload["ray"])
    if load:
        lines += render_load(load)
    findings = FINDINGS  # what building these trials found and fixed (code history, not a run result)
    if findings:
        lines += ["", "## Found and fixed while building these trials", ""]
        lines += [f"* {f}" for f in findings]
    return "\n".join(lines) + "\n"


FINDINGS = [
    "`hiera add` ingested (and committed) before building, so a kill during its build left the corpus ahead of "
    "the index: searches were refused until a rebuild. It now builds inside the ingest's transaction and swaps the "
    "index in just before committing: a kill leaves the collection as before or as after.",
    "A build killed after its swap left the previous build directory behind for good; every build now removes all "
    "unused builds and orphaned tuning files under the writer lock.",
    "Disk full (or a file size limit) during `hiera build` or `hiera ingest` was a traceback (OSError, "
    "sqlite3.OperationalError, or a FAISS RuntimeError); it is now one line, with the previous index untouched.",
    "The float16 vector matrices were written through a memory map: on a really full disk that is a SIGBUS "
    "(the process dies without a message). They are now written with plain chunked writes, which fail with ENOSPC "
    "and are reported in one line.",
    "Build files were not fsynced before the symlink swap; the manifest step now fsyncs every file (and records "
    "its sha256, which `hiera check` verifies), and the directories are fsynced after the renames.",
    "A damaged corpus.sqlite made `hiera search` print a traceback (sqlite3.DatabaseError); it is one line now, "
    "pointing to `hiera check`.",
    "`hiera add` followed by a rerun gave dense scores differing in the 4th decimal from the first run: FAISS held "
    "the encoder's float32 vectors for appended passages but float16-rounded ones after a rebuild. Vectors are now "
    "rounded to float16 (what the matrix stores) before indexing, so FAISS and the matrices agree and an appended "
    "index equals a fresh one.",
    "Fuzzing: every JSON reader and loader (jsonl, beir, hiera-jsonl, quest-documents, squad, ovos-summaries, "
    "the question loaders, manifests, tuning and reranker files, the lock file) crashed with RecursionError on "
    "deeply nested JSON (`[[[[…`); all JSON is now read through `hiera.io.loads_json`, which reports it as "
    "malformed JSON.",
    "Fuzzing: the markdown reader's inline and heading regexes backtracked quadratically on megabyte lines of "
    "`[[[[`, `*a *a`, `<a<a`, `<!--`, backticks or trailing blanks (minutes for one file); every pattern is now "
    "linear (a span stops at the next delimiter) and comments are stripped in one pass.",
    'A first `hiera ingest` into a new directory killed outright (SIGKILL, where no cleanup runs) left an '
    'empty collection that `hiera check` called OK. A first ingest now fills `.corpus.sqlite.ingesting` and '
    'renames it to `corpus.sqlite` once committed: killed before, the directory holds no collection, and the '
    'next first ingest clears the leftover '
    '(`tests/corpus/test_ingest.py::test_a_first_ingest_killed_outright_leaves_no_collection`).',
]


# -- main ------------------------------------------------------------------------------------------------------
def summarize(fx: Fixture, outcomes: list[Outcome]) -> dict[str, Any]:
    bad = [o for o in outcomes if not o.ok]
    detail = ""
    if bad:
        o = bad[0]
        detail = f"state {o.state}, check {o.check_errors[:1]}, rerun {o.rerun_state}: {o.note}"
    return {
        "fault": fx.fault,
        "trials": len(outcomes),
        "killed": sum(o.killed for o in outcomes),
        "before": sum(o.state == "before" for o in outcomes),
        "after": sum(o.state == "after" for o in outcomes),
        "other": sum(o.state == "OTHER" for o in outcomes),
        "check errors": sum(bool(o.check_errors) for o in outcomes),
        "rerun ok": sum(o.rerun_ok and o.rerun_state == "after" for o in outcomes),
        "outcome": "pass" if not bad else f"FAIL ({len(bad)})",
        "detail": detail,
        "clean_run_s": round(fx.clean_s, 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=4, help="kills per BM25 fixture (ingest, add, build)")
    ap.add_argument("--update-trials", type=int, default=4, help="kills per living-collection fixture (remove, update, compact)")
    ap.add_argument("--dense-trials", type=int, default=2, help="kills per dense fixture (add, build, tune); 0: none")
    ap.add_argument("--docs", type=int, default=300, help="documents in the BM25 collection")
    ap.add_argument("--dense-docs", type=int, default=30, help="documents in the dense collection")
    ap.add_argument("--writer-trials", type=int, default=3)
    ap.add_argument("--fsize", default="4096,65536,262144", help="RLIMIT_FSIZE values (bytes) for the disk-full trials")
    ap.add_argument("--fuzz", choices=["none", "quick", "big"], default="quick")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="", help="comma list of fixtures (ingest, add, build, add-dense, build-dense, tune)")
    ap.add_argument("--work", type=Path, default=None, help="work directory (default: a temporary one)")
    ap.add_argument("--out", type=Path, default=OUT / "reliability.json")
    ap.add_argument("--doc", type=Path, default=DOC)
    ap.add_argument("--no-doc", action="store_true")
    ap.add_argument("--render", type=Path, default=None, help="only rewrite --doc from this JSON")
    ap.add_argument("--ray-trials", type=int, default=0,
                    help="multi-node Ray trials (bench/ray_faults.py): node kills during a build and replica kills "
                         "under load, this many of each; 0: none")
    ap.add_argument("--ray-head-trials", type=int, default=3, help="with --ray-trials: head restarts")
    args = ap.parse_args(argv)
    load = json.loads(LOAD_JSON.read_text()) if LOAD_JSON.exists() else None
    if args.render:
        args.doc.write_text(render(json.loads(args.render.read_text()), load), encoding="utf-8")
        print(f"wrote {args.doc}")
        return 0

    work = args.work or Path(tempfile.mkdtemp(prefix="hiera-reliability-"))
    work.mkdir(parents=True, exist_ok=True)
    from hiera.encode import default_cache_dir

    user_cache = default_cache_dir()  # the Ray serving trials build a real collection: its vectors may be there
    env = run_env(work / "cache")
    os.environ["HIERA_CACHE_DIR"] = str(work / "cache")
    t_all = time.perf_counter()
    fixtures = make_fixtures(work, args.docs, args.dense_docs, args.seed, with_dense=args.dense_trials > 0)
    only = {x.strip() for x in args.only.split(",") if x.strip()}
    rep = Report("reliability")
    rng = random.Random(args.seed)
    all_ok = True
    for fx in fixtures:
        if only and fx.name not in only:
            continue
        prepare(fx, work, env)
        n = args.dense_trials if fx.probe.dense else args.update_trials if fx.name in UPDATE_FIXTURES else args.trials
        outcomes = []
        for i in range(n):
            o = landed_kill_trial(fx, str(i), work, env, *trial_delay(fx, i, rng))
            outcomes.append(o)
            print(f"{fx.name} #{i}: killed={o.killed} state={o.state} check={len(o.check_errors)} rerun={o.rerun_state}", flush=True)
        row = summarize(fx, outcomes)
        all_ok &= row["outcome"] == "pass"
        rep.add(row, echo=f"{fx.fault}: {row['outcome']} ({row['trials']} trials, clean run {fx.clean_s:.1f}s)")

    by_name = {fx.name: fx for fx in fixtures}
    limits = [int(x) for x in args.fsize.split(",") if x.strip()]
    for name, label in (("build", "disk full during `hiera build` (RLIMIT_FSIZE)"),
                        ("build-dense", "disk full during a dense `hiera build` (RLIMIT_FSIZE)"),
                        ("ingest", "disk full during `hiera ingest` (RLIMIT_FSIZE)")):
        fx = by_name.get(name)
        if fx is None or not fx.after or not limits:
            continue
        # only limits below the largest file the command writes can make it fail
        largest = max((f.stat().st_size for f in (fx.template / "index").resolve().rglob("*") if f.is_file()), default=0)
        if name == "ingest":
            largest = max(largest, (fx.template / "corpus.sqlite").stat().st_size)
        usable = [x for x in limits if x < largest]
        if not usable:
            continue
        outcomes, messages = [], []
        for limit in usable:
            o, msg = disk_full_trial(fx, limit, work, env)
            # under the limit the command fails: the state must be the one before, and the rerun completes
            if o.state != "before":
                o.check_errors.append(f"state {o.state} after a failed command")
            outcomes.append(o)
            messages.append(msg)
        row = summarize(fx, outcomes)
        row.update(fault=f"{label}, limits {', '.join(map(str, usable))} B", killed="–",
                   detail=row["detail"] or f"e.g. `{messages[0]}`")
        all_ok &= row["outcome"] == "pass"
        rep.add(row)

    fx = by_name.get("build")
    if fx is not None and fx.after and args.writer_trials:
        results = [two_writers_trial(fx, i, work, env) for i in range(args.writer_trials)]
        ok = sum(r[0] for r in results)
        row = {"fault": "two writers (`hiera build` twice); then the holder SIGKILLed", "trials": len(results),
               "killed": len(results), "outcome": "pass" if ok == len(results) else f"FAIL ({len(results) - ok})",
               "detail": f"second writer: `{results[0][1]}`"}
        all_ok &= ok == len(results)
        rep.add(row)

    if args.fuzz != "none":
        for row in run_fuzz(args.fuzz, work):
            all_ok &= row["outcome"] != "FAIL"
            rep.add(row, echo=False)

    ray_rows: list[dict[str, Any]] = []
    if args.ray_trials:
        from bench import ray_faults

        ray_args = argparse.Namespace(build_trials=args.ray_trials, replica_trials=args.ray_trials, replicas2_trials=0,
                                      head_trials=args.ray_head_trials, docs=80, clients=4, worker_cpus=2,
                                      object_store_mb=200, seed=args.seed, work=work / "ray", serve_cache=user_cache)
        ray_rows = ray_faults.run_all(ray_args)
        all_ok &= all(r["outcome"] == "pass" for r in ray_rows)

    run = (f"trials {args.trials} per BM25 fixture ({args.docs} documents), {args.update_trials} per update fixture, "
           f"{args.dense_trials} per dense fixture "
           f"({args.dense_docs} documents), seed {args.seed}, fuzz profile {args.fuzz}; "
           f"{time.perf_counter() - t_all:.0f}s on {os.cpu_count()} cores")
    rep.print("reliability", ["fault", "trials", "killed", "before", "after", "other", "check errors", "rerun ok", "outcome"])
    path = write_json(args.out, rep.to_dict(run=run, findings=FINDINGS, ok=all_ok, ray=ray_rows))
    print(f"\nwrote {path}")
    if not args.no_doc:
        args.doc.write_text(render(json.loads(path.read_text()), load), encoding="utf-8")
        print(f"wrote {args.doc}")
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
