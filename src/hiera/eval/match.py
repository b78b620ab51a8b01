"""Answer matching as DPR evaluates retrieval, and SQuAD's reader metrics.

Retrieval accuracy ("top-k") counts a passage as a hit when it contains an
answer. We reproduce DPR's ``has_answer`` (``dpr/data/qa_validation.py``) so
that our numbers are comparable with published ones:

* ``string`` mode: text and answer are Unicode-NFD normalized, cut into tokens
  by DPR's ``SimpleTokenizer`` (runs of letters/digits/combining marks, or any
  single other non-space, non-control character), lowercased, and the answer's
  tokens must appear as a contiguous run of the text's tokens. NFD does *not*
  strip accents: "Beyoncé" becomes ``beyonce`` + U+0301 inside one token, so
  it matches "Beyoncé" written composed or decomposed but never "Beyonce".
* ``regex`` mode (CuratedTREC): each answer is a pattern compiled with
  IGNORECASE | UNICODE | MULTILINE by the ``regex`` package and searched in the
  NFD-normalized text. A pattern that does not compile is no match (as in DPR).

Only the passage *text* is ever matched. DPR's default evaluation does not
prepend the title, and neither do we: an answer that appears only in a
passage's title (or section path) is not a hit. :func:`passage_has_answer`
enforces this for :class:`~hiera.results.Hit` objects.

One deliberate difference from DPR: an answer with no tokens (empty or only
whitespace/control characters) never matches; DPR's loop matches it against
every text, which would count a hit for every question holding such an answer.

The reader metrics (SQuAD v1.1's exact match and F1) live in
:mod:`hiera.text`, beside the answer normalization the reader shares.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Literal

import regex

from hiera.errors import BadInputError

if TYPE_CHECKING:
    from hiera.results import Hit

MatchMode = Literal["string", "regex"]
MATCH_MODES: tuple[str, ...] = ("string", "regex")

# DPR's SimpleTokenizer: ALPHA_NUM = [\p{L}\p{N}\p{M}]+, NON_WS = [^\p{Z}\p{C}].
# DPR wraps both in capture groups and reads group(); one ungrouped alternation
# yields the same tokens.
_TOKEN = regex.compile(
    r"[\p{L}\p{N}\p{M}]+|[^\p{Z}\p{C}]",
    flags=regex.IGNORECASE | regex.UNICODE | regex.MULTILINE,
)
_REGEX_FLAGS = regex.IGNORECASE | regex.UNICODE | regex.MULTILINE


def normalize(text: str) -> str:
    """Unicode NFD, as DPR's ``_normalize``."""
    return unicodedata.normalize("NFD", text)


def tokenize(text: str) -> list[str]:
    """DPR's uncased tokens of ``text`` (NFD first, then lowercase per token)."""
    return [t.lower() for t in _TOKEN.findall(normalize(text))]


@lru_cache(maxsize=16_384)
def _text_tokens(text: str) -> tuple[str, ...]:
    """A passage is checked against every question that retrieves it, by every retriever: tokenize it once
    (an evaluation of 200 questions with four retrievers tokenized 2,129 passages 160,169 times)."""
    return tuple(tokenize(text))


@lru_cache(maxsize=65_536)
def _answer_tokens(answer: str) -> tuple[str, ...]:
    """Answers repeat across every passage of a question: tokenize them once."""
    return tuple(tokenize(answer))


@lru_cache(maxsize=8_192)
def _answer_pattern(pattern: str) -> regex.Pattern[str] | None:
    """Compiled CuratedTREC pattern, or ``None`` when it does not compile."""
    try:
        return regex.compile(normalize(pattern), flags=_REGEX_FLAGS)
    except Exception:  # DPR catches BaseException; any compile failure means "no match"
        return None


def _contains(tokens: Sequence[str], sub: tuple[str, ...]) -> bool:
    m = len(sub)
    if m == 0:
        return False
    first = sub[0]
    for i in range(len(tokens) - m + 1):
        if tokens[i] == first and tuple(tokens[i : i + m]) == sub:
            return True
    return False


def has_answer(answers: Sequence[str], text: str, mode: MatchMode = "string") -> bool:
    """Whether passage ``text`` contains any of ``answers``, DPR-style.

    Pass the passage text only, never ``title + text``: titles do not count.
    """
    if isinstance(answers, str):
        answers = [answers]
    if mode == "string":
        tokens = _text_tokens(text)
        return any(_contains(tokens, _answer_tokens(a)) for a in answers)
    if mode == "regex":
        norm = normalize(text)
        for a in answers:
            pat = _answer_pattern(a)
            if pat is not None and pat.search(norm) is not None:
                return True
        return False
    raise BadInputError(f"unknown answer match mode {mode!r}; known modes: {', '.join(MATCH_MODES)}")


def has_answer_tokens(answers: Sequence[str], tokens: Sequence[str]) -> bool:
    """:func:`has_answer` (string mode) on text already cut by :func:`tokenize`.

    Training checks one passage against thousands of questions; tokenizing it
    once instead of once per check is what makes mining negatives fast.
    """
    return any(_contains(tokens, _answer_tokens(a)) for a in answers)


def passage_has_answer(hit: Hit, answers: Sequence[str], mode: MatchMode = "string") -> bool:
    """:func:`has_answer` on a hit's passage text; its title and section path never count."""
    return has_answer(answers, hit.text, mode)


def hit_list(hits: Sequence[Hit], answers: Sequence[str], mode: MatchMode = "string") -> list[bool]:
    """One boolean per ranked hit, the input of :func:`hiera.eval.metrics.topk_accuracy`."""
    return [passage_has_answer(h, answers, mode) for h in hits]


__all__ = [
    "MATCH_MODES",
    "MatchMode",
    "has_answer",
    "hit_list",
    "normalize",
    "passage_has_answer",
    "tokenize",
]
