"""Set expressions over atomic constraints, QUEST's templates, and their evaluation.

A QUEST query asks for a set of entities combining atomic constraints
("shorebirds", "sandpipers") with intersection, union and difference. Here the
combination is an explicit tree:

* :class:`Atom` ``(text, span)`` — one constraint; ``text`` is the constraint
  as a standalone phrase ("war films from 1945"), ``span`` the pieces of the
  query it was read from, as ``(start, end)`` character offsets (a shared head
  makes an atom non-contiguous: in "Dutch or Swiss war films" the atom "Dutch
  war films" is the pieces "Dutch" and "war films"); empty when the atom does
  not come from a query string (e.g. a gold atom of QUEST's ``original_query``);
* :class:`And` ``(children)`` — intersection, :class:`Or` ``(children)`` —
  union, :class:`Diff` ``(left, right)`` — difference ``left \\ right``.

:func:`template` names a tree's shape with QUEST's template strings
(:data:`QUEST_TEMPLATES`); :func:`from_template` builds the tree a QUEST record
implies from its template and its ``<mark>``-ed atoms.

Evaluation (:func:`evaluate`, :func:`evaluate_trace`)
-----------------------------------------------------
Input per atom text: its **accepted members** (``member_sets``: document ->
score, the documents the constraint's classifier accepted, i.e. scored at or
above its threshold) and optionally all its **scored candidates**
(``candidate_scores``: document -> score, accepted or not). Scores are
probabilities in [0, 1]. An atom with an empty member set is an empty set,
not an error; an atom missing from ``member_sets`` is an error.

Membership is decided by set algebra on accepted members only:

* ``And``: the documents accepted by every child (an empty side gives an
  empty intersection);
* ``Or``: the documents accepted by any child;
* ``Diff(A, B)``: the documents of A that are **not members of B**. A
  document B accepted is excluded, however high its A score.

Scores rank the members and never decide membership:

* ``And``: the **minimum** of the children's scores (a member is only as
  sure as its weakest constraint);
* ``Or``: the **maximum** over the children that accept it;
* ``Diff(A, B)``: ``a · (1 − b)``, where ``a`` is the member's score in A and
  ``b`` its *soft* score in B: a surviving member was rejected by B, but if B's
  classifier scored it (below B's threshold) with ``b``, that doubt lowers its
  rank. ``b`` is 0 when B never scored the document. Soft scores follow the
  same rules over candidate scores: an atom's soft score is its candidate score
  (its member score if it has no candidate entry, else 0), ``And`` takes the
  minimum, ``Or`` the maximum and ``Diff`` ``x · (1 − y)``.

:func:`evaluate_trace` also says, for every document accepted by at least one
*positive* atom (an atom not on the right-hand side of a difference) that is
not in the result, which constraints excluded it: ``missing`` — a constraint
it had to satisfy (an intersection's side, a difference's left side) did not
accept it — or ``negated`` — a subtracted constraint accepted it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from hiera.errors import BadInputError

Span = tuple[tuple[int, int], ...]

# QUEST's seven templates, in the paper's order.
QUEST_TEMPLATES: tuple[str, ...] = (
    "_",
    "_ or _",
    "_ or _ or _",
    "_ that are also _",
    "_ that are also both _ and _",
    "_ that are not _",
    "_ that are also _ but not _",
)


@dataclass(frozen=True)
class Atom:
    """One atomic constraint: its standalone text and where it came from in the query."""

    text: str
    span: Span = ()

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text.strip():
            raise BadInputError("an atom needs a non-empty text")
        pieces = tuple((int(s), int(e)) for s, e in self.span)
        for s, e in pieces:
            if s < 0 or e < s:
                raise BadInputError(f"bad span piece ({s}, {e}) for atom {self.text!r}")
        object.__setattr__(self, "span", pieces)

    @property
    def extent(self) -> tuple[int, int] | None:
        """The smallest ``(start, end)`` covering every piece, or None without a span."""
        if not self.span:
            return None
        return min(s for s, _ in self.span), max(e for _, e in self.span)


@dataclass(frozen=True)
class And:
    """Intersection of its children (two or more)."""

    children: tuple[Expr, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        object.__setattr__(self, "children", _children(self.children, "And"))


@dataclass(frozen=True)
class Or:
    """Union of its children (two or more)."""

    children: tuple[Expr, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        object.__setattr__(self, "children", _children(self.children, "Or"))


@dataclass(frozen=True)
class Diff:
    """``left \\ right``: members of ``left`` that ``right`` does not accept."""

    left: Expr
    right: Expr

    def __post_init__(self) -> None:
        for side in (self.left, self.right):
            if not isinstance(side, Atom | And | Or | Diff):
                raise BadInputError(f"Diff sides must be expressions, got {type(side).__name__}")


Expr = Atom | And | Or | Diff


def _children(children: Iterable[Expr], name: str) -> tuple[Expr, ...]:
    out = tuple(children)
    if len(out) < 2:
        raise BadInputError(f"{name} needs at least two children, got {len(out)}")
    for c in out:
        if not isinstance(c, Atom | And | Or | Diff):
            raise BadInputError(f"{name} children must be expressions, got {type(c).__name__}")
    return out


# --- structure ------------------------------------------------------------------------


def atoms(expr: Expr) -> list[Atom]:
    """The atoms of ``expr``, left to right (an atom used twice appears twice)."""
    if isinstance(expr, Atom):
        return [expr]
    if isinstance(expr, Diff):
        return atoms(expr.left) + atoms(expr.right)
    return [a for c in expr.children for a in atoms(c)]


def constraints(expr: Expr) -> list[str]:
    """The atoms' texts, left to right, each once."""
    return list(dict.fromkeys(a.text for a in atoms(expr)))


