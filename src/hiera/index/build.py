"""The local index writer: every index of a collection in one build directory.

Passage order is the same for every index: documents in store row order, each
document's passages in order. One offset table (``layout/doc_offsets.npy``)
therefore maps a document to its contiguous block of passage rows in the BM25
index, the float16 vector matrix and the FAISS passage index alike.

Vectors of passages and documents that the previous build already holds (same
model fingerprint, same store row id) are copied, not re-encoded; everything
else goes through the encoder's on-disk cache. That is how ``hiera add``
appends documents without re-encoding the old ones, and how an interrupted
build resumes.

The build directory is published by :mod:`hiera.index.publish`; the sharded
writer (:mod:`hiera.shard.build`) shares this module's public pieces (the
corpus in index order, the layout, the option checks, the manifest's
carried defaults). :func:`hiera.builds.build_collection` picks the writer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from hiera.corpus.store import CorpusStore, DocRow
from hiera.encode import DEFAULT_BACKEND, DEFAULT_MODEL, Encoder, resolve_model_path
from hiera.errors import BadInputError, HieraError
from hiera.index.bm25 import Bm25Config, Bm25Index
from hiera.index.dense import add_rows, build_faiss, load_faiss, mean_vectors, save_faiss, save_matrix
from hiera.index.manifest import Manifest, file_sha256, read_tuned
from hiera.index.names import NameBase, name_rows, write_names
from hiera.index.profile import choose, factories
from hiera.index.publish import publish
from hiera.index.segments import open_names, stored_vectors
from hiera.io import load_npy
from hiera.models import resolve_device
from hiera.spec import METHODS, method, resolve_doc_stage
from hiera.text import name_key

DOC_TEXTS = ("summary", "fulltext")
ENCODE_BLOCK = 262_144  # texts per encoder call in a build (see _encode_into)


def _unservable(name: str, params: dict[str, Any], bm25: bool, dense: bool) -> dict[str, str]:
    """The values of ``params`` a build with these indexes cannot serve, each with why: a document stage over an
    index it lacks, or BM25 mixed into the passage stage (``passage_alpha`` > 0) without BM25."""
    out: dict[str, str] = {}
    if "doc_stage" in params:
        try:
            resolve_doc_stage(params["doc_stage"], bm25, dense)
        except BadInputError as e:
            out["doc_stage"] = str(e)
    if not bm25 and params.get("passage_alpha", 0) > 0:
        out["passage_alpha"] = (f"{name}: passage_alpha={params['passage_alpha']} mixes BM25 into the passage stage, "
                                "which a build without BM25 cannot: set passage_alpha=0, or build with BM25")
    return out


def check_defaults(defaults: dict[str, dict] | None, bm25: bool, dense: bool) -> dict[str, dict]:
    """Per-method defaults checked by the registry; a value this build cannot serve is refused (:func:`_unservable`)."""
    out: dict[str, dict] = {}
    for name, params in (defaults or {}).items():
        checked = method(name).check(params)
        for why in _unservable(name, checked, bm25, dense).values():
            raise BadInputError(why)
        out[name] = checked
    return out


def absolute_paths(defaults: dict[str, dict]) -> dict[str, dict]:
    """``defaults`` with every directory-path parameter (a model, a classifier, a reranker) made absolute: the
    manifest keeps them for searches and servers started from any directory, where a relative path would name
    another place or nothing."""
    out: dict[str, dict] = {}
    for name, params in defaults.items():
        spec = method(name)
        out[name] = {}
        for k, v in params.items():
            p = spec.param(k)
            if p is not None and p.type == "path" and isinstance(v, str):
                v = str(Path(v).expanduser().resolve())
                if not Path(v).is_dir():  # saved, it would fail every search made from the build
                    raise BadInputError(f"--set {name}.{k}={params[k]}: no directory at {v}")
            out[name][k] = v
    return out


def servable(defaults: dict[str, dict], bm25: bool, dense: bool) -> dict[str, dict]:
    """``defaults`` without the values a build with these indexes cannot serve (what :func:`check_defaults` refuses):
    carried from an earlier build or a tuning, they give way to the method's own defaults for this build."""
    out: dict[str, dict] = {}
    for name, params in defaults.items():
        dropped = _unservable(name, params, bm25, dense)
        kept = {k: v for k, v in params.items() if k not in dropped}
        if kept:
            out[name] = kept
    return out


