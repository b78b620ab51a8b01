"""A result's trace as an indented tree (``hiera search --explain``): what each step did, in order.

Each :class:`~hiera.results.TraceStep` is a branch with its time;
its detail nests below it. A mapping whose values are all scalars, or a
list item that is one, prints on one line (``title: Ed Wood · score: 0.93``)
so a linked title, a mention or a candidate reads as one line; anything
nested opens a deeper level. Long lists are cut at ``limit`` items, saying
how many were left out.
"""

from __future__ import annotations

from typing import Any

from hiera.results import Results

INDENT = "  "


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, str | int | float | bool)


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list) and all(_scalar(x) for x in v):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    return str(v)


def _flat(d: dict[str, Any]) -> bool:
    return all(_scalar(v) or (isinstance(v, list) and all(_scalar(x) for x in v)) for v in d.values())


def _line(d: dict[str, Any]) -> str:
    return " · ".join(f"{k}: {_fmt(v)}" for k, v in d.items())


def _render(value: Any, depth: int, out: list[str], limit: int) -> None:
    pad = INDENT * depth
    if isinstance(value, dict):
        for k, v in value.items():
            if _scalar(v) or (isinstance(v, list) and all(_scalar(x) for x in v)):
                out.append(f"{pad}{k}: {_fmt(v)}")
            elif isinstance(v, dict) and _flat(v) and v:
                out.append(f"{pad}{k}: {_line(v)}")
            else:
                size = f" ({len(v)})" if isinstance(v, list | dict) else ""
                out.append(f"{pad}{k}{size}")
                _render(v, depth + 1, out, limit)
    elif isinstance(value, list):
        for item in value[:limit]:
            if isinstance(item, dict) and _flat(item):
                out.append(f"{pad}- {_line(item)}")
            elif isinstance(item, dict):
                flat = {k: v for k, v in item.items() if _scalar(v)}
                out.append(f"{pad}- {_line(flat)}" if flat else f"{pad}-")
                _render({k: v for k, v in item.items() if not _scalar(v)}, depth + 1, out, limit)
            else:
                out.append(f"{pad}- {_fmt(item)}")
        if len(value) > limit:
            out.append(f"{pad}… {len(value) - limit} more")
    else:
        out.append(f"{pad}{_fmt(value)}")


def trace_tree(res: Results, limit: int = 20) -> str:
    """The trace of ``res`` as an indented tree, one step per top-level branch."""
    out = [f"how this was found: {res.retriever} · {res.level} · {len(res)} results"]
    for step in res.trace:
        out.append(f"{INDENT}{step.name}  ({step.ms:.1f} ms)")
        _render(step.detail, 2, out, limit)
    return "\n".join(out)
