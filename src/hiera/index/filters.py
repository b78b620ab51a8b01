"""Search filters: a small expression language over what the store knows, compiled once to masks in index order.

``year >= 2019 and source = wikipedia and not categories contains "stub"``

Fields (:func:`fields_of` lists them with their types and counts):

* document fields: ``id``, ``title`` (text), ``source`` (every source of a
  document: its reader's ``metadata.source`` and, for a merged document, each
  part's in ``metadata.sources``; a document matches if any source does),
  ``categories`` (a list: matches if any category does), and every key of a
  document's ``metadata`` (by its name, or ``metadata.NAME`` when a built-in
  field has the same name), typed from its values: ``number``, ``date`` (ISO
  ``YYYY``, ``YYYY-MM``, ``YYYY-MM-DD``…), ``bool``, ``list`` or ``text``;
* passage fields: ``section`` (the passage's section path, its headings
  joined with `` > ``, ``""`` for the lead).

Operators: ``=`` ``!=`` ``in (a, b)`` (exact), ``contains`` ``prefix``
(case-insensitive), ``<`` ``<=`` ``>`` ``>=`` (numbers and dates only); ``and``,
``or``, ``not`` and parentheses. Values are quoted (``'…'`` or ``"…"``) or bare
words. A document without a metadata key matches no comparison on it (so
``!=`` and ``not`` match it).

A filter is parsed once (:func:`parse`), checked against the collection's
fields (an unknown field, a wrong type or a malformed expression is one
:class:`~hiera.errors.BadInputError` naming it), and compiled to an
:class:`~hiera.query.Allowed` (boolean masks over documents and passages).
:func:`compile_filter` keeps the compiled masks per build, keyed by the
canonical expression and a generation number (what a build that deletes
documents without rebuilding would bump).
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from hiera.errors import BadInputError
from hiera.query import Allowed

CACHED = 32  # compiled filters kept per build (a server sees a few distinct ones again and again)
SECTION_SEP = " > "
OPS = ("=", "!=", "in", "contains", "prefix", "<", "<=", ">", ">=")
ORDERED = ("<", "<=", ">", ">=")
TEXT_OPS = ("=", "!=", "in", "contains", "prefix")
KIND_OPS = {"text": TEXT_OPS, "list": TEXT_OPS, "number": ("=", "!=", "in", *ORDERED),
            "date": ("=", "!=", "in", *ORDERED), "bool": ("=", "!=", "in")}


# -- the expression ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cmp:
    field: str
    op: str
    values: tuple[str, ...]

    def canonical(self) -> str:
        vals = ", ".join(v if _BARE.match(v) and v.lower() not in _KEYWORDS else json.dumps(v, ensure_ascii=False)
                         for v in self.values)
        return f"{self.field} in ({vals})" if self.op == "in" else f"{self.field} {self.op} {vals}"


@dataclass(frozen=True)
class Not:
    arg: Node

    def canonical(self) -> str:
        return f"not ({self.arg.canonical()})"


@dataclass(frozen=True)
class BoolOp:
    op: str  # "and" | "or"
    args: tuple[Node, ...]

    def canonical(self) -> str:
        return f" {self.op} ".join(f"({a.canonical()})" for a in self.args)


Node = Cmp | Not | BoolOp

_TOKEN = re.compile(r"""\s*(?:(?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")|(?P<op><=|>=|!=|==|=|<|>|\(|\)|,)"""
                    r"""|(?P<word>[^\s()=!<>,'"]+))""")
_KEYWORDS = {"and", "or", "not", "in", "contains", "prefix"}
_BARE = re.compile(r"^[\w.:/@+-]+$")  # a value written without quotes in the canonical form


def quote(value: str) -> str:
    """``value`` as a quoted string of the filter language (what a caller writes a user's value into a filter with)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _tokens(text: str) -> list[tuple[str, str, int]]:
    out, i, end = [], 0, len(text.rstrip())  # trailing space read once: slicing the rest per token was quadratic
    while i < end:
        m = _TOKEN.match(text, i)
        if not m or m.end() == i:
            raise BadInputError(f"filter: cannot read {text[i:].strip()[:20]!r} at position {i}")
        kind = m.lastgroup or ""
        val, start = m.group(kind), m.start(kind)
        if kind == "str":
            val = re.sub(r"\\(.)", r"\1", val[1:-1])
        elif kind == "word" and val.lower() in _KEYWORDS:
            kind, val = "kw", val.lower()
        elif kind == "op" and val == "==":  # the spelling of Python, Milvus and pandas' query: the same test as '='
            val = "="
        out.append((kind, val, start))
        i = m.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> tuple[str, str, int] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> tuple[str, str, int]:
        tok = self.peek()
        if tok is None:
            raise BadInputError(f"filter: {self.text!r} ends too early")
        self.i += 1
        return tok

    def fail(self, want: str) -> BadInputError:
        tok = self.peek()
        where = f"{tok[1]!r} at position {tok[2]}" if tok else "the end"
        return BadInputError(f"filter: expected {want}, found {where}")

    def expr(self) -> Node:
        return self.chain("or", self.conj)

    def conj(self) -> Node:
        return self.chain("and", self.neg)

    def chain(self, kw: str, part: Callable[[], Node]) -> Node:
        """``part (kw part)*``: one operand alone, or all of them joined by the keyword (``or`` binds looser)."""
        args = [part()]
        while (t := self.peek()) and t[:2] == ("kw", kw):
            self.i += 1
            args.append(part())
        return args[0] if len(args) == 1 else BoolOp(kw, tuple(args))

    def neg(self) -> Node:
        t = self.peek()
        if t and t[:2] == ("kw", "not"):
            self.i += 1
            return Not(self.neg())
        return self.atom()

    def atom(self) -> Node:
        t = self.peek()
        if t and t[:2] == ("op", "("):
            self.i += 1
            node = self.expr()
            if (self.peek() or ("", "", 0))[:2] != ("op", ")"):
                raise self.fail("')'")
            self.i += 1
            return node
        if not t or t[0] not in ("word", "str"):
            raise self.fail("a field name")
        field_name = self.take()[1]
        op_tok = self.peek()
        if not op_tok or op_tok[1] not in OPS or op_tok[0] == "str":
            raise self.fail(f"an operator after {field_name!r} ({' '.join(OPS)})")
        op = self.take()[1]
        if op == "in":
            if (self.peek() or ("", "", 0))[:2] != ("op", "("):
                raise self.fail(f"'(' after '{field_name} in'")
            self.i += 1
            values = [self.value(field_name, op)]
            while (self.peek() or ("", "", 0))[:2] == ("op", ","):
                self.i += 1
                values.append(self.value(field_name, op))
            if (self.peek() or ("", "", 0))[:2] != ("op", ")"):
                raise self.fail("',' or ')' in a list of values")
            self.i += 1
            return Cmp(field_name, op, tuple(values))
        return Cmp(field_name, op, (self.value(field_name, op),))

    def value(self, field_name: str, op: str) -> str:
        t = self.peek()
        if not t or t[0] not in ("word", "str"):
            raise self.fail(f"a value after '{field_name} {op}'")
        self.i += 1
        return t[1]


def parse(text: str) -> Node:
    """The expression tree of a filter; a malformed one is a one-line :class:`BadInputError`."""
    if not isinstance(text, str):
        raise BadInputError(f"filter: the expression must be a string such as \"year >= 2019\", not {type(text).__name__}")
    if not text.strip():
        raise BadInputError("filter: the expression is empty")
    p = _Parser(text)
    node = p.expr()
    if p.peek() is not None:
        raise p.fail("'and', 'or' or the end")
    return node


def leaves(node: Node) -> Iterable[Cmp]:
    if isinstance(node, Cmp):
        yield node
    elif isinstance(node, Not):
        yield from leaves(node.arg)
    else:
        for a in node.args:
            yield from leaves(a)


# -- the collection's fields -------------------------------------------------------------------------------------
class View(Protocol):
    """What compiling needs of an opened collection (a ``Collection`` or its build view)."""

    store: Any
    doc_rows: np.ndarray
    passage_rows: np.ndarray
    passage_doc: np.ndarray
    live: Allowed | None  # the build's live rows (None: nothing removed); every filter stays inside them

    def derived(self, key: str, make: Callable[[], Any]) -> Any: ...


@dataclass
class Field:
    name: str
    kind: str  # text | list | number | date | bool
    level: str  # doc | passage
    values: list[Any]  # one per document (or passage) in index order; None where absent
    count: int  # documents (passages) with a value

    def describe(self) -> dict[str, Any]:
        return {"field": self.name, "type": self.kind, "level": self.level, "count": self.count}


# ISO 8601 as metadata writes it: a year, a month, a day, a time, and with a time an offset (Z, +02:00, -0500)
_DATE = re.compile(r"^(\d{4}(?:-\d{2}(?:-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?)?)?)"
                   r"(?:(Z)|([+-])(\d{2}):?(\d{2}))?$")
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")  # what JSON and a user write; not nan, inf, 1_0


def _date(v: Any) -> np.datetime64 | None:
    """The instant an ISO date or time names, in UTC seconds (an offset is applied; a time without one is UTC)."""
    m = _DATE.match(v.strip()) if isinstance(v, str) else None
    if m is None:
        return None
    local, zulu, sign, hh, mm = m.groups()
    if (zulu or sign) and "T" not in local.replace(" ", "T"):
        return None  # an offset belongs to a time of day
    try:
        t = np.datetime64(local.replace(" ", "T"), "s")
    except ValueError:
        return None
    if sign:
        if int(hh) > 23 or int(mm) > 59:
            return None
        t -= (1 if sign == "+" else -1) * np.timedelta64(int(hh) * 60 + int(mm), "m")
    return t


def _kind(values: list[Any]) -> str:
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return "bool"
    if present and all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        return "number"
    if present and all(isinstance(v, list) for v in present):
        return "list"
    if present and all(_date(v) is not None for v in present):
        return "date"
    return "text"


def _positions(rows: np.ndarray, found: np.ndarray) -> np.ndarray:
    """Index position of each store row id in ``found`` (-1 for a row the build does not hold)."""
    rows = np.asarray(rows, dtype=np.int64)
    order = np.argsort(rows, kind="stable")
    at = np.searchsorted(rows[order], found)
    at = np.minimum(at, len(rows) - 1) if len(rows) else at
    hit = (rows[order][at] == found) if len(rows) else np.zeros(len(found), dtype=bool)
    return np.where(hit, order[at] if len(rows) else -1, -1)


def _read_fields(view: View) -> dict[str, Field]:
    n_docs = len(view.doc_rows)
    rows = view.store.doc_fields()
    at = _positions(view.doc_rows, np.array([r[0] for r in rows], dtype=np.int64))
    ids: list[Any] = [None] * n_docs
    titles: list[Any] = [None] * n_docs
    sources: list[Any] = [None] * n_docs
    cats: list[Any] = [None] * n_docs
    meta: dict[str, list[Any]] = {}
    for (_, did, title, md_json, cats_json), pos in zip(rows, at.tolist(), strict=True):
        if pos < 0:
            continue
        md = (json.loads(md_json) if md_json else None) or {}
        # its own id, then those of the source documents merged into it (hiera remove --ids finds them too)
        merged = [s["id"] for s in md.get("sources") or [] if isinstance(s, dict) and isinstance(s.get("id"), str)]
        ids[pos], titles[pos] = (list(dict.fromkeys([did, *merged])) if merged else did), title  # one str when alone
        srcs = [md["source"]] if isinstance(md.get("source"), str) else []
        srcs += [s["source"] for s in md.get("sources") or [] if isinstance(s, dict) and isinstance(s.get("source"), str)]
        sources[pos] = list(dict.fromkeys(srcs)) or None
        cats[pos] = [str(c) for c in (json.loads(cats_json) if cats_json else None) or []] or None
        for key, v in md.items():
            if key == "sources":
                continue
            col = meta.get(key)
            if col is None:  # not setdefault: its default, a list of every document, was built again per value
                col = meta[key] = [None] * n_docs
            col[pos] = [str(x) for x in v] if isinstance(v, list) else v
    out = {
        "id": Field("id", "list", "doc", ids, sum(i is not None for i in ids)),  # a dead position has none
        "title": Field("title", "text", "doc", titles, sum(t is not None for t in titles)),
        "source": Field("source", "list", "doc", sources, sum(s is not None for s in sources)),
        "categories": Field("categories", "list", "doc", cats, sum(c is not None for c in cats)),
    }
    for key, values in sorted(meta.items()):
        kind = _kind(values)
        if kind == "text":
            values = [v if v is None or isinstance(v, str) else json.dumps(v, ensure_ascii=False) for v in values]
        f = Field(key, kind, "doc", values, sum(v is not None for v in values))
        out[f"metadata.{key}"] = f
        out.setdefault(key, f)
    prow = view.store.section_paths()
    pat = _positions(view.passage_rows, np.array([r[0] for r in prow], dtype=np.int64))
    sections: list[Any] = [None] * len(view.passage_rows)
    for (_, path), pos in zip(prow, pat.tolist(), strict=True):
        if pos >= 0:
            sections[pos] = SECTION_SEP.join(json.loads(path))
    out["section"] = Field("section", "text", "passage", sections, sum(s is not None for s in sections))
    return out


def collection_fields(view: View) -> dict[str, Field]:
    """Every filterable field of the collection's live build (read once per build, then kept)."""
    return view.derived("hiera.index.filters.fields", lambda: _read_fields(view))


def fields_of(view: View) -> list[dict[str, Any]]:
    """Filterable fields with their type, level and how many documents (passages) have a value: ``hiera stats``."""
    seen, out = set(), []
    for name, f in collection_fields(view).items():
        if id(f) in seen:
            continue
        seen.add(id(f))
        out.append({**f.describe(), "field": name})
    return out


# -- compiling ---------------------------------------------------------------------------------------------------
def _check(node: Node, fields: dict[str, Field]) -> None:
    for leaf in leaves(node):
        f = fields.get(leaf.field)
        if f is None:
            known = ", ".join(k for k in fields if not k.startswith("metadata."))
            raise BadInputError(f"filter: unknown field {leaf.field!r} (fields: {known})")
        if leaf.op not in KIND_OPS[f.kind]:
            raise BadInputError(f"filter: field {leaf.field!r} is {f.kind}{_why_text(f)}; {leaf.op!r} needs a number "
                                "or date field" if leaf.op in ORDERED else
                                f"filter: field {leaf.field!r} is {f.kind}; it takes {' '.join(KIND_OPS[f.kind])}")
        for v in leaf.values:
            _coerce(f, leaf.field, v)


def _why_text(f: Field) -> str:
    """For a text field most of whose values are numbers or dates: the values that made it text, so that the
    document with ``"year": "unknown"`` can be found and mended (one such value types the field for every query)."""
    if f.kind != "text":
        return ""
    present = [v for v in f.values if v is not None]
    # a text field holds every value as text (numbers as JSON writes them)
    for kind, ok in (("number", lambda v: bool(_NUMBER.match(v))), ("date", lambda v: _date(v) is not None)):
        odd = [v for v in present if not ok(v)]
        if present and len(odd) <= len(present) // 2:
            shown = ", ".join(repr(v) for v in list(dict.fromkeys(map(str, odd)))[:3])
            return f" (not {kind}: {len(odd):,} of its {len(present):,} values are not {kind}s, e.g. {shown})"
    return ""


def _coerce(f: Field, name: str, v: str) -> Any:
    if f.kind == "number":
        if not _NUMBER.match(v):
            raise BadInputError(f"filter: field {name!r} is a number; {v!r} is not")
        return float(v)
    if f.kind == "date":
        d = _date(v)
        if d is None:
            raise BadInputError(f"filter: field {name!r} is a date; {v!r} is not one "
                              "(YYYY, YYYY-MM, YYYY-MM-DD, or with a time: YYYY-MM-DDTHH:MM[:SS][Z|+HH:MM])")
        return d
    if f.kind == "bool":
        if v.lower() not in ("true", "false"):
            raise BadInputError(f"filter: field {name!r} is true or false; {v!r} is neither")
        return v.lower() == "true"
    return v


def _leaf_mask(f: Field, name: str, op: str, raw: tuple[str, ...]) -> np.ndarray:
    vals = [_coerce(f, name, v) for v in raw]
    if f.kind in ("number", "date", "bool"):
        conv = (lambda x: _date(x) if isinstance(x, str) else None) if f.kind == "date" else (lambda x: x)
        if f.kind == "number":
            conv = lambda x: float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None  # noqa: E731
        items = [conv(x) if x is not None else None for x in f.values]
        if op in ("=", "in"):
            want = set(vals)
            return np.fromiter((x is not None and x in want for x in items), bool, len(items))
        if op == "!=":
            return np.fromiter((not (x is not None and x == vals[0]) for x in items), bool, len(items))
        cmp = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b}[op]
        return np.fromiter((x is not None and bool(cmp(x, vals[0])) for x in items), bool, len(items))
    # text and list: a list matches when any element does
    if op in ("=", "in", "!="):
        want = set(vals)
        def test(s: str) -> bool:
            return s in want
    elif op == "contains":
        low = vals[0].lower()
        def test(s: str) -> bool:
            return low in s.lower()
    else:  # prefix
        low = vals[0].lower()
        def test(s: str) -> bool:
            return s.lower().startswith(low)
    if f.kind == "list":  # a one-element list may be held as its string (ids: most documents have one)
        hit = np.fromiter((x is not None and (test(x) if isinstance(x, str) else any(test(s) for s in x))
                           for x in f.values), bool, len(f.values))
    else:
        hit = np.fromiter((x is not None and test(x) for x in f.values), bool, len(f.values))
    return ~hit if op == "!=" else hit