@dataclass
class BuildOptions:
    """What ``hiera build`` can be told; every field lands in the manifest."""

    bm25: bool = True
    dense: bool = True
    doc_encoder: str = DEFAULT_MODEL
    passage_encoder: str = DEFAULT_MODEL
    backend: str = DEFAULT_BACKEND  # what runs the encoders (hiera.backends); the manifest records it
    # FAISS factory strings; None: the profile's (Flat for small, HNSW32 for large: hiera.index.profile)
    passage_factory: str | None = None
    doc_factory: str | None = None
    profile: str = "auto"  # "auto" | "small" | "large": index types and the default method's settings follow it
    bm25_config: Bm25Config = field(default_factory=Bm25Config)
    bm25_doc_text: str = "fulltext"
    batch_size: int | None = None  # None: 32 on a CPU, hiera.encode.CUDA_BATCH on a GPU
    device: str = "auto"  # where the encoders run: auto (a GPU when torch sees one), cpu, cuda
    cache_dir: Path | None = None
    defaults: dict[str, dict] | None = None  # method → parameter → value (``hiera build --set``)
    progress: bool = True
    shards: int = 0  # 0: one index; N ≥ 1: N shards of contiguous documents (hiera.shard)
    engine: str = "local"  # sharded builds: "local" (in-process) or "ray" (Ray tasks, Ray Data encoding)
    ray_address: str | None = None  # engine "ray": "auto", an address, or None for a local Ray
    workers: int | None = None  # engine "ray": encoding actors (default: the cluster's CPUs)
    names: bool = True  # the name table the linking pipeline searches (hiera.index.names)
    shards_carried: bool = False  # the shard count is the live build's (from_manifest): at most one per document

    def encoder(self, level: str) -> Encoder:
        """The encoder of ``level`` (``passage`` or ``doc``) as this build runs it: model, batch, cache, backend, device."""
        model = self.passage_encoder if level == "passage" else self.doc_encoder
        return Encoder(model, batch_size=self.batch_size, cache_dir=self.cache_dir, backend=self.backend,
                       device=self.device)

    def encoders(self) -> tuple[Encoder, Encoder]:
        """The passage and document encoders, one object when both levels name the same model."""
        p_enc = self.encoder("passage")
        same = str(Path(self.doc_encoder)) == str(Path(self.passage_encoder))
        return p_enc, (p_enc if same else self.encoder("doc"))

    @classmethod
    def from_manifest(cls, m: Manifest) -> BuildOptions:
        """The options an existing build was made with (``hiera add`` rebuilds with these)."""
        opts = cls(bm25=m.bm25 is not None, dense=bool(m.models))
        if m.bm25:
            opts.bm25_config = Bm25Config.from_dict(m.bm25)
            opts.bm25_doc_text = m.bm25.get("doc_text", "fulltext")
        if m.models:
            opts.doc_encoder = _model_ref(m.models["doc"])
            opts.passage_encoder = _model_ref(m.models["passage"])
            opts.backend = m.backend("passage")
            opts.passage_factory = m.faiss.get("passage", "Flat")  # kept as built: hiera add appends to them
            opts.doc_factory = m.faiss.get("doc", "Flat")
        opts.profile = str(m.profile.get("asked", "small")) if m.profile else "small"
        opts.defaults = {name: dict(params) for name, params in m.defaults.items()}
        opts.shards = len(m.shards)
        opts.shards_carried = bool(m.shards)
        opts.names = bool(m.names)
        return opts


