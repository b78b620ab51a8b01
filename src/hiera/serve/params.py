"""Query parameters generated from the registry, and one-line validation errors.

Method parameters are not written by hand: ``/search``'s query parameters,
their OpenAPI schema and bounds, and ``/methods`` come from the registry in
:mod:`hiera.spec`, so a new method appears on the API (and on the page, which
builds its controls from ``/methods``) without touching the server. ``/answer``'s
reader parameters come from the registry's readers the same way.

Every error a user can cause is a 4xx with ``{"detail": "<one readable
line>"}``: the web page shows ``detail`` as is, so a validation error must be
a sentence, never a pydantic error list.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from typing import Any, Literal

from fastapi import Query, Request
from fastapi.exceptions import RequestValidationError

from hiera.spec import MAX_QUERY_CHARS, METHODS, READERS, Param, all_params

_PY_TYPES: dict[str, type] = {"int": int, "float": float, "bool": bool, "str": str, "path": str, "url": str}

# registry parameters a request may not set (model directories): named so that sending one is a clear 422
SERVER_SIDE_TYPE = {name: p.type for p in all_params().values() if not p.http for name in (p.name, *p.aliases)}
SERVER_SIDE = frozenset(SERVER_SIDE_TYPE)
READER_SERVER_SIDE = frozenset(p.name for s in READERS.values() for p in s.params if not p.http)


PARTIAL_HELP = (
    "a sharded index served by Ray: when a shard does not answer, return the other shards' merged hits instead of "
    "503, marked partial: true with missing_shards (and a 'partial' trace step); the answer then says partial: false "
    "when every shard answered. Methods that need every shard's scores or rows still answer 503"
)


_BOUND_ERRORS = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal"})


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return True  # not a number at all: pydantic's own message says so


def validation_message(exc: RequestValidationError) -> str:
    """One line from pydantic's error list: ``k: Input should be a valid integer``."""
    parts = []
    for err in exc.errors():
        loc = [str(x) for x in err.get("loc", ()) if x not in ("query", "path", "body")]
        msg = err.get("msg", "invalid")
        if err.get("type") in _BOUND_ERRORS and not _finite(err.get("input")):
            msg = "must be a finite number"  # nan compares false with any bound: pydantic names the bound instead
        parts.append(f"{'.'.join(loc) or 'request'}: {msg}")
    return "; ".join(parts) or "invalid request"


def query_names(signature: inspect.Signature) -> frozenset[str]:
    """The query parameter names a route declares (aliases as sent): anything else in a request is a typo."""
    return frozenset(
        getattr(p.default, "alias", None) or p.name for p in signature.parameters.values() if p.annotation is not Request
    )


def unknown_message(unknown: Sequence[str], accepted: frozenset[str]) -> str:
    """One line for query parameters no route takes, with the nearest known name when there is one."""
    import difflib

    first = unknown[0]
    near = difflib.get_close_matches(first, sorted(accepted), n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    names = ", ".join(repr(u) for u in unknown)
    return f"unknown parameter{'s' if len(unknown) > 1 else ''} {names}{hint}; /methods lists each method's parameters"


def query_parameter(
    p: Param, pyname: str, alias: str | None = None, users: Sequence[str] | None = None
) -> inspect.Parameter:
    """One query parameter for a registry parameter (bounds and choices in the schema); ``users``: who takes it."""
    if users is None:
        users = [n for n, s in METHODS.items() if any(x.name == p.name for x in s.params)]
    ann: Any = Literal[p.choices] if p.choices else _PY_TYPES[p.type]  # type: ignore[valid-type]
    q = Query(
        None,
        alias=alias or p.name,
        description=f"{p.help} ({', '.join(users)})" + ("" if alias is None else f"; alias of {p.name}"),
        ge=p.min,
        le=p.max,
        include_in_schema=alias is None,
    )
    return inspect.Parameter(pyname, inspect.Parameter.KEYWORD_ONLY, default=q, annotation=ann | None)


def request_parameters(k_max: int, k_means: str) -> list[inspect.Parameter]:
    """The request, the question, k, the retriever and ``partial``: what /search and /answer both take first."""
    kw = inspect.Parameter.KEYWORD_ONLY
    return [
        inspect.Parameter("request", kw, annotation=Request),
        inspect.Parameter("q", kw, annotation=str,
                          default=Query(..., description=f"the question, 1 to {MAX_QUERY_CHARS} characters")),
        inspect.Parameter("k", kw, annotation=int, default=Query(10, ge=1, le=k_max, description=f"{k_means}, 1 to {k_max}")),
        inspect.Parameter("retriever", kw, annotation=str,
                          default=Query("dhr", description="retrieval method; /methods lists them with their parameters")),
        inspect.Parameter("partial", kw, annotation=bool, default=Query(False, description=PARTIAL_HELP)),
        inspect.Parameter("filter", kw, annotation=str | None, default=Query(
            None, max_length=MAX_QUERY_CHARS,
            description="search only what this expression allows, e.g. source = wikipedia and year >= 2019 "
                        "(docs/FILTERS.md; fields: `hiera stats`); a bad one is a 422")),
    ]


def method_parameters() -> tuple[list[inspect.Parameter], dict[str, str]]:
    """Query parameters for every registry parameter and alias; maps each Python name to the canonical one."""
    params, canonical = [], {}
    for p in all_params().values():
        if not p.http:  # server-side only (model directories): set with `hiera build --set`
            continue
        for i, name in enumerate((p.name, *p.aliases)):
            pyname = f"p_{name}"
            params.append(query_parameter(p, pyname, None if i == 0 else name))
            canonical[pyname] = p.name
    return params, canonical


def reader_parameters() -> tuple[list[inspect.Parameter], dict[str, str]]:
    """``/answer``'s reader parameters (the registry's readers), as :func:`method_parameters` does for methods."""
    params, canonical = [], {}
    for spec in READERS.values():
        for p in spec.params:
            if not p.http:
                continue
            params.append(query_parameter(p, f"r_{p.name}", users=[spec.name]))
            canonical[f"r_{p.name}"] = p.name
    return params, canonical