def _eval(node: Node, fields: dict[str, Field], level: str, passage_doc: np.ndarray) -> np.ndarray:
    if isinstance(node, Cmp):
        f = fields[node.field]
        mask = _leaf_mask(f, node.field, node.op, node.values)
        return mask[passage_doc] if level == "passage" and f.level == "doc" else mask
    if isinstance(node, Not):
        return ~_eval(node.arg, fields, level, passage_doc)
    masks = [_eval(a, fields, level, passage_doc) for a in node.args]
    return np.logical_and.reduce(masks) if node.op == "and" else np.logical_or.reduce(masks)


def compile_node(node: Node, fields: dict[str, Field], passage_doc: np.ndarray, n_docs: int) -> Allowed:
    """The masks of a checked expression: evaluated per passage when it reads a passage field (a document is then
    allowed when any of its passages is), else per document (each passage follows its document)."""
    _check(node, fields)
    passage_doc = np.asarray(passage_doc)
    if any(fields[leaf.field].level == "passage" for leaf in leaves(node)):
        passages = _eval(node, fields, "passage", passage_doc)
        docs = np.bincount(passage_doc[passages], minlength=n_docs)[:n_docs] > 0
    else:
        docs = _eval(node, fields, "doc", passage_doc)
        passages = docs[passage_doc]
    return Allowed(node.canonical(), np.ascontiguousarray(docs), np.ascontiguousarray(passages))


class _Compiled:
    """A build's compiled filters, the most recently used :data:`CACHED` of them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: OrderedDict[tuple[int, str], Allowed] = OrderedDict()


def compile_filter(view: View, expr: str | Allowed, generation: int = 0) -> Allowed:
    """``expr`` parsed, checked against ``view``'s fields and compiled to masks, kept per build.

    The cache key is ``(generation, canonical expression)``: equivalent
    spellings share one entry, and a generation bump (documents removed
    without a rebuild) makes every earlier mask stale.
    """
    if isinstance(expr, Allowed):
        return expr
    node = parse(expr)
    cache: _Compiled = view.derived("hiera.index.filters.compiled", _Compiled)
    key = (generation, node.canonical())
    with cache.lock:
        if key in cache.items:
            cache.items.move_to_end(key)
            return cache.items[key]
    allowed = compile_node(node, collection_fields(view), view.passage_doc, len(view.doc_rows))
    if view.live is not None:
        allowed = allowed.within(view.live)
    with cache.lock:
        cache.items[key] = allowed
        while len(cache.items) > CACHED:
            cache.items.popitem(last=False)
    return allowed
