"""Lexical evidence for set constraints: sentences, and how much of a constraint a lead sentence states.

Two uses in the ``sets`` method (:mod:`hiera.retrieve.sets`):

* **Lead coverage** (:class:`LeadMatcher`), the lexical evidence blended into
  the classifier's probability. An encyclopedia article's lead sentence says
  what its subject *is* ("Kyrgyzstan is a landlocked country in Central Asia",
  "Selma Lagerlöf was a Swedish writer"), and a set constraint names exactly
  such attributes ("Countries in East Asia", "Swedish writers"). The coverage
  of a constraint by a document is the IDF-weighted share of the constraint's
  terms (the collection's BM25 analyzer: stop words out, Snowball stems) that
  the document's title and first sentence contain. A century or decade in the
  constraint is also satisfied by a year it spans ("19th century": 18xx,
  "1990s": 199x). It is a fraction in [0, 1], comparable across constraints
  and documents, so one threshold can serve them.

  It replaced the constraint's BM25 score over the whole document (divided by
  the best): BM25 rewards a word anywhere ("Asia" in Russia's
  text, "Swedish" in a Norwegian writer's), while the question a constraint
  asks is answered by the definition. On the quest-vital bench the blend with
  lead coverage raised avg F1 on every split (tune, test, training
  queries; all development splits) over the BM25 blend with the same classifier (bench/README.md).

* **Evidence sentences** (:func:`split_sentences`, :func:`best_sentence`): the
  sentence of a member that best supports each constraint, by token overlap.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

# what hiera-sets.json's lexical weights blend (a file tuned with other evidence, such as BM25's, is refused)
LEXICAL_EVIDENCE = "lead-coverage"

# -- sentences ---------------------------------------------------------------------------
_SENT_BREAK = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+(?=[\"'“(\[]?[A-Z0-9])")
_ABBREV = {"st", "dr", "mr", "mrs", "ms", "jr", "sr", "c", "ca", "b", "d", "fl", "no", "vs", "etc", "mt", "ft", "u.s", "e.g", "i.e"}
_WORD = re.compile(r"[a-z0-9]+")
_STOP = {
    "a", "an", "the", "of", "in", "on", "at", "by", "for", "from", "to", "and", "or", "that", "are", "is", "was",
    "were", "who", "which", "also", "both", "not", "but", "with", "as", "be", "been", "their", "its", "it",
}  # fmt: skip
_ORDINAL = re.compile(r"^(\d{1,2})(st|nd|rd|th)$")
_DECADE = re.compile(r"^(\d{3})0s$")


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` (a break after ., ! or ? before a capital or digit; common abbreviations kept)."""
    out: list[str] = []
    start = 0
    for m in _SENT_BREAK.finditer(text):
        before = text[start : m.start()].rsplit(None, 1)
        last = before[-1].rstrip(".!?\"'”’)]").lower() if before else ""
        if last in _ABBREV or (len(last) == 1 and last.isalpha()) or "." in last:  # "c.", "St.", "C.N."
            continue
        out.append(text[start : m.start()].strip())
        start = m.end()
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return [s for s in out if s]


def _stem(w: str) -> str:
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        return w[:-1]
    return w


def time_spans(text: str) -> list[tuple[list[str], re.Pattern[str]]]:
    """The centuries and decades ``text`` names: (their words, the years that satisfy them).

    "born in the 19th century" → (["19th", "century"], 18xx); "1990s films" → (["1990s"], 199x).
    """
    words = _WORD.findall(text.lower().replace("'s", ""))
    out: list[tuple[list[str], re.Pattern[str]]] = []
    for i, w in enumerate(words):
        m = _ORDINAL.match(w)
        if m and i + 1 < len(words) and words[i + 1].startswith("centur"):
            out.append(([w, words[i + 1]], re.compile(rf"\b{int(m.group(1)) - 1}\d\d\b")))
        m = _DECADE.match(w)
        if m:
            out.append(([w], re.compile(rf"\b{m.group(1)}\d\b")))
    return out


def _terms(text: str) -> tuple[set[str], list[re.Pattern[str]]]:
    """Content stems of ``text`` and year patterns its centuries/decades stand for."""
    words = _WORD.findall(text.lower().replace("'s", ""))
    return {_stem(w) for w in words if w not in _STOP}, [p for _, p in time_spans(text)]


def best_sentence(constraint: str, sentences: list[str]) -> int:
    """Index of the sentence that shares most content words (or years) with ``constraint``; 0 when none does."""
    stems, years = _terms(constraint)
    best, best_i = 0.0, 0
    for i, s in enumerate(sentences):
        sstems = {_stem(w) for w in _WORD.findall(s.lower())}
        score = len(stems & sstems) + sum(1 for y in years if y.search(s))
        if score > best:
            best, best_i = score, i
    return best_i


# -- lead coverage -----------------------------------------------------------------------


def lead_text(title: str, body: str) -> str:
    """What a document says it is: its title and the first sentence of its text."""
    sents = split_sentences(body[:2000])
    return f"{title}. {sents[0]}" if sents else title


@dataclass(frozen=True)
class ConstraintTerms:
    """A constraint as :class:`LeadMatcher` weighs it."""

    weights: dict[str, float]  # analyzed term -> IDF
    times: tuple[tuple[frozenset[str], re.Pattern[str]], ...]  # terms a century/decade stands for, its years


class LeadMatcher:
    """IDF-weighted coverage of a constraint's terms by a document's lead (module docstring).

    ``analyze`` is the collection's BM25 analyzer and ``df(terms)`` their
    document frequencies among ``n_docs`` documents (:meth:`Bm25Index.df`), so
    the terms and their weights are BM25's own.
    """

    def __init__(self, analyze: Callable[[str], list[str]], df: Callable[[list[str]], list[int]], n_docs: int) -> None:
        self.analyze = analyze
        self.df = df
        self.n_docs = max(1, n_docs)

    def idf(self, df: int) -> float:
        """Lucene's IDF (a term in no document weighs most)."""
        return math.log(1.0 + (self.n_docs - df + 0.5) / (df + 0.5))

    def terms(self, constraint: str) -> ConstraintTerms:
        toks = list(dict.fromkeys(self.analyze(constraint)))
        weights = {t: self.idf(n) for t, n in zip(toks, self.df(toks), strict=True)}
        times = tuple(
            (frozenset(t for w in words for t in self.analyze(w)) & weights.keys(), years)
            for words, years in time_spans(constraint)
        )
        return ConstraintTerms(weights, times)

    def lead_terms(self, lead: str) -> frozenset[str]:
        return frozenset(self.analyze(lead))

    @staticmethod
    def coverage(terms: ConstraintTerms, lead_terms: frozenset[str], lead: str) -> float:
        """The IDF-weighted share of ``terms`` that the lead states (0 for a constraint without terms)."""
        total = sum(terms.weights.values())
        if total <= 0:
            return 0.0
        got = {t for t in terms.weights if t in lead_terms}
        for words, years in terms.times:
            if years.search(lead):
                got |= words
        return sum(terms.weights[t] for t in got) / total


__all__ = [
    "LEXICAL_EVIDENCE",
    "ConstraintTerms",
    "LeadMatcher",
    "best_sentence",
    "lead_text",
    "split_sentences",
    "time_spans",
]
