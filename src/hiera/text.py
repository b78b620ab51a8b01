"""Text normalization that several rooms share, in a leaf module below all of them.

* SQuAD v1.1 answer normalization and its reader metrics (exact match, token
  F1), as the official script: the reader (:mod:`hiera.read`) merges answers
  that normalize alike, and the evaluators (:mod:`hiera.eval`) score them.
* Name keys: two spellings of one name must meet at one key — "Beyoncé" and
  "beyonce", "Kiss and Tell" and "Kiss & Tell", "The Beatles" and "Beatles".
  The key is lower-cased, accent-free, punctuation-free text with single
  spaces; a leading article is dropped (a mention's noun chunk keeps it, a
  title rarely does). A title's parenthetical qualifier ("Kiss and Tell (1945
  film)") is a disambiguator, not part of the name, so :func:`base_name`
  removes it. The build's name table (:mod:`hiera.index.names`) and the
  linking pipeline's mention lookups (:mod:`hiera.link`) must key names
  identically.
"""

from __future__ import annotations

import re
import string
import unicodedata
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


# --- name keys ---------------------------------------------------------------------------
_NAME_PUNCT = re.compile(r"[^\w\s]+", re.UNICODE)
_SPACE = re.compile(r"\s+")
_PAREN = re.compile(r"\s*\([^()]*\)\s*$")
_ARTICLE = re.compile(r"^(the|a|an) ")


def fold(text: str) -> str:
    """Lower case, accents removed (NFKD, combining marks dropped)."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def name_key(text: str) -> str:
    """The lookup key of a name: folded, ``&`` → ``and``, punctuation → space, no leading article."""
    s = fold(text).replace("&", " and ")
    s = _SPACE.sub(" ", _NAME_PUNCT.sub(" ", s)).strip()
    return _ARTICLE.sub("", s)


def base_name(title: str) -> str:
    """A title without its trailing parenthetical qualifier: "Kiss and Tell (1945 film)" → "Kiss and Tell"."""
    return _PAREN.sub("", title).strip() or title