def _model_ref(info: dict[str, Any]) -> str:
    """How a rebuild names a build's encoder: the name it was asked for (a package alias such as
    ``all-MiniLM-L6-v2``) while that name still resolves to the recorded directory, so compaction keeps the
    build's identity in ``hiera stats`` and ``/health``; otherwise the recorded path."""
    name, path = info.get("name"), str(info["path"])
    if name and name != path:
        try:
            if resolve_model_path(name).resolve() == Path(path).resolve():
                return str(name)
        except HieraError:  # a name that no longer resolves here: the directory the build used
            pass
    return path


def checked_options(opts: BuildOptions, store: CorpusStore) -> BuildOptions:
    """``opts`` with its defaults checked; what no writer can build is a one-line error."""
    if opts.bm25_doc_text not in DOC_TEXTS:
        raise BadInputError(f"bm25 document text must be one of {DOC_TEXTS}, got {opts.bm25_doc_text!r}")
    if not (opts.bm25 or opts.dense):
        raise BadInputError("nothing to build: both BM25 and dense indexes are switched off")
    if opts.dense:
        resolve_device(opts.device)  # --device cuda without a GPU: refused before any work
    opts = replace(opts, defaults=absolute_paths(check_defaults(opts.defaults, opts.bm25, opts.dense)))
    passages = int(store.stats()["passages"])
    if passages == 0:
        raise BadInputError(f"{store.root} has no passages to index; ingest documents first")
    prof = choose(opts.profile, passages)
    pf, df = factories(prof, opts.passage_factory, opts.doc_factory, sharded=bool(opts.shards or opts.engine != "local"))
    return replace(opts, passage_factory=pf, doc_factory=df)


@dataclass
class Corpus:
    """The corpus in index order: documents in store order, each one's passages in order."""

    docs: list[DocRow]
    doc_rows: np.ndarray  # store row id of every document position
    passage_rows: np.ndarray  # store row id of every passage position
    offsets: np.ndarray  # document i's passages are offsets[i]:offsets[i + 1]
    passage_texts: list[str]  # titled passage texts: what BM25 indexes and the passage encoder reads
    bm25_doc_texts: list[str]  # title + every passage (fulltext) or the summary, as the options say

    @property
    def summaries(self) -> list[str]:
        return [d.summary for d in self.docs]


def read_corpus(store: CorpusStore, fulltext: bool) -> Corpus:
    docs = list(store.iter_docs())
    doc_pos = {d.id: i for i, d in enumerate(docs)}
    counts = np.zeros(len(docs), dtype=np.int64)
    rows: list[int] = []
    texts: list[str] = []
    full: list[list[str]] = [[d.title] for d in docs] if fulltext else []
    sep = store.title_sep
    for rowid, p in store.iter_passages():
        i = doc_pos[p.doc_id]
        counts[i] += 1
        rows.append(rowid)
        texts.append(p.titled_text(sep))
        if full:
            full[i].append(p.text)
    return Corpus(
        docs=docs,
        doc_rows=np.array([d.rowid for d in docs], dtype=np.int64),
        passage_rows=np.array(rows, dtype=np.int64),
        offsets=np.concatenate(([0], np.cumsum(counts))).astype(np.int64),
        passage_texts=texts,
        bm25_doc_texts=["\n".join(f) for f in full] if full else [d.summary for d in docs],
    )


def write_layout(out: Path, corpus: Corpus) -> None:
    """``layout/``: the passage and document order every index and every result shares."""
    (out / "layout").mkdir()
    np.save(out / "layout" / "passage_rows.npy", corpus.passage_rows)
    np.save(out / "layout" / "doc_rows.npy", corpus.doc_rows)
    np.save(out / "layout" / "doc_offsets.npy", corpus.offsets)


