"""Every figure in README.md and bench/README.md is a recorded value or an allowlisted non-measurement.

``python -m bench.readme_figures`` lists the figures of both READMEs that neither back, file and line, and exits 1
when there are any; ``tests/bench/test_readme_figures.py`` runs the same check in ``make test``.

What counts as a figure (prose and tables; fenced or indented code blocks and `inline code` are commands and parameter
spellings, not claims, and are skipped):

* a decimal number (``77.8``, ``0.545``, ``−0.4``; a version such as ``3.11.8`` is not one),
* a number with ``%`` (``94.4%``, ``14–29%``: both ends),
* a ratio with ``×`` (``1.7×``, ``6.6×``),
* a number with a unit of time or memory (``6.9 ms``, ``336 s``, ``5 min``, ``2 h``, ``1,581 MB``, ``4.3 GB``).

Plain integers (counts, sizes, dates) are not figures.

What backs one, in this order:

1. the allowlist, ``bench/readme_allowlist.yaml``: reviewed phrases that hold non-measurements (defaults,
   sizes, targets, other papers' figures); a figure inside an allowlisted phrase is allowed. A phrase that is no
   longer in its README is an error, so the list cannot go stale;
2. a value of ``bench/expected.yaml``: a figure row's ``expected:`` or a claim's value computed from the rows'
   ``expected:`` values. A fraction row (the default ``unit``) backs its value as points or a percentage, and as
   written when the figure shows two decimals or more (0.778 backs ``77.8``, ``77.8%`` and ``0.778``, never
   ``0.8``); a claim's value (a difference) backs its absolute value the same way (−0.003 backs ``−0.3`` and
   ``0.3``); a ``unit: ratio`` row (a within-run ratio, such as one p50 over
   another) backs ``×`` figures as its value or its inverse (0.152 backs ``6.6×``); a ``unit: ms`` row backs
   figures in ms. Matching is at the figure's printed precision: the row's value rounds to what the README shows.
   Time and memory figures are backed only by rows of their unit, ``×`` figures only by ratio rows.

Scope: a figure is matched only against the rows and claims its block names. A block (a paragraph, a table, a
list item: text between blank lines) names them in an HTML comment, invisible on the rendered page, anywhere in
the block: ``<!-- figures: wiki_qa/ wiki_qa_trained/iter2/ -->`` (id prefixes, space-separated). A figure in a block
that names none is unbacked unless allowlisted. Within a few rows a figure that rounds to a row's value is rarely a
coincidence (over all 200 rows one decimal in four would be); the match still does not prove the sentence names the
right row: the ``says:`` claims check comparisons word for word.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
READMES = ("README.md", "bench/README.md")
EXPECTED = REPO / "bench" / "expected.yaml"
ALLOWLIST = REPO / "bench" / "readme_allowlist.yaml"

TIME_UNITS = {"ms": 1.0, "s": 1e3, "min": 60e3, "h": 3600e3}
MEMORY_UNITS = {"KB": 1e-3, "MB": 1.0, "GB": 1e3, "GiB": 1.024e3 * 1.024 * 1.024 * 1e0, "TB": 1e6}
_NUM = r"(?<![\w.\-/])([+−-]?)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?![\w]|\.\d)"
_UNIT = r"(?:\s?(%|×)|\s(ms|s|min|h|KB|MB|GB|GiB|TB)(?![\w/]))"
FIGURE = re.compile(_NUM + r"(?:" + _UNIT + r"|(?=\s?[–-]\s?\d[\d.,]*\s?(%|×)))?")


@dataclass(frozen=True)
class Figure:
    """One figure of a README: where it is, its text, value, unit kind and printed decimals."""

    file: str
    line: int
    start: int  # offset in the file's text
    text: str
    value: float
    unit: str  # "" (a plain decimal), "%", "×", "ms" (time, in ms) or "MB" (memory, in MB)
    decimals: int


def _masked(text: str) -> str:
    """The text with fenced code blocks and inline code spans blanked (same length, so offsets hold)."""
    def blank(m: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", m.group(0))

    text = re.sub(r"^```.*?^```[^\n]*$", blank, text, flags=re.S | re.M)
    text = re.sub(r"<!--.*?-->", blank, text, flags=re.S)
    # indented code blocks: a block (after a blank line) whose every line starts with four spaces
    text = re.sub(r"(?:(?<=\n\n)|\A)(?: {4}[^\n]*(?:\n|\Z))+", blank, text)
    return re.sub(r"`[^`\n]*`", blank, text)


def figures(name: str, text: str) -> list[Figure]:
    """The figures of one README's text, in order."""
    masked = _masked(text)
    out: list[Figure] = []
    for m in FIGURE.finditer(masked):
        sign, whole, frac, sym, unit, range_unit = m.groups()
        frac = frac or ""
        unit_kind = sym or range_unit or ""
        scale = 1.0
        if unit in TIME_UNITS:
            unit_kind, scale = "ms", TIME_UNITS[unit]
        elif unit in MEMORY_UNITS:
            unit_kind, scale = "MB", MEMORY_UNITS[unit]
        if not frac and not unit_kind:
            continue  # a plain integer: a count, a size or a date
        value = float(whole.replace(",", "") + frac) * scale * (-1 if sign in ("−", "-") else 1)
        out.append(Figure(name, masked.count("\n", 0, m.start()) + 1, m.start(), text[m.start() : m.end()].strip(),
                          value, unit_kind, max(len(frac) - 1, 0)))
    return out


