"""A small schema check for the JSON files hiera reads back: manifests, tuning files, model metadata.

These files are read on every open and steer what is loaded (model paths,
FAISS factory strings, method defaults), so a hand-edited or damaged one must
fail with a line naming the bad field, not with a ``KeyError`` deep inside a
retriever. The schema language is deliberately tiny (no dependency):

* ``INT``, ``NUM``, ``STR``, ``BOOL``, ``ANY`` and :class:`Int`/:class:`Num`
  with bounds;
* :class:`Obj` — an object with typed fields, ``required`` ones among them,
  other fields allowed (newer hiera versions may add some);
* :class:`Map` — an object whose values all have one type;
* :class:`Opt` — the value may also be ``null``.

:func:`validate` raises :class:`SchemaError` with the dotted path of the first
bad field; callers wrap it in the error kind their file calls for.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hiera.errors import HieraError


class SchemaError(HieraError):
    """A JSON value does not have the expected shape; the message names the field."""


class Spec:
    def check(self, value: Any, where: str) -> None:  # pragma: no cover - interface
        raise NotImplementedError


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _fail(where: str, expected: str, value: Any) -> SchemaError:
    return SchemaError(f"field {where or '(top level)'} must be {expected}, got {_shown(value)}")


@dataclass(frozen=True)
class Int(Spec):
    min: int | None = None
    max: int | None = None

    def check(self, value: Any, where: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _fail(where, "an integer", value)
        if self.min is not None and value < self.min:
            raise _fail(where, f"an integer >= {self.min}", value)
        if self.max is not None and value > self.max:
            raise _fail(where, f"an integer <= {self.max}", value)


@dataclass(frozen=True)
class Num(Spec):
    min: float | None = None
    max: float | None = None

    def check(self, value: Any, where: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise _fail(where, "a finite number", value)
        if self.min is not None and value < self.min:
            raise _fail(where, f"a number >= {self.min}", value)
        if self.max is not None and value > self.max:
            raise _fail(where, f"a number <= {self.max}", value)


@dataclass(frozen=True)
class Str(Spec):
    nonempty: bool = False

    def check(self, value: Any, where: str) -> None:
        if not isinstance(value, str) or (self.nonempty and not value.strip()):
            raise _fail(where, "a non-empty string" if self.nonempty else "a string", value)


@dataclass(frozen=True)
class Bool(Spec):
    def check(self, value: Any, where: str) -> None:
        if not isinstance(value, bool):
            raise _fail(where, "true or false", value)


@dataclass(frozen=True)
class Any_(Spec):
    def check(self, value: Any, where: str) -> None:
        return None


@dataclass(frozen=True)
class Opt(Spec):
    inner: Spec

    def check(self, value: Any, where: str) -> None:
        if value is not None:
            self.inner.check(value, where)


@dataclass(frozen=True)
class Map(Spec):
    values: Spec = field(default_factory=Any_)

    def check(self, value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise _fail(where, "an object", value)
        for k, v in value.items():
            self.values.check(v, f"{where}.{k}" if where else str(k))


@dataclass(frozen=True)
class Obj(Spec):
    fields: Mapping[str, Spec]
    required: frozenset[str] = frozenset()

    def check(self, value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise _fail(where, "an object", value)
        for name in sorted(self.required):
            if name not in value:
                raise SchemaError(f"field {where + '.' if where else ''}{name} is missing")
        for name, spec in self.fields.items():
            if name in value:
                spec.check(value[name], f"{where}.{name}" if where else name)


INT, NUM, STR, BOOL, ANY = Int(), Num(), Str(), Bool(), Any_()


def validate(value: Any, spec: Spec) -> None:
    """Raise :class:`SchemaError` naming the first field of ``value`` that does not match ``spec``."""
    spec.check(value, "")


# -- the files hiera reads back ---------------------------------------------------------------------------
MODEL_INFO = Obj(
    {"name": STR, "path": Str(nonempty=True), "fingerprint": Str(nonempty=True), "dim": Int(min=1),
     "max_seq_length": Int(min=1), "query_prompt": STR, "document_prompt": STR, "backend": STR,
     "device": STR, "precision": STR},
    required=frozenset({"path", "fingerprint", "dim"}),
)

# a build's name table (hiera.index.names), and a changed build's delta names (the manifest's updates.names)
NAMES = Obj({"rows": Int(min=0), "documents": Int(min=0), "keys": Int(min=0), "has_prior": BOOL, "bm25": BOOL,
             "dense": BOOL, "tokens": Int(min=0), "prior_top": Num(min=0)}, required=frozenset({"rows", "documents"}))
MANIFEST = Obj(
    {
        "format": STR,
        "corpus_version": Int(min=0),
        "documents": Int(min=0),
        "passages": Int(min=0),
        "passage_rules": Map(),
        "bm25": Opt(Obj({"k1": Num(min=0), "b": Num(min=0, max=1), "method": STR, "doc_text": STR,
                         "tokenizer": Map()})),
        "models": Obj({"passage": MODEL_INFO, "doc": MODEL_INFO}),
        "faiss": Map(Str(nonempty=True)),
        "defaults": Map(Map()),
        "names": NAMES,
        "profile": Obj({"name": STR, "asked": STR, "passages": Int(min=0), "threshold": Int(min=0), "why": STR},
                       required=frozenset({"name"})),
        "updates": Obj({"generation": Int(min=1), "base_version": Int(min=0), "base": Map(Int(min=0)), "delta": Map(Int(min=0)),
                        "dead": Map(Int(min=0)), "names": NAMES}, required=frozenset({"generation", "base", "dead"})),
        "files": Map(Int(min=0)),
        "checksums": Map(Str(nonempty=True)),
        "versions": Map(),
        "created": STR,
    },
    required=frozenset({"format", "corpus_version", "documents", "passages", "passage_rules"}),
)

TUNED = Obj({"build": STR, "params": Map(Map()), "meta": Map()}, required=frozenset({"params"}))

_READER_SIZES = ("max_length", "stride", "hidden_size", "vocab_size", "tokenizer_size")
READER_META = Obj({k: Int(min=1) for k in _READER_SIZES}, required=frozenset(_READER_SIZES))

RERANKER_META = Obj({"threshold": Num(min=0, max=1), "weight": Num(min=0, max=1), "dev": Map(), "train": Map(),
                     "args": Map()})