def new_manifest(store: CorpusStore, corpus: Corpus, opts: BuildOptions, previous: Manifest | None,
                 previous_dir: Path | None) -> Manifest:
    """The manifest a new build starts from: the previous build's defaults and tuned values carried over.

    This build's ``--set`` wins; a method this hiera no longer has is dropped, not carried, and so is a carried
    value this build's indexes cannot serve (:func:`servable`: a BM25 document stage or BM25 passage mix on a
    ``--no-bm25`` rebuild).
    """
    rules = store.rules
    manifest = Manifest(corpus_version=store.version, documents=len(corpus.docs), passages=len(corpus.passage_rows),
                        passage_rules=(rules.to_dict() if rules else {}),
                        profile=choose(opts.profile, len(corpus.passage_rows)).to_dict())
    carried = [previous.defaults if previous else {}, read_tuned(previous_dir) if previous_dir is not None else {}]
    for table in (*(servable(t, opts.bm25, opts.dense) for t in carried), opts.defaults or {}):
        for name, params in table.items():
            if name in METHODS:
                manifest.defaults[name] = {**manifest.defaults.get(name, {}), **params}
    check_defaults(manifest.defaults, opts.bm25, opts.dense)  # this build's own --set: refused, never dropped
    return manifest


def write_name_index(out: Path, store: CorpusStore, titles: list[str], opts: BuildOptions,
                     encoder: Encoder | Callable[[], Encoder] | None, previous_dir: Path | None = None,
                     previous: Manifest | None = None, base: NameBase | None = None) -> dict[str, Any]:
    """``names/`` and, with an encoder (the document encoder), the names' vectors and their FAISS index.

    Every writer calls this on the build's top directory: names are global, a
    sharded build keeps one table. A name the previous build already encoded
    with the same model and backend is copied from it (``hiera add`` encodes
    only new names), the rest goes through the embedding cache. ``encoder``
    may be a function that makes it: the writer of a change, which keeps the
    live build's models, then loads no model when every name is known.

    ``base``: ``titles`` are a delta segment's documents and ``out`` its
    directory; their names extend the base's table (its BM25 statistics and
    prior scale) and their vectors get a Flat index (a delta is small).
    """
    rows = name_rows(titles, store.iter_aliases(), store.iter_doc_links(),
                     prior_top=base.prior_top if base is not None else None)
    record = write_names(out, titles, rows, opts.bm25_config if opts.bm25 else None, base)
    record["dense"] = encoder is not None
    if encoder is not None and rows.names:
        (out / "dense").mkdir(exist_ok=True)
        known = encoder if isinstance(encoder, Encoder) else None
        at, mat = _previous_name_vectors(previous_dir, previous, known, rows.names)
        todo = np.flatnonzero(at < 0)
        enc = known if known is not None or not len(todo) else encoder()
        dim = enc.dim if enc is not None else int(mat.shape[1])
        vecs = np.zeros((len(rows.names), dim), dtype=np.float16)
        if mat is not None and (at >= 0).any():
            vecs[at >= 0] = mat[at[at >= 0]]
        if len(todo):
            _encode_into(vecs, enc, rows.names, todo, opts.progress, "encode names")
        save_matrix(out / "dense" / "names.f16.npy", vecs)
        save_faiss(build_faiss(vecs, "Flat" if base is not None else opts.doc_factory), out / "dense" / "names.faiss")
    return record


def _previous_name_vectors(previous_dir: Path | None, previous: Manifest | None, enc: Encoder | None,
                           names: list[str]) -> tuple[np.ndarray, Any]:
    """Each of ``names``' row in the previous build's name vectors (-1: not there), and those vectors, when that
    build encoded names with ``enc``'s model and backend (``None``: the caller keeps the previous build's models).

    A few names (a delta's) are looked up by key in the previous table (a
    binary search each); many are matched through one pass over it.
    """
    missing = np.full(len(names), -1, dtype=np.int64)
    if previous_dir is None or previous is None or not (previous.names or {}).get("dense"):
        return missing, None
    if enc is not None and not _same_vectors(previous, "doc", enc, sharded_ok=True):
        return missing, None
    table, _ = open_names(previous_dir, previous, None)
    if len(names) * 8 < len(table):
        def row(name: str) -> int:
            return next((r for r in table.rows_of(name_key(name)) if table.names[r] == name), -1)

        return np.array([row(n) for n in names], dtype=np.int64), table.vectors()
    where = {table.names[i]: i for i in range(len(table))}
    return np.array([where.get(n, -1) for n in names], dtype=np.int64), table.vectors()


