"""What a set parser returns, and what a set parser is.

:class:`ParseResult` and the :class:`SetParser` protocol live below every
parser (:mod:`hiera.sets.parser` for the rules, :mod:`hiera.sets.endpoint` for
the model endpoint), so each imports them without importing the others;
:mod:`hiera.sets.parser` re-exports them as the public face.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from hiera.errors import BadInputError
from hiera.sets.expr import Atom, Expr, constraints, to_json
from hiera.sets.nounphrase import RuleUse


@dataclass(frozen=True)
class ParseResult:
    """A parsed query: its expression, QUEST template and notes (fallbacks, odd shapes)."""

    query: str
    expression: Expr
    template: str
    notes: tuple[str, ...] = ()
    parser: str = ""
    fallback: bool = False  # the whole query was read as one constraint: no analysis held
    rules: tuple[RuleUse, ...] = ()  # the rules that made the operators, in the order they applied
    fallback_from: str = ""  # the parser asked for, when it failed and ``parser`` answered in its place

    @property
    def constraints(self) -> list[str]:
        return constraints(self.expression)

    @property
    def fell_back(self) -> bool:
        """Not the analysis asked for: the query read as one constraint, or another parser's reading."""
        return self.fallback or bool(self.fallback_from)

    def to_json(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "template": self.template,
            "constraints": self.constraints,
            "expression": to_json(self.expression),
            "notes": list(self.notes),
            "parser": self.parser,
            "fallback": self.fell_back,
            "fallback_from": self.fallback_from or None,
            "rules": [u.to_json() for u in self.rules],
        }


@runtime_checkable
class SetParser(Protocol):
    """Anything that turns a query into a :class:`ParseResult`."""

    name: str

    def parse(self, query: str) -> ParseResult: ...


def single_constraint(query: str, reason: str, parser: str = "") -> ParseResult:
    """The fallback: the whole query as one constraint, saying why."""
    text = " ".join(query.split())
    if not text:
        raise BadInputError("the query is empty")
    start = len(query) - len(query.lstrip())
    atom = Atom(text, ((start, start + len(query.strip())),))
    note = f"could not analyze the query ({reason}); it is read as one constraint"
    return ParseResult(query, atom, "_", (note,), parser, True)