def template(expr: Expr) -> str:
    """QUEST's template string for ``expr``'s shape.

    The seven QUEST shapes give QUEST's strings: ``Atom`` ``_``; ``Or`` of 2/3
    atoms ``_ or _`` / ``_ or _ or _``; ``And`` of 2/3 atoms ``_ that are also _``
    / ``_ that are also both _ and _``; ``Diff(atom, atom)`` ``_ that are not
    _``; ``Diff(And(atom, atom), atom)`` ``_ that are also _ but not _``. Any
    other shape gets a compositional string in the same words, with
    parentheses around nested operations (e.g. ``(_ or _) that are not _``),
    which is not one of :data:`QUEST_TEMPLATES`.
    """
    if isinstance(expr, Atom):
        return "_"
    flat = all(isinstance(c, Atom) for c in getattr(expr, "children", ()))
    if isinstance(expr, Or) and flat:
        return " or ".join("_" for _ in expr.children)
    if isinstance(expr, And) and flat and len(expr.children) == 2:
        return "_ that are also _"
    if isinstance(expr, And) and flat and len(expr.children) == 3:
        return "_ that are also both _ and _"
    if isinstance(expr, Diff) and isinstance(expr.right, Atom):
        if isinstance(expr.left, Atom):
            return "_ that are not _"
        left = expr.left
        if isinstance(left, And) and len(left.children) == 2 and all(isinstance(c, Atom) for c in left.children):
            return "_ that are also _ but not _"
    return _compose(expr)


def _compose(expr: Expr, nested: bool = False) -> str:
    if isinstance(expr, Atom):
        return "_"
    if isinstance(expr, Or):
        s = " or ".join(_compose(c, True) for c in expr.children)
    elif isinstance(expr, And):
        parts = [_compose(c, True) for c in expr.children]
        s = parts[0] + " that are also " + " and ".join(parts[1:])
    else:
        s = f"{_compose(expr.left, True)} that are not {_compose(expr.right, True)}"
    return f"({s})" if nested else s


def from_template(tpl: str, texts: Iterable[str | Atom]) -> Expr:
    """The expression a QUEST template with its atoms (in order: texts, or atoms with their spans) stands for."""
    items = [t if isinstance(t, Atom) else Atom(t) for t in texts]
    need = {t: t.count("_") for t in QUEST_TEMPLATES}
    if tpl not in need:
        raise BadInputError(f"unknown QUEST template {tpl!r}; known: {', '.join(repr(t) for t in QUEST_TEMPLATES)}")
    if len(items) != need[tpl]:
        raise BadInputError(f"template {tpl!r} needs {need[tpl]} atoms, got {len(items)}")
    if tpl == "_":
        return items[0]
    if tpl.startswith("_ or"):
        return Or(items)
    if tpl == "_ that are not _":
        return Diff(items[0], items[1])
    if tpl == "_ that are also _ but not _":
        return Diff(And(items[:2]), items[2])
    return And(items)


_MARK = re.compile(r"<mark>(.*?)</mark>", re.DOTALL)


def marked_atoms(original_query: str) -> list[str]:
    """The ``<mark>``-ed spans of a QUEST ``original_query``, whitespace-normalized, in order."""
    return [" ".join(m.split()) for m in _MARK.findall(original_query)]