def _paragraphs(text: str) -> list[tuple[int, int, str]]:
    """(start, end, text) of each blank-line separated block."""
    out, pos = [], 0
    for block in re.split(r"(\n\s*\n)", text):
        if block.strip():
            out.append((pos, pos + len(block), block))
        pos += len(block)
    return out


SCOPE = re.compile(r"<!--\s*figures:\s*(.*?)\s*-->", re.S)


def scopes(text: str) -> list[tuple[int, int, tuple[str, ...]]]:
    """(start, end, id prefixes) of each block that names some (see the module docstring)."""
    out = []
    for start, end, block in _paragraphs(text):
        prefixes = tuple(p for m in SCOPE.finditer(block) for p in m.group(1).split())
        if prefixes:
            out.append((start, end, prefixes))
    return out


@dataclass(frozen=True)
class Value:
    """A recorded value that can back figures: a figure row's or a claim's."""

    id: str
    value: float
    unit: str  # "fraction", "ratio", "ms", "claim"


def recorded(spec: Mapping[str, Any]) -> list[Value]:
    """The figure rows' expected values and the claims' values computed from them."""
    from bench.check_expected import expression, value_of

    rows = spec.get("figures") or []
    values = [Value(r["id"], float(r["expected"]), str(r.get("unit", "fraction"))) for r in rows]
    by_id = {r["id"]: float(r["expected"]) for r in rows}
    for c in spec.get("claims") or []:
        values.append(Value(c["id"], value_of(expression(c), by_id), "claim"))
    return values


def _rounds_to(x: float, fig: Figure) -> bool:
    return abs(abs(x) - abs(fig.value)) <= 0.5 * 10 ** -fig.decimals + 1e-9


def backs(v: Value, fig: Figure) -> bool:
    """Whether ``v`` reads as ``fig`` at the figure's printed precision (see the module docstring)."""
    if fig.unit in ("ms", "MB"):
        return v.unit == fig.unit and _rounds_to(v.value, fig)
    if fig.unit == "×":
        return v.unit == "ratio" and (_rounds_to(v.value, fig) or (v.value != 0 and _rounds_to(1 / v.value, fig)))
    as_written = fig.unit == "" and fig.decimals >= 2  # "0.545"; a one-decimal "0.5" would match too much
    if v.unit in ("fraction", "claim"):
        return _rounds_to(100 * v.value, fig) or (as_written and _rounds_to(v.value, fig))
    return v.unit == "ratio" and as_written and _rounds_to(v.value, fig)


def _in_scope(value_id: str, prefixes: tuple[str, ...]) -> bool:
    return any(value_id.startswith(p) for p in prefixes)


def allowed_spans(name: str, text: str, phrases: Iterable[str]) -> tuple[list[tuple[int, int]], list[str]]:
    """The spans of ``text`` the allowlist's phrases for ``name`` cover (whitespace-insensitive), and the phrases
    not found."""
    spans, missing = [], []
    for phrase in phrases:
        pattern = r"\s+".join(re.escape(w) for w in phrase.split())
        found = [(m.start(), m.end()) for m in re.finditer(pattern, text)]
        if not found:
            missing.append(phrase)
        spans.extend(found)
    return spans, missing


@dataclass
class Verdict:
    backed: list[tuple[Figure, str]]  # each with the id of one value that backs it
    allowed: list[Figure]
    unbacked: list[Figure]
    stale: list[str]  # allowlisted phrases no longer in their README


def check(repo: Path = REPO, expected: Path | None = None, allowlist: Path | None = None,
          readmes: Iterable[str] = READMES) -> Verdict:
    spec = yaml.safe_load((expected or repo / "bench" / "expected.yaml").read_text(encoding="utf-8"))
    allow = yaml.safe_load((allowlist or repo / "bench" / "readme_allowlist.yaml").read_text(encoding="utf-8")) or {}
    values = recorded(spec)
    verdict = Verdict([], [], [], [])
    for name in readmes:
        text = (repo / name).read_text(encoding="utf-8")
        spans, missing = allowed_spans(name, text, [str(e["phrase"]) for e in allow.get(name) or []])
        verdict.stale += [f"{name}: {p}" for p in missing]
        paragraph_scopes = scopes(text)
        for fig in figures(name, text):
            if any(s <= fig.start < e for s, e in spans):
                verdict.allowed.append(fig)
                continue
            prefixes = next((p for s, e, p in paragraph_scopes if s <= fig.start < e), ())
            hit = next((v.id for v in values if _in_scope(v.id, prefixes) and backs(v, fig)), None)
            if hit is None:
                verdict.unbacked.append(fig)
            else:
                verdict.backed.append((fig, hit))
    return verdict


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backed", action="store_true", help="also list each backed figure with the id that backs it")
    args = ap.parse_args(argv)
    v = check()
    if args.backed:
        for fig, vid in v.backed:
            print(f"{fig.file}:{fig.line}: {fig.text}  <- {vid}")
    for fig in v.unbacked:
        print(f"{fig.file}:{fig.line}: unbacked {fig.text}")
    for phrase in v.stale:
        print(f"allowlisted phrase not found: {phrase}")
    print(f"{len(v.backed)} backed, {len(v.allowed)} allowlisted, {len(v.unbacked)} unbacked, "
          f"{len(v.stale)} stale allowlist entries")
    return 1 if v.unbacked or v.stale else 0


if __name__ == "__main__":
    sys.exit(main())
