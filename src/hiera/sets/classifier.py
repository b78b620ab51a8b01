"""The set-query relevance classifier: does a document satisfy one constraint?

A cross-encoder (``hiera train-classifier``, from all-MiniLM-L6-v2) reads
``(constraint, document)`` pairs — the constraint as text ("American
physicists", "painters born in the 19th century"), the document as its title,
a newline and its text (:func:`document_input`) — and gives the probability
that the document belongs to the constraint's set. A directory holds:

``DIR/`` (model files)
    a sentence-transformers ``CrossEncoder`` with one output (safetensors);
``DIR/hiera-reranker.json``
    the training report, in ``hiera train-reranker``'s shape (so the same
    directory also works as ``--rerank DIR``), with a threshold calibrated
    for pair-level F1 on held-out constraints;
``DIR/hiera-sets.json``
    the thresholds ``hiera sets tune`` chose for **set** F1 on validation
    queries (the paper's threshold search), written atomically:
    ``{"threshold": t, "by_role": {"positive": t1, "conjunct": t2, "negative": t3, "query": t4},
    "lexical_weight": {"decomposed": w1, "query": w2}, "lexical_evidence": "lead-coverage", ...}``
    (``w``: the weight of the document's lead coverage of a constraint blended into its probability
    where tuning found that it helps; see :mod:`hiera.sets.tune` and :mod:`hiera.sets.lexical`).

Roles (:func:`hiera.retrieve.sets.roles_of`): a constraint on the right of a
difference is ``negative`` (it removes members), an intersection's side after
the first (its qualifier) ``conjunct``, any other ``positive``; ``query`` is the whole query classified
without decomposition (the baseline). :meth:`Thresholds.for_role`
falls back to the global threshold, then to the calibrated one, then 0.5.

This module is inference: it never imports :mod:`hiera.train`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hiera.errors import HieraError
from hiera.io import write_json_atomic
from hiera.schema import Map, Num, Obj, SchemaError, validate
from hiera.sets.lexical import LEXICAL_EVIDENCE

THRESHOLDS_FILE = "hiera-sets.json"
ROLES = ("positive", "conjunct", "negative", "query")
MAX_DOC_CHARS = 1500  # the model reads max_length tokens of it; longer strings only cost tokenization
DEFAULT_THRESHOLD = 0.5
_THRESHOLDS = Obj({"threshold": Num(min=0, max=1), "by_role": Map(Num(min=0, max=1)), "lexical_weight": Map(Num(min=0, max=1))})


def document_input(title: str, text: str) -> str:
    """What the classifier reads for a document: title, newline, text (cut at :data:`MAX_DOC_CHARS`)."""
    return f"{title}\n{text}"[:MAX_DOC_CHARS]


@dataclass
class Thresholds:
    """A global probability threshold and optional per-role ones (``hiera sets tune``)."""

    threshold: float = DEFAULT_THRESHOLD
    by_role: dict[str, float] = field(default_factory=dict)
    source: str = "default"  # "tuned" (hiera-sets.json), "calibrated" (training's pair F1) or "default"
    meta: dict[str, Any] = field(default_factory=dict)
    # weight of the lexical evidence (lead coverage) blended into the probabilities, per mode ("decomposed", "query"; tuned; absent: 0)
    lexical_weight: dict[str, float] = field(default_factory=dict)

    def evidence_matches(self) -> bool:
        """Whether the lexical weights were tuned with today's lexical evidence (or blend nothing)."""
        return self.meta.get("lexical_evidence") == LEXICAL_EVIDENCE or not any(self.lexical_weight.values())

    def for_role(self, role: str) -> float:
        return float(self.by_role.get(role, self.threshold))

    def to_json(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "by_role": dict(self.by_role), "lexical_weight": dict(self.lexical_weight),
                **self.meta}


def read_thresholds(model_dir: str | Path) -> Thresholds | None:
    """``DIR/hiera-sets.json`` as :class:`Thresholds`, or None when the directory has none."""
    path = Path(model_dir) / THRESHOLDS_FILE
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        validate(data, _THRESHOLDS)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise HieraError(f"{path} is corrupt ({getattr(e, 'msg', None) or e})") from None
    except SchemaError as e:
        raise HieraError(f"{path}: {e}") from None
    unknown = sorted(set(data.get("by_role", {})) - set(ROLES))
    if unknown:
        raise HieraError(f"{path}: unknown role(s) {', '.join(unknown)} (known: {', '.join(ROLES)})")
    meta = {k: v for k, v in data.items() if k not in ("threshold", "by_role", "lexical_weight")}
    return Thresholds(
        float(data.get("threshold", DEFAULT_THRESHOLD)), dict(data.get("by_role", {})), "tuned", meta,
        dict(data.get("lexical_weight", {})),
    )


def write_thresholds(model_dir: str | Path, thresholds: Thresholds) -> Path:
    """Save ``thresholds`` beside the model, atomically (:func:`hiera.sets.tune.thresholds_from` merges old roles)."""
    path = Path(model_dir) / THRESHOLDS_FILE
    data = thresholds.to_json()
    validate(data, _THRESHOLDS)
    write_json_atomic(path, data)
    return path


class SetClassifier:
    """A trained (constraint, document) cross-encoder, its thresholds and a score cache.

    ``score`` is memoized per (constraint, document id): the same constraint
    recurs across queries ("born in the 19th century"), and a threshold search
    re-reads every score many times. The cache holds at most ``cache_size``
    entries (cleared when full).
    """

    def __init__(self, path: str | Path, *, batch_size: int = 64, cache_size: int = 2_000_000) -> None:
        from hiera.crossencoder import Reranker

        self.model = Reranker(path, batch_size=batch_size)
        self.path = self.model.path
        self.name = self.model.name
        self.fingerprint = self.model.fingerprint
        tuned = read_thresholds(self.path)
        if tuned is not None:
            self.thresholds = tuned
        elif "threshold" in self.model.meta:
            self.thresholds = Thresholds(float(self.model.meta["threshold"]), {}, "calibrated")
        else:
            self.thresholds = Thresholds()
        self.cache_size = cache_size
        self._cache: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    def reload_thresholds(self) -> None:
        tuned = read_thresholds(self.path)
        if tuned is not None:
            self.thresholds = tuned

    def score(self, constraint: str, doc_ids: Sequence[str], texts: Sequence[str] | Mapping[str, str]) -> np.ndarray:
        """Probabilities that each document satisfies ``constraint`` (``texts`` aligned with ``doc_ids``, or by id)."""
        out = np.zeros(len(doc_ids), dtype=np.float32)
        todo: list[int] = []
        with self._lock:
            for i, d in enumerate(doc_ids):
                hit = self._cache.get((constraint, d))
                if hit is None:
                    todo.append(i)
                else:
                    out[i] = hit
        if todo:
            get = texts.__getitem__
            inputs = [get(doc_ids[i]) if isinstance(texts, Mapping) else get(i) for i in todo]
            probs = self.model.score(constraint, inputs)
            with self._lock:
                if len(self._cache) + len(todo) > self.cache_size:
                    self._cache.clear()
                for i, p in zip(todo, probs, strict=True):
                    out[i] = float(p)
                    self._cache[(constraint, doc_ids[i])] = float(p)
        return out


__all__ = [
    "DEFAULT_THRESHOLD",
    "ROLES",
    "THRESHOLDS_FILE",
    "SetClassifier",
    "Thresholds",
    "document_input",
    "read_thresholds",
    "write_thresholds",
]