def build(
    root: str | Path,
    options: BuildOptions | None = None,
    log: Callable[[str], None] = print,
    store: CorpusStore | None = None,
) -> Manifest:
    """Build every requested index of the collection at ``root`` into one directory and publish it.

    Holds the collection's writer lock; a failure while writing is a one-line
    error and the live build is untouched (:func:`hiera.index.publish.publish`).
    ``store``: read the corpus through this store (``hiera add``'s open ingest
    transaction). Sharded options are refused: :func:`hiera.builds.build_collection`
    sends those to :mod:`hiera.shard.build`.
    """
    opts = options or BuildOptions()
    if opts.shards or opts.engine != "local":
        raise BadInputError("a sharded build (--shards N, --engine ray) is written by hiera.shard.build; "
                            "use hiera.builds.build_collection")

    def write(out: Path, st: CorpusStore, previous_dir: Path | None, previous: Manifest | None) -> Manifest:
        return _build_into(out, st, checked_options(opts, st), previous_dir, previous, log)

    return publish(root, write, store=store)


def _build_into(
    out: Path,
    store: CorpusStore,
    opts: BuildOptions,
    previous_dir: Path | None,
    previous: Manifest | None,
    log: Callable[[str], None],
) -> Manifest:
    t0 = time.perf_counter()
    corpus = read_corpus(store, opts.bm25_doc_text == "fulltext")
    write_layout(out, corpus)
    docs, doc_rows, prow, offsets = corpus.docs, corpus.doc_rows, corpus.passage_rows, corpus.offsets
    passage_texts = corpus.passage_texts
    log(f"layout: {len(docs)} documents, {len(prow)} passages ({time.perf_counter() - t0:.1f}s)")
    manifest = new_manifest(store, corpus, opts, previous, previous_dir)
    if opts.dense:
        previous_dir, previous = _reusable(previous_dir, previous, log)
    encoders = opts.encoders() if opts.dense else None
    ready = _warm(encoders, log) if encoders is not None else None  # on a GPU, beside BM25

    if opts.bm25:
        t = time.perf_counter()
        tokens = {}
        for name, texts in (("passages", passage_texts), ("docs", corpus.bm25_doc_texts)):
            index = Bm25Index.build(texts, opts.bm25_config)
            index.save(out / f"bm25-{name}")
            tokens[name] = index.tokens
        # the corpus's length in tokens: what a later delta segment's statistics add to (hiera.index.update)
        manifest.bm25 = {**opts.bm25_config.to_dict(), "doc_text": opts.bm25_doc_text, "tokens": tokens}
        log(f"bm25: passages and documents ({opts.bm25_doc_text}) in {time.perf_counter() - t:.1f}s")
    corpus.bm25_doc_texts = []

    if opts.dense:
        t = time.perf_counter()
        (out / "dense").mkdir()
        assert encoders is not None
        p_enc, d_enc = encoders
        if ready is not None:
            ready.result()  # a failed warm-up is this build's error
        with _step(log, "encode passages", len(prow), "passages"):
            pvecs = _vectors(
                p_enc, passage_texts, prow, previous_dir, previous, "passage", opts.progress, "encode passages"
            )
        with _step(log, f"index passages ({opts.passage_factory})", len(prow), "vectors"):
            save_matrix(out / "dense" / "passages.f16.npy", pvecs)
            save_faiss(_faiss_for(pvecs, opts.passage_factory, previous_dir, previous, "passage", prow, p_enc),
                       out / "dense" / "passages.faiss")
        del passage_texts
        corpus.passage_texts = []
        with _step(log, "encode documents", len(doc_rows), "documents"):
            dvecs = _vectors(
                d_enc, corpus.summaries, doc_rows, previous_dir, previous, "doc", opts.progress, "encode documents"
            )
        with _step(log, f"index documents ({opts.doc_factory}, summaries and passage means)", len(doc_rows),
                   "documents"):
            save_matrix(out / "dense" / "docs.f16.npy", dvecs)
            save_faiss(_faiss_for(dvecs, opts.doc_factory, previous_dir, previous, "doc", doc_rows, d_enc),
                       out / "dense" / "docs.faiss")
            # Passage-aggregate document vectors: the normalized mean of a
            # document's passage vectors, free once passages are encoded.
            mean = mean_vectors(pvecs, offsets).astype(np.float16)
            save_matrix(out / "dense" / "docs-mean.f16.npy", mean)
            save_faiss(build_faiss(mean, opts.doc_factory), out / "dense" / "docs-mean.faiss")
        manifest.models = {"passage": p_enc.info.to_dict(), "doc": d_enc.info.to_dict()}
        manifest.faiss = {"passage": opts.passage_factory, "doc": opts.doc_factory}
        log(f"dense: {len(prow)} passages, {len(docs)} documents in {time.perf_counter() - t:.1f}s")
    if opts.names:
        t = time.perf_counter()
        manifest.names = write_name_index(out, store, [d.title for d in corpus.docs], opts,
                                          d_enc if opts.dense else None, previous_dir, previous)
        log(f"names: {manifest.names['rows']} names of {len(docs)} documents in {time.perf_counter() - t:.1f}s")
    manifest.write(out)
    return manifest


