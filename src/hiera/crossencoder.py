"""A trained cross-encoder with its calibrated threshold: (question, text) → relevance probability.

The model below every method that scores pairs: the rerank stage after any
retriever (:class:`hiera.retrieve.rerank.RerankRetriever`), the linking
pipeline's fine ranking, and the set classifier (:mod:`hiera.sets.classifier`)
all load a :class:`Reranker`. It knows nothing of retrievers; its trainer is
:mod:`hiera.train.reranker`. The calibrated threshold (from ``hiera
train-reranker``) tells which pairs the model calls relevant.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hiera.encode import model_fingerprint, resolve_model_path
from hiera.errors import HieraError
from hiera.io import loads_json
from hiera.models import LOCAL_ONLY, check_weights, quiet_transformers, resolve_device
from hiera.results import Hit
from hiera.schema import RERANKER_META, SchemaError, validate

META_FILE = "hiera-reranker.json"
MAX_DEPTH = 1000


def _check_scoring_head(path: Path) -> None:
    """Refuse a directory whose model has no trained scoring head (a sentence encoder, a reader): loaded as a
    cross-encoder it would get a freshly initialised head, and rerank at random, differently on every run."""
    try:
        arch = loads_json((path / "config.json").read_text(encoding="utf-8")).get("architectures") or []
    except FileNotFoundError:
        raise HieraError(f"{path} has no config.json: not a model directory") from None
    except (UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        raise HieraError(f"{path}/config.json is not a model configuration") from None
    if not any(str(a).endswith("ForSequenceClassification") for a in arch):
        raise HieraError(f"{path} is not a cross-encoder (its model is {', '.join(map(str, arch)) or 'unnamed'}, "
                         "without a trained scoring head); give a directory made by `hiera train-reranker`")


class Reranker:
    """A trained cross-encoder plus its calibrated relevance threshold."""

    def __init__(
        self, model: str | Path, *, batch_size: int = 32, trust_pickle: bool | None = None, device: str | None = "auto"
    ) -> None:
        """``device``: ``auto`` (a GPU when torch sees one), ``cpu`` or ``cuda``; on a GPU it runs in float16."""
        self.device = resolve_device(device)
        self.path = resolve_model_path(model)
        check_weights(self.path, trust_pickle)
        _check_scoring_head(self.path)
        meta_path = self.path / META_FILE
        self.meta: dict[str, Any] = {}
        if meta_path.exists():
            try:
                self.meta = loads_json(meta_path.read_text(encoding="utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise HieraError(f"{meta_path} is corrupt ({getattr(e, 'msg', None) or e.reason})") from None
            try:
                validate(self.meta, RERANKER_META)
            except SchemaError as e:
                raise HieraError(f"{meta_path}: {e}") from None
        self.threshold = float(self.meta.get("threshold", 0.5))
        # the cross-encoder's share of a reranked score (1: its probability alone); calibrated by train-reranker
        self.weight = float(self.meta.get("weight", 1.0))
        from sentence_transformers import CrossEncoder

        try:
            with quiet_transformers():
                self.model = CrossEncoder(str(self.path), device=self.device, **LOCAL_ONLY)
            if self.device == "cuda":
                self.model.half()
        except Exception as e:
            raise HieraError(f"cannot load a cross-encoder from {self.path}: {e}") from None
        if int(getattr(self.model, "num_labels", 1)) != 1:
            raise HieraError(f"{self.path} has {self.model.num_labels} outputs; a reranker needs exactly one")
        self.name = self.path.name
        self.fingerprint = model_fingerprint(self.path)
        self.batch_size = batch_size
        self._lock = threading.Lock()  # the fast tokenizer is not thread-safe (see Encoder)

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """Relevance probabilities of ``texts`` for ``query``."""
        if not texts:
            return np.zeros(0, dtype=np.float32)
        with self._lock:
            probs = self.model.predict(
                [(query, t) for t in texts], batch_size=self.batch_size, show_progress_bar=False
            )
        return np.asarray(probs, dtype=np.float32).reshape(-1)

    def combine(self, probs: np.ndarray, base: np.ndarray) -> np.ndarray:
        """The reranked score: ``weight · probability + (1 − weight) · base score`` (base min-max over the list).

        A cross-encoder trained in a CPU budget is a useful but imperfect
        judge; the first-stage score it overrules still carries evidence (a
        tuned hybrid DHR is right at top-1 two times in three on SQuAD), so the
        two are interpolated, with the weight calibrated on held-out questions
        (``hiera train-reranker``). Weight 1 is the cross-encoder alone.
        """
        probs = np.asarray(probs, dtype=np.float64)
        if self.weight >= 1.0 or len(probs) == 0:
            return probs.astype(np.float32)
        base = np.asarray(base, dtype=np.float64)
        span = float(base.max() - base.min())
        norm = (base - base.min()) / span if span > 0 else np.ones_like(base)
        return (self.weight * probs + (1.0 - self.weight) * norm).astype(np.float32)


def hit_input(hit: Hit, sep: str = ", ") -> str:
    """The text a reranker sees for a hit: the same titled text the passage encoder sees."""
    return f"{sep.join((hit.title, *hit.section_path))}\n{hit.text}"
