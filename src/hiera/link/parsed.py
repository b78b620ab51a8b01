"""A spaCy parse as plain data: what mention detection and the rules decomposer read of it.

Mention detection, the rules decomposer and the bridge filler read tokens,
their dependency tree, named entities and noun chunks, nothing more. Holding
exactly that as a small value object means a parse can cross a process
boundary as JSON (:mod:`hiera.link.parse_worker`: a cold ``hiera search``
loads spaCy in a second process, on the other core, while this one opens the
build), and that both ways of parsing run the very same rules on the very
same data. The names follow spaCy's (``dep_``, ``subtree``, ``left_edge`` …)
so the rules read as spaCy code does; the tree walks are spaCy's definitions,
tested against spaCy itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, overload

# Per-token fields, in the order of a serialized row.
_FIELDS = ("text", "idx", "lemma_", "pos_", "tag_", "dep_", "head", "left_edge", "ent_type_", "flags")
_STOP, _ALPHA, _NUM = 1, 2, 4


class Token:
    """One token of a :class:`Parsed`; read-only, spaCy's attribute names."""

    __slots__ = ("doc", "i", "text", "idx", "lemma_", "pos_", "tag_", "dep_", "_head", "_left_edge", "ent_type_",
                 "_flags", "lower_")

    def __init__(self, doc: Parsed, i: int, row: list[Any]) -> None:
        (self.text, self.idx, self.lemma_, self.pos_, self.tag_, self.dep_, self._head, self._left_edge,
         self.ent_type_, self._flags) = row
        self.doc, self.i, self.lower_ = doc, i, self.text.lower()

    @property
    def is_stop(self) -> bool:
        return bool(self._flags & _STOP)

    @property
    def is_alpha(self) -> bool:
        return bool(self._flags & _ALPHA)

    @property
    def like_num(self) -> bool:
        return bool(self._flags & _NUM)

    @property
    def head(self) -> Token:
        return self.doc[self._head]

    @property
    def left_edge(self) -> Token:
        return self.doc[self._left_edge]

    @property
    def lefts(self) -> Iterator[Token]:
        return (t for t in self.doc._children[self.i] if t.i < self.i)

    @property
    def rights(self) -> Iterator[Token]:
        return (t for t in self.doc._children[self.i] if t.i > self.i)

    @property
    def children(self) -> Iterator[Token]:
        return iter(self.doc._children[self.i])

    @property
    def subtree(self) -> Iterator[Token]:
        """spaCy's order: each left child's subtree, the token, each right child's subtree."""
        for t in self.lefts:
            yield from t.subtree
        yield self
        for t in self.rights:
            yield from t.subtree

    def __len__(self) -> int:
        return len(self.text)

    def __repr__(self) -> str:
        return self.text


class Span:
    """Tokens ``start:end`` of a :class:`Parsed` (an entity or a noun chunk)."""

    __slots__ = ("doc", "start", "end", "label_", "_root")

    def __init__(self, doc: Parsed, start: int, end: int, label: str = "", root: int = -1) -> None:
        self.doc, self.start, self.end, self.label_, self._root = doc, start, end, label, root

    @property
    def root(self) -> Token:
        return self.doc[self._root]

    @property
    def start_char(self) -> int:
        return self.doc[self.start].idx

    @property
    def end_char(self) -> int:
        last = self.doc[self.end - 1]
        return last.idx + len(last.text)

    @property
    def text(self) -> str:
        return self.doc.text[self.start_char : self.end_char]

    def __iter__(self) -> Iterator[Token]:
        return iter(self.doc.tokens[self.start : self.end])

    def __len__(self) -> int:
        return self.end - self.start

    def __repr__(self) -> str:
        return self.text


class Parsed:
    """A parsed text: tokens with their tree, named entities (``ents``) and ``noun_chunks``."""

    def __init__(self, text: str, rows: list[list[Any]], ents: list[list[Any]], chunks: list[list[int]]) -> None:
        self.text = text
        self.tokens = [Token(self, i, row) for i, row in enumerate(rows)]
        self._children: list[list[Token]] = [[] for _ in self.tokens]
        for t in self.tokens:
            if t._head != t.i:
                self._children[t._head].append(t)
        self.ents = tuple(Span(self, s, e, label) for s, e, label in ents)
        self.noun_chunks = tuple(Span(self, s, e, root=r) for s, e, r in chunks)

    @classmethod
    def from_spacy(cls, doc: Any) -> Parsed:
        rows = [[t.text, t.idx, t.lemma_, t.pos_, t.tag_, t.dep_, t.head.i, t.left_edge.i, t.ent_type_,
                 _STOP * t.is_stop | _ALPHA * t.is_alpha | _NUM * t.like_num] for t in doc]
        ents = [[e.start, e.end, e.label_] for e in doc.ents]
        chunks = [[c.start, c.end, c.root.i] for c in doc.noun_chunks] if doc.has_annotation("DEP") else []
        return cls(doc.text, rows, ents, chunks)

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "fields": list(_FIELDS),
                "tokens": [[getattr(t, f if f not in ("head", "left_edge", "flags") else "_" + f) for f in _FIELDS]
                           for t in self.tokens],
                "ents": [[e.start, e.end, e.label_] for e in self.ents],
                "noun_chunks": [[c.start, c.end, c._root] for c in self.noun_chunks]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Parsed:
        if d.get("fields") != list(_FIELDS):
            raise ValueError(f"a parse with fields {d.get('fields')}, expected {list(_FIELDS)}")
        return cls(d["text"], d["tokens"], d["ents"], d["noun_chunks"])

    def __len__(self) -> int:
        return len(self.tokens)

    def __iter__(self) -> Iterator[Token]:
        return iter(self.tokens)

    @overload
    def __getitem__(self, i: int) -> Token: ...
    @overload
    def __getitem__(self, i: slice) -> list[Token]: ...
    def __getitem__(self, i: int | slice) -> Token | list[Token]:
        return self.tokens[i]
