"""The optional model set parser: an OpenAI-compatible chat-completions endpoint reads the query.

A model reads paraphrases the rules were never written for, so ``parser=endpoint``
(``parser_url``: a chat-completions URL) asks one for the query's QUEST
template and its atomic constraints, as JSON matching :data:`SCHEMA`
(``{"template": "_ that are not _", "atoms": ["shorebirds", "sandpipers"]}``;
the request carries the schema as ``response_format``, for servers that
constrain their output to it). The answer is validated: a known template, as
many distinct, non-empty atoms as it has slots, none longer than
:data:`MAX_ATOM_CHARS`. An atom found verbatim in the query gets its span.

It never fails a search: a refused connection, an HTTP error, a timeout or an
answer that does not validate falls back to the rules parser, and the result's
notes say why (the ``sets`` method shows them in its ``parse`` trace step). Off
by default; the URL is a server-side setting, like the linking decomposer's
(:mod:`hiera.chat` is the shared transport).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hiera.chat import FAILURES, ChatError, chat_url, complete, failure, reply_json
from hiera.errors import BadInputError
from hiera.sets.expr import QUEST_TEMPLATES, Atom, from_template
from hiera.sets.nounphrase import RuleUse
from hiera.sets.result import ParseResult, SetParser
from hiera.spec import check_url

MAX_ATOM_CHARS = 200
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "template": {"type": "string", "enum": list(QUEST_TEMPLATES)},
        "atoms": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": MAX_ATOM_CHARS},
                  "minItems": 1, "maxItems": 3},
    },
    "required": ["template", "atoms"],
    "additionalProperties": False,
}
SYSTEM = (
    "You read entity-seeking search queries as set operations over Wikipedia-category-like constraints, as in the "
    "QUEST dataset. Reply with JSON only: {\"template\": T, \"atoms\": [...]}, where T is one of "
    + "; ".join(repr(t) for t in QUEST_TEMPLATES)
    + ". Each _ is one atom, in order; an atom is a category-like phrase with its head noun "
    "(\"1961 novels\", \"historical novels\", \"Birds of Kenya\"). Intersections are often implicit: "
    "\"1970s Japanese horror films\" is '_ that are also _' with atoms [\"1970s films\", \"Japanese horror films\"]."
)
_OPS = {  # the operators each template makes, for the explanation
    "_": (), "_ or _": ("or",), "_ or _ or _": ("or",), "_ that are also _": ("and",),
    "_ that are also both _ and _": ("and",), "_ that are not _": ("diff",), "_ that are also _ but not _": ("and", "diff"),
}  # fmt: skip


def parse_answer(content: str) -> tuple[str, list[str]]:
    """The template and atoms of a reply's message content; :class:`ChatError` saying what is wrong otherwise."""
    data = reply_json(content)
    if not isinstance(data, dict):
        raise ChatError("the answer is not a JSON object")
    tpl = data.get("template")
    if tpl not in QUEST_TEMPLATES:
        raise ChatError(f"the answer's template {tpl!r} is not one of QUEST's seven")
    raw = data.get("atoms")
    if not isinstance(raw, list) or not all(isinstance(a, str) for a in raw):
        raise ChatError('the answer\'s "atoms" is not a list of strings')
    atoms = [" ".join(a.split()) for a in raw]
    if any(not a for a in atoms) or any(len(a) > MAX_ATOM_CHARS for a in atoms):
        raise ChatError(f"an atom is empty or longer than {MAX_ATOM_CHARS} characters")
    if len(atoms) != tpl.count("_"):
        raise ChatError(f"template {tpl!r} needs {tpl.count('_')} atoms, the answer has {len(atoms)}")
    if len({a.lower() for a in atoms}) != len(atoms):
        raise ChatError("the answer repeats an atom")
    return tpl, atoms


def _span(query: str, text: str) -> tuple[tuple[int, int], ...]:
    at = query.lower().find(text.lower())
    return ((at, at + len(text)),) if at >= 0 else ()


class EndpointSetParser:
    """Template and atoms from a chat-completions endpoint; ``fallback`` (the rules parser) when it fails."""

    name = "endpoint"

    def __init__(
        self, fallback: SetParser, url: str | None = None, timeout: float = 10.0, model: str = "default"
    ) -> None:
        if not url:
            raise BadInputError("parser=endpoint needs parser_url (an OpenAI-compatible chat-completions URL)")
        self.url = chat_url(check_url(url, "parser_url"))
        self.timeout = float(timeout)
        self.model = model
        self.fallback = fallback

    def request_body(self, query: str) -> dict[str, Any]:
        return {
            "model": self.model,
            "temperature": 0,
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": query}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "set_query", "strict": True, "schema": SCHEMA}},
        }

    def parse(self, query: str) -> ParseResult:
        if not isinstance(query, str) or not query.strip():
            raise BadInputError("the query is empty")
        try:
            tpl, texts = parse_answer(complete(self.url, self.request_body(query), self.timeout))
        except FAILURES as e:
            kind, reason = failure(e)
            r = self.fallback.parse(query)
            note = f"set parser endpoint {self.url} {kind} ({reason}); used the {r.parser} parser"
            return replace(r, notes=(note, *r.notes), fallback_from=self.name)
        expr = from_template(tpl, [Atom(t, _span(query, t)) for t in texts])
        uses = tuple(RuleUse(op, "endpoint-answer", query.strip(), tuple(texts)) for op in _OPS[tpl])  # type: ignore[arg-type]
        return ParseResult(query, expr, tpl, (), self.name, False, uses)