def _warm(encoders: tuple[Encoder, Encoder], log: Callable[[str], None]) -> Future | None:
    """Streaming (GPU) encoders made ready while the build does its host work: their tokenizer workers are started
    here, before any other thread exists (they are forked), and the model's first batch runs on a thread beside
    BM25; None when no encoder streams. The encode step then times encoding, and the log says what readying took."""
    streaming = [e for e in dict.fromkeys(encoders) if e.streams]
    if not streaming:
        return None
    for e in streaming:
        e.tokenizer_pool()
    t = time.perf_counter()

    def warm() -> None:
        for e in streaming:
            e.warmup()
        log(f"encoders ready on {streaming[0].device} in {time.perf_counter() - t:.1f}s (beside bm25)")

    pool = ThreadPoolExecutor(1, thread_name_prefix="hiera-warm")
    future = pool.submit(warm)
    pool.shutdown(wait=False)
    return future


def _reusable(previous_dir: Path | None, previous: Manifest | None,
              log: Callable[[str], None]) -> tuple[Path | None, Manifest | None]:
    """The previous build as a source of vectors, FAISS indexes and names, or ``(None, None)`` when a file a
    build copies from it no longer matches the checksum its manifest recorded.

    Copied, a damaged matrix would be written into the new build under a fresh checksum, where nothing could
    find it again; refused, the vectors come from the embedding cache or the encoder. BM25 is rebuilt from the
    text and never copied, so its files are not read here."""
    if previous_dir is None or previous is None:
        return previous_dir, previous
    copied = [f for f in previous.checksums if not f.startswith("bm25-") and "/bm25-" not in f]
    bad = [f for f in copied if not (previous_dir / f).is_file()
           or file_sha256(previous_dir / f) != previous.checksums[f]]
    if not bad:
        return previous_dir, previous
    log(f"the live build's {', '.join(bad[:3])}{' …' if len(bad) > 3 else ''} no longer match the checksums of its "
        "manifest: nothing is copied from it (vectors come from the embedding cache or the encoder)")
    return None, None