def to_infix(expr: Expr) -> str:
    """A one-line reading of ``expr``: ``[Dutch war films] ∪ [Swiss war films]``, with ∩, ∪ and \\."""
    if isinstance(expr, Atom):
        return f"[{expr.text}]"
    if isinstance(expr, Diff):
        parts = [expr.left, expr.right]
        sym = " \\ "
    else:
        parts = list(expr.children)
        sym = " ∩ " if isinstance(expr, And) else " ∪ "
    return sym.join(to_infix(p) if isinstance(p, Atom) else f"({to_infix(p)})" for p in parts)


# --- JSON -------------------------------------------------------------------------------


def to_json(expr: Expr) -> dict[str, Any]:
    """A JSON-ready dict: ``{"op": "atom", "text", "span": [[s, e], ...]}``, ``{"op": "and"|"or",
    "children": [...]}`` or ``{"op": "diff", "left", "right"}``."""
    if isinstance(expr, Atom):
        return {"op": "atom", "text": expr.text, "span": [list(p) for p in expr.span]}
    if isinstance(expr, Diff):
        return {"op": "diff", "left": to_json(expr.left), "right": to_json(expr.right)}
    return {"op": "and" if isinstance(expr, And) else "or", "children": [to_json(c) for c in expr.children]}


def from_json(data: Any) -> Expr:
    """Inverse of :func:`to_json`; a malformed tree raises :class:`BadInputError`."""
    if not isinstance(data, dict):
        raise BadInputError("an expression must be a JSON object")
    op = data.get("op")
    if op == "atom":
        span = data.get("span") or []
        if not isinstance(span, list) or not all(isinstance(p, list | tuple) and len(p) == 2 for p in span):
            raise BadInputError("an atom's 'span' must be a list of [start, end] pairs")
        return Atom(data.get("text") if isinstance(data.get("text"), str) else "", tuple(tuple(p) for p in span))
    if op in ("and", "or"):
        kids = data.get("children")
        if not isinstance(kids, list):
            raise BadInputError(f"an {op!r} node needs a 'children' list")
        cls = And if op == "and" else Or
        return cls(tuple(from_json(k) for k in kids))
    if op == "diff":
        return Diff(from_json(data.get("left")), from_json(data.get("right")))
    raise BadInputError(f"unknown expression op {op!r} (atom, and, or, diff)")


# --- evaluation -------------------------------------------------------------------------


@dataclass(frozen=True)
class Exclusion:
    """Why one constraint kept a document out of the result."""

    constraint: str  # the atom's text
    kind: Literal["missing", "negated"]  # not accepted by a required constraint / accepted by a subtracted one
    score: float | None  # that constraint's score for the document, if it scored it


@dataclass
class SetResult:
    """Members with combined scores, and the reasons for every excluded candidate."""

    scores: dict[str, float]
    excluded: dict[str, list[Exclusion]]

    def ranked(self) -> list[tuple[str, float]]:
        """Members by decreasing combined score, ties by document id."""
        return sorted(self.scores.items(), key=lambda kv: (-kv[1], kv[0]))


ScoreTable = Mapping[str, Mapping[str, float]]


def evaluate(
    expr: Expr, member_sets: ScoreTable, candidate_scores: ScoreTable | None = None
) -> dict[str, float]:
    """The members of ``expr`` with their combined scores (see the module docstring)."""
    candidate_scores = candidate_scores or {}
    _check_tables(expr, member_sets, candidate_scores)
    return _Evaluator(member_sets, candidate_scores).members(expr)


def evaluate_trace(
    expr: Expr, member_sets: ScoreTable, candidate_scores: ScoreTable | None = None
) -> SetResult:
    """:func:`evaluate` plus, per excluded candidate, the constraints that excluded it."""
    candidate_scores = candidate_scores or {}
    _check_tables(expr, member_sets, candidate_scores)
    ev = _Evaluator(member_sets, candidate_scores)
    scores = ev.members(expr)
    excluded: dict[str, list[Exclusion]] = {}
    pool = sorted({d for a in _positive_atoms(expr) for d in member_sets[a.text]} - scores.keys())
    for doc in pool:
        excluded[doc] = _dedupe(ev.why_not(expr, doc))
    return SetResult(scores=scores, excluded=excluded)


def soft_scores(
    expr: Expr, member_sets: ScoreTable, candidate_scores: ScoreTable | None, docs: Iterable[str]
) -> dict[str, float]:
    """How strongly ``expr`` holds for each of ``docs`` judging by every score, accepted or not.

    The soft scores of the module docstring (atom: its candidate score, ``And``
    min, ``Or`` max, ``Diff`` ``x · (1 − y)``): what ranks the documents that are
    not members, e.g. after the members in a set retriever's ranking.
    """
    ev = _Evaluator(member_sets, candidate_scores or {})
    return {d: ev.soft(expr, d) for d in docs}


