"""From start/end logits to ranked answer spans, and identical answers merged.

A span's score is ``log P(start) + log P(end)`` with both softmaxes taken over
the window's passage tokens only (question, title and padding can never be an
answer). Valid spans start at or before they end, are at most
``max_answer_tokens`` long and are made of whole words (a span never starts
or ends inside a word split into pieces). Across windows, an answer's score is

    span log-probability
    + passage_weight · the window's passage-selection log-probability
    − rank_weight · log(1 + the passage's retrieval rank, 0-based)

so spans of different passages compare on one scale (DPR's reader ranks
passages first, then spans within them), and a reader whose selection head
is fooled by a lexically close passage far down the list does not lose the
first passage's answer by reading more: the rank prior is what makes EM at
20 passages no worse than at 1 (its weight is calibrated on train questions,
:mod:`hiera.read.calibrate`). Each candidate keeps the three parts, and the
answer JSON shows them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np

from hiera.text import squad_normalize

NEG = -1e9


class Span(NamedTuple):
    start: int  # token positions in the window, inclusive
    end: int
    score: float


class Candidate(NamedTuple):
    """One answer span read from one passage; ``score`` = ``span`` + ``select`` + ``rank`` (the weighted parts)."""

    text: str
    score: float
    passage: int  # index into the passages that were read (their retrieval rank)
    start: int  # character offsets in that passage's text
    end: int
    span: float = 0.0  # log P(start) + log P(end) in its window
    select: float = 0.0  # passage_weight · the window's selection log-probability
    rank: float = 0.0  # −rank_weight · log(1 + passage)


class Answer(NamedTuple):
    """An answer string with its best evidence first and every other passage that gave it."""

    text: str
    score: float
    passage: int
    start: int
    end: int
    evidence: tuple[Candidate, ...]


def log_softmax(x: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if mask is not None:
        x = np.where(mask, x, NEG)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def word_bounds(text: str, char_start: np.ndarray, char_end: np.ndarray,
                context: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which of a window's passage tokens may start, and which may end, an answer: not a word piece glued to the
    letter before it ("ción" of "Asunción"), and not a piece the next one continues, so that an answer is made
    of whole words (a comma or a hyphen after a word still ends it)."""
    alnum = np.fromiter((c.isalnum() for c in text), dtype=bool, count=len(text))
    ctx = np.flatnonzero(context)
    s, e = np.asarray(char_start)[ctx], np.asarray(char_end)[ctx]
    glued_before = (s > 0) & alnum[np.clip(s - 1, 0, None)] & alnum[np.clip(s, None, len(text) - 1)]
    glued_after = (e < len(text)) & alnum[np.clip(e - 1, 0, None)] & alnum[np.clip(e, None, len(text) - 1)]
    can_start, can_end = np.zeros_like(context, dtype=bool), np.zeros_like(context, dtype=bool)
    can_start[ctx], can_end[ctx] = ~glued_before, ~glued_after
    return can_start, can_end


def best_spans(
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    context: np.ndarray,
    max_answer_tokens: int,
    top_n: int = 20,
    bounds: tuple[np.ndarray, np.ndarray] | None = None,
) -> list[Span]:
    """The ``top_n`` best valid spans of one window, best first (ties: earlier, then shorter).

    ``bounds`` (:func:`word_bounds`) keeps spans to whole words; the probabilities stay those of every passage
    token, as the reader was trained."""
    if max_answer_tokens < 1:
        raise ValueError("max_answer_tokens must be at least 1")
    ctx = np.flatnonzero(context)
    if ctx.size == 0:
        return []
    ls = log_softmax(start_logits, context)
    le = log_softmax(end_logits, context)
    sctx, ectx = (ctx, ctx) if bounds is None else (np.flatnonzero(bounds[0]), np.flatnonzero(bounds[1]))
    if sctx.size == 0 or ectx.size == 0:
        return []
    # the best pairs are built from each side's best positions (stable order: ties go to the earlier token)
    starts = sctx[np.argsort(-ls[sctx], kind="stable")[: min(top_n, sctx.size)]]
    ends = ectx[np.argsort(-le[ectx], kind="stable")[: min(top_n, ectx.size)]]
    s, e = np.meshgrid(starts, ends, indexing="ij")
    ok = (s <= e) & (e - s + 1 <= max_answer_tokens)
    s, e = s[ok], e[ok]
    score = ls[s] + le[e]
    order = np.lexsort((e - s, s, -score))[:top_n]  # best first; ties: earlier, then shorter
    return [Span(int(s[i]), int(e[i]), float(score[i])) for i in order]


def merge(candidates: Iterable[Candidate], how: str = "max") -> list[Answer]:
    """One answer per normalized string (SQuAD normalization), best first.

    ``how="max"`` scores a string by its best span; ``"sum"`` adds the
    probabilities of its distinct spans (a string several passages agree on
    gains). The same span read twice (overlapping windows) counts once.
    """
    if how not in ("max", "sum"):
        raise ValueError(f"merge must be max or sum, got {how!r}")
    groups: dict[str, dict[tuple[int, int, int], Candidate]] = {}
    for c in candidates:
        key = squad_normalize(c.text)
        if not key:
            continue
        spans = groups.setdefault(key, {})
        where = (c.passage, c.start, c.end)
        if where not in spans or spans[where].score < c.score:
            spans[where] = c
    out = []
    for spans in groups.values():
        ev = sorted(spans.values(), key=lambda c: (-c.score, c.passage, c.start))
        best = ev[0]
        if how == "sum":
            scores = np.array([c.score for c in ev])
            score = float(scores.max() + np.log(np.exp(scores - scores.max()).sum()))
        else:
            score = best.score
        out.append(Answer(best.text, score, best.passage, best.start, best.end, tuple(ev)))
    out.sort(key=lambda a: (-a.score, a.passage, a.start))
    return out


def window_candidates(
    texts: Sequence[str],
    passage_of: np.ndarray,
    char_start: np.ndarray,
    char_end: np.ndarray,
    context: np.ndarray,
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    select_logits: np.ndarray,
    max_answer_tokens: int,
    passage_weight: float = 1.0,
    top_n: int = 20,
    rank_weight: float = 0.0,
) -> list[Candidate]:
    """Candidates of every window, scored as the module says (span, weighted selection, rank prior)."""
    if len(select_logits) == 0:
        return []
    sel = log_softmax(np.asarray(select_logits, dtype=np.float64))
    out = []
    for w in range(len(sel)):
        p = int(passage_of[w])
        sw = passage_weight * float(sel[w])
        prior = -rank_weight * float(np.log1p(p))
        bounds = word_bounds(texts[p], char_start[w], char_end[w], context[w])
        for sp in best_spans(start_logits[w], end_logits[w], context[w], max_answer_tokens, top_n, bounds):
            s, e = int(char_start[w, sp.start]), int(char_end[w, sp.end])
            out.append(Candidate(texts[p][s:e], sp.score + sw + prior, p, s, e, sp.score, sw, prior))
    return out