@contextmanager
def _step(log: Callable[[str], None], what: str, n: int, unit: str) -> Iterator[None]:
    """Log one step of a build with its time and rate: ``what: N unit in S s (R unit/s)`` (bench.gpu_encode reads it)."""
    t = time.perf_counter()
    yield
    dt = time.perf_counter() - t
    log(f"{what}: {n:,} {unit} in {dt:.1f}s ({n / max(dt, 1e-9):,.0f} {unit}/s)")


def _vectors(
    enc: Encoder,
    texts: list[str],
    rows: np.ndarray,
    previous_dir: Path | None,
    previous: Manifest | None,
    level: str,
    progress: bool,
    desc: str,
) -> np.ndarray:
    """Vectors for ``texts`` as the float16 the matrix stores: copied from the previous build where possible."""
    out = np.zeros((len(texts), enc.dim), dtype=np.float16)
    todo = np.ones(len(texts), dtype=bool)
    if previous_dir is not None and previous is not None and _same_vectors(previous, level, enc):
        old_rows = load_npy(previous_dir / "layout" / f"{level}_rows.npy")
        old_vecs = stored_vectors(previous_dir, previous, level)
        order = np.argsort(old_rows, kind="stable")
        at = np.minimum(np.searchsorted(old_rows[order], rows), max(len(old_rows) - 1, 0))
        hit = np.where(old_rows[order][at] == rows, order[at], -1) if len(old_rows) else np.full(len(rows), -1)
        found = hit >= 0
        if found.any():
            out[found] = old_vecs[hit[found]]
            todo &= ~found
    _encode_into(out, enc, texts, np.flatnonzero(todo), progress, desc)
    return out


def _encode_into(out: np.ndarray, enc: Encoder, texts: list[str], idx: np.ndarray, progress: bool, desc: str) -> None:
    """``out[idx]`` = the vectors of ``texts[idx]``, stored as float16, ``ENCODE_BLOCK`` texts per encoder call.

    Kept as float16, as the matrix stores them, so that FAISS indexes hold
    exactly the matrix's vectors, and an index appended to (hiera add) equals
    one built from scratch on the same documents. Blocks bound memory: the
    cache's answer for 5M passages at once would be every vector twice more,
    in float32.
    """
    blocks = max(1, -(-len(idx) // ENCODE_BLOCK))
    for b, start in enumerate(range(0, len(idx), ENCODE_BLOCK)):
        part = idx[start : start + ENCODE_BLOCK]
        out[part] = enc.encode_document([texts[i] for i in part], progress=progress,
                                        desc=desc if blocks == 1 else f"{desc} ({b + 1}/{blocks})")


def _same_vectors(previous: Manifest, level: str, enc: Encoder, sharded_ok: bool = False) -> bool:
    """Whether the previous build's ``level`` vectors are what ``enc`` would make: same model, same backend.

    A sharded build keeps its passage and document vectors in its shards (not
    at the top, where this writer looks), but its names at the top.
    """
    return ((sharded_ok or not previous.shards) and previous.models.get(level, {}).get("fingerprint") == enc.fingerprint
            and previous.backend(level) == enc.backend)


def _faiss_for(
    vecs: np.ndarray, factory: str, previous_dir: Path | None, previous: Manifest | None, level: str, rows: np.ndarray,
    enc: Encoder,
):
    """Append to the previous FAISS index when its vectors are ``enc``'s and the old rows are a prefix of the new.

    The vector check matters: with another model or backend the previous
    index holds other vectors for the same rows.
    """
    if (previous_dir is not None and previous is not None and _same_vectors(previous, level, enc)
            and previous.faiss.get(level) == factory):
        old_rows = load_npy(previous_dir / "layout" / f"{level}_rows.npy")
        n = len(old_rows)
        if n <= len(rows) and np.array_equal(old_rows, rows[:n]):
            index = load_faiss(previous_dir / "dense" / f"{level}s.faiss", mmap=False)
            if index.ntotal == n:
                add_rows(index, vecs[n:])
                return index
    return build_faiss(vecs, factory)