def _check_tables(expr: Expr, member_sets: ScoreTable, candidate_scores: ScoreTable) -> None:
    for a in atoms(expr):
        if a.text not in member_sets:
            raise BadInputError(f"no member set for constraint {a.text!r}")
        _check_scores(a.text, member_sets[a.text])
        if a.text in candidate_scores:
            _check_scores(a.text, candidate_scores[a.text])


def _check_scores(name: str, table: Mapping[str, float]) -> None:
    for doc, s in table.items():
        if not isinstance(s, int | float) or isinstance(s, bool) or math.isnan(s) or not 0.0 <= s <= 1.0:
            raise BadInputError(f"constraint {name!r}: score of {doc!r} must be a number in [0, 1], got {s!r}")


def _positive_atoms(expr: Expr) -> list[Atom]:
    if isinstance(expr, Atom):
        return [expr]
    if isinstance(expr, Diff):
        return _positive_atoms(expr.left)
    return [a for c in expr.children for a in _positive_atoms(c)]


def _dedupe(items: list[Exclusion]) -> list[Exclusion]:
    return list(dict.fromkeys(items))


class _Evaluator:
    def __init__(self, member_sets: ScoreTable, candidate_scores: ScoreTable) -> None:
        self.m = member_sets
        self.c = candidate_scores

    def members(self, expr: Expr) -> dict[str, float]:
        if isinstance(expr, Atom):
            return {d: float(s) for d, s in self.m[expr.text].items()}
        if isinstance(expr, Or):
            out: dict[str, float] = {}
            for child in expr.children:
                for d, s in self.members(child).items():
                    out[d] = max(s, out.get(d, s))
            return out
        if isinstance(expr, And):
            sides = [self.members(c) for c in expr.children]
            common = set(sides[0]).intersection(*sides[1:])
            return {d: min(side[d] for side in sides) for d in common}
        left = self.members(expr.left)
        right = self.members(expr.right)
        return {d: a * (1.0 - self.soft(expr.right, d)) for d, a in left.items() if d not in right}

    def soft(self, expr: Expr, doc: str) -> float:
        """How strongly ``expr`` holds for ``doc`` judging by every score, not just accepted ones."""
        if isinstance(expr, Atom):
            cand = self.c.get(expr.text, {})
            if doc in cand:
                return float(cand[doc])
            return float(self.m[expr.text].get(doc, 0.0))
        if isinstance(expr, Or):
            return max(self.soft(c, doc) for c in expr.children)
        if isinstance(expr, And):
            return min(self.soft(c, doc) for c in expr.children)
        return self.soft(expr.left, doc) * (1.0 - self.soft(expr.right, doc))

    def _score(self, atom: Atom, doc: str) -> float | None:
        if doc in self.m[atom.text]:
            return float(self.m[atom.text][doc])
        cand = self.c.get(atom.text, {})
        return float(cand[doc]) if doc in cand else None

    def why_not(self, expr: Expr, doc: str) -> list[Exclusion]:
        """The constraints keeping ``doc`` out of ``expr`` (empty when it is a member)."""
        if isinstance(expr, Atom):
            if doc in self.m[expr.text]:
                return []
            return [Exclusion(expr.text, "missing", self._score(expr, doc))]
        if isinstance(expr, And):
            return [e for c in expr.children for e in self.why_not(c, doc)]
        if isinstance(expr, Or):
            reasons = [self.why_not(c, doc) for c in expr.children]
            return [] if any(not r for r in reasons) else [e for r in reasons for e in r]
        left = self.why_not(expr.left, doc)
        if left:
            return left
        return [Exclusion(a.text, "negated", self._score(a, doc)) for a in self.why_member(expr.right, doc)]

    def why_member(self, expr: Expr, doc: str) -> list[Atom]:
        """The atoms that make ``doc`` a member of ``expr`` (empty when it is not one)."""
        if isinstance(expr, Atom):
            return [expr] if doc in self.m[expr.text] else []
        if isinstance(expr, Or):
            return [a for c in expr.children for a in self.why_member(c, doc)]
        if isinstance(expr, And):
            parts = [self.why_member(c, doc) for c in expr.children]
            return [a for p in parts for a in p] if all(parts) else []
        if self.why_not(expr, doc):
            return []
        return self.why_member(expr.left, doc)


__all__ = [
    "QUEST_TEMPLATES",
    "And",
    "Atom",
    "Diff",
    "Exclusion",
    "Expr",
    "Or",
    "SetResult",
    "atoms",
    "constraints",
    "evaluate",
    "evaluate_trace",
    "from_json",
    "from_template",
    "marked_atoms",
    "soft_scores",
    "template",
    "to_infix",
    "to_json",
]
