"""SQuAD v1.1 answer normalization and its reader metrics (exact match, token F1), as the official script.

A leaf module: the reader (:mod:`hiera.read`) merges answers that normalize
alike, and the evaluators (:mod:`hiera.eval`) score them; both need the same
normalization, so it lives below both.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = frozenset(string.punctuation)


def squad_normalize(s: str) -> str:
    """Official SQuAD v1.1 ``normalize_answer``.

    Lowercase, drop ASCII punctuation, drop the articles a/an/the, collapse
    whitespace (in that order, as the script does).
    """
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def _f1_one(prediction: str, truth: str) -> float:
    pred = squad_normalize(prediction).split()
    gold = squad_normalize(truth).split()
    same = sum((Counter(pred) & Counter(gold)).values())
    if same == 0:
        return 0.0
    precision = same / len(pred)
    recall = same / len(gold)
    return 2 * precision * recall / (precision + recall)


def exact_match(prediction: str, ground_truths: Sequence[str]) -> float:
    """1.0 when the normalized prediction equals any normalized ground truth.

    No ground truths gives 0.0 (the official script would crash on ``max([])``).
    """
    if isinstance(ground_truths, str):
        ground_truths = [ground_truths]
    p = squad_normalize(prediction)
    return float(any(p == squad_normalize(t) for t in ground_truths))


def f1(prediction: str, ground_truths: Sequence[str]) -> float:
    """Best bag-of-tokens F1 over the ground truths (official SQuAD v1.1)."""
    if isinstance(ground_truths, str):
        ground_truths = [ground_truths]
    return max((_f1_one(prediction, t) for t in ground_truths), default=0.0)
