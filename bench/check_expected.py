"""Rerun the figures in ``bench/expected.yaml`` and fail on any drift.

Each entry holds the command that produces a figure (a plain ``hiera ...``
command where the CLI can express it, else ``python -m bench.<script>``), an
optional ``setup:`` command that builds the collection it needs, the JSON file
the command writes, the key path of the figure in that JSON, the expected
value and a tolerance (Pyserini's two-click reproductions, in miniature).

Run from the repository root. Every distinct ``setup`` of the selected
entries runs once, in order of first appearance, then every distinct
``command``, each without a shell and with the repository root as working
directory; ``python`` is this interpreter and ``hiera`` the script beside it.

    python -m bench.check_expected              # set up, rerun everything, then compare
    python -m bench.check_expected --no-run     # compare the JSON already in bench/out
    python -m bench.check_expected --only wiki_qa
    python -m bench.check_expected --commands   # print what a run would execute, run nothing

Beside the figures, ``claims:`` holds the comparisons the READMEs state in
words ("ahead of", "within 0.5 points of", "+5 over the best single
retriever"): a figure can stay within its tolerance while the sentence built on
it stops being true, so each claim is checked like a figure. A claim names
existing figure ids and combines them with ``difference: [a, b]`` (a − b),
``max_of: [...]`` or ``min_of: [...]`` (operands nest: ``difference: [a,
{max_of: [b, c]}]``), and states bounds on the result: ``at_least`` (≥),
``more_than`` (>), ``at_most`` (≤), ``less_than`` (<). ``says:`` quotes the
sentence it checks. Its value comes from the same JSON as its figures (after
their commands ran; with ``--no-run`` from the JSON on disk); a claim that does
not hold fails the run as a drifting figure does. ``--only`` selects claims by
id prefix too, and a selected claim brings the figures it needs (their
commands, their rows). The file is validated when loaded: a claim naming an
unknown figure id, or malformed, is a one-line error (exit 2).

A figure row may say ``unit: ratio`` (a within-run ratio, such as one p50 over another: speed is published that
way, never as absolute times) and ``device: NAME`` (the machine it was recorded on, e.g. ``nvidia-h100``; rows
without one were recorded on the project's CPU machine, ``cpu``). A run compares only the rows of its
``--device`` (default ``cpu``) and the claims that read only those: a GPU figure is not re-run elsewhere.
A row whose JSON writes percentages says ``scale: 0.01``: the JSON's value times the scale is the figure, so
``expected:`` stays a fraction like every other row's.
"""

from __future__ import annotations

import argparse
import json
import operator
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from bench.common import REPO, table

FIGURE_KEYS = ("id", "command", "json", "path", "expected", "tolerance")
FORMS = ("difference", "max_of", "min_of")
BOUNDS: dict[str, tuple[str, Callable[[float, float], bool]]] = {
    "at_least": ("≥", operator.ge), "more_than": (">", operator.gt),
    "at_most": ("≤", operator.le), "less_than": ("<", operator.lt),
}
CLAIM_KEYS = {"id", "says", *FORMS, *BOUNDS}


class SpecError(ValueError):
    """A malformed expected.yaml, said in one line that names the entry: caught at load, before anything runs."""


def lookup(data: Any, path: list[str]) -> Any:
    for key in path:
        data = data[key]
    return data


def argv_of(command: str) -> list[str]:
    """The argv of an entry's command: ``python`` → this interpreter, ``hiera`` → the script beside it."""
    argv = shlex.split(command)
    if not argv:
        raise ValueError("empty command")
    if argv[0] == "python":
        argv[0] = sys.executable
    elif argv[0] == "hiera":
        argv[0] = str(Path(sys.executable).with_name("hiera"))
    return argv


def plan(entries: Iterable[dict[str, Any]]) -> list[str]:
    """Distinct setups (first appearance order), then distinct commands: what a run executes."""
    entries = list(entries)
    setups = [e["setup"] for e in entries if e.get("setup")]
    return list(dict.fromkeys(setups)) + list(dict.fromkeys(e["command"] for e in entries))


def _check_expression(node: Any, where: str, figure_ids: set[str]) -> None:
    """A figure id, or ``{form: [operands]}`` with operands of the same kind; raise SpecError otherwise."""
    if isinstance(node, str):
        if node not in figure_ids:
            raise SpecError(f"{where}: unknown figure id {node!r}")
        return
    if not (isinstance(node, dict) and len(node) == 1 and next(iter(node)) in FORMS):
        raise SpecError(f"{where}: expected a figure id or one of {', '.join(FORMS)}, got {node!r}")
    form, operands = next(iter(node.items()))
    if not isinstance(operands, list) or len(operands) < 2 or (form == "difference" and len(operands) != 2):
        wanted = "two operands" if form == "difference" else "a list of at least two operands"
        raise SpecError(f"{where}: {form} needs {wanted}, got {operands!r}")
    for op in operands:
        _check_expression(op, where, figure_ids)


def expression(claim: Mapping[str, Any]) -> dict[str, Any]:
    """The claim's value as an expression node: its one form key and operands."""
    return {k: v for k, v in claim.items() if k in FORMS}


def load(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The file's figures and claims, validated: every figure has its keys, ids are unique (figures and claims share
    one namespace, so ``--only`` selects both), and every claim has one form over known figure ids and a bound."""
    try:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise SpecError(f"not YAML: {' '.join(str(err).split())}") from err
    if not isinstance(spec, dict) or not isinstance(spec.get("figures"), list):
        raise SpecError("no figures: list")
    figures, claims = spec["figures"], spec.get("claims") or []
    if not isinstance(claims, list):
        raise SpecError("claims: must be a list")
    seen: set[str] = set()
    for i, e in enumerate(figures):
        missing = [k for k in FIGURE_KEYS if not isinstance(e, dict) or k not in e]
        if missing:
            raise SpecError(f"figure {e.get('id', i) if isinstance(e, dict) else i}: missing {', '.join(missing)}")
        if e["id"] in seen:
            raise SpecError(f"figure {e['id']}: duplicate id")
        scale = e.get("scale", 1)
        if isinstance(scale, bool) or not isinstance(scale, int | float) or scale <= 0:
            raise SpecError(f"figure {e['id']}: scale must be a positive number, got {scale!r}")
        seen.add(e["id"])
    figure_ids = set(seen)
    for i, c in enumerate(claims):
        if not isinstance(c, dict) or not isinstance(c.get("id"), str):
            raise SpecError(f"claim #{i + 1}: needs an id")
        where = f"claim {c['id']}"
        if c["id"] in seen:
            raise SpecError(f"{where}: duplicate id")
        seen.add(c["id"])
        unknown = sorted(set(c) - CLAIM_KEYS)
        if unknown:
            raise SpecError(f"{where}: unknown key(s) {', '.join(unknown)} (forms: {', '.join(FORMS)}; bounds: "
                            f"{', '.join(BOUNDS)})")
        forms = [k for k in c if k in FORMS]
        if len(forms) != 1:
            raise SpecError(f"{where}: needs exactly one of {', '.join(FORMS)}, has {', '.join(forms) or 'none'}")
        _check_expression(expression(c), where, figure_ids)
        bounds = [k for k in c if k in BOUNDS]
        if not bounds:
            raise SpecError(f"{where}: states no bound ({', '.join(BOUNDS)})")
        for k in bounds:
            if isinstance(c[k], bool) or not isinstance(c[k], int | float):
                raise SpecError(f"{where}: {k} must be a number, got {c[k]!r}")
    return figures, claims


def figures_of(node: Any) -> list[str]:
    """The figure ids an expression (or a claim) reads, in order of appearance, each once."""
    if isinstance(node, str):
        return [node]
    ids = [f for form, operands in node.items() if form in FORMS for op in operands for f in figures_of(op)]
    return list(dict.fromkeys(ids))


def value_of(node: Any, values: Mapping[str, float]) -> float:
    """An expression's value from the figures' values (KeyError on a figure without one).

    Rounded to 9 decimals: figures carry at most 4, and float noise must not decide a bound that the values meet
    exactly (0.954 − 0.958 is −0.0040000000000000036, not −0.004).
    """
    if isinstance(node, str):
        return values[node]
    ((form, operands),) = ((k, v) for k, v in node.items() if k in FORMS)
    got = [value_of(op, values) for op in operands]
    if form == "difference":
        return round(got[0] - got[1], 9)
    return max(got) if form == "max_of" else min(got)


def holds(claim: Mapping[str, Any], value: float) -> bool:
    """Every bound the claim states is met by ``value``."""
    return all(test(value, float(claim[k])) for k, (_, test) in BOUNDS.items() if k in claim)


def bound_text(claim: Mapping[str, Any]) -> str:
    """``≥ 0.05``, ``≥ -0.005 and ≤ 0.005``: the claim's bounds as its table row shows them."""
    return " and ".join(f"{sign} {claim[k]:g}" for k, (sign, _) in BOUNDS.items() if k in claim)


def select(figures: list[dict[str, Any]], claims: list[dict[str, Any]],
           only: str | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Figures and claims whose id starts with ``only`` (all without it), plus the figures the chosen claims read:
    a claim's value is only as good as its figures, so they are rerun and compared with it."""
    chosen = [c for c in claims if not only or c["id"].startswith(only)]
    needed = {f for c in chosen for f in figures_of(expression(c))}
    return [e for e in figures if not only or e["id"].startswith(only) or e["id"] in needed], chosen


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--file", type=Path, default=REPO / "bench" / "expected.yaml")
    ap.add_argument("--no-run", action="store_true", help="compare the JSON already written; run nothing")
    ap.add_argument("--commands", action="store_true", help="print the setups and commands a run would execute, then stop")
    ap.add_argument("--device", default="cpu",
                    help="compare the rows recorded on this device (rows without device: are cpu's)")
    ap.add_argument("--only", default=None,
                    help="only figures and claims whose id starts with this (a claim brings the figures it reads)")
    args = ap.parse_args()
    try:
        figures, claims = load(args.file)
    except SpecError as err:
        print(f"{args.file}: {err}", file=sys.stderr)
        return 2
    entries, claims = select(figures, claims, args.only)
    elsewhere = {e["id"] for e in entries if str(e.get("device", "cpu")) != args.device}
    if elsewhere:
        print(f"{len(elsewhere)} rows recorded on another device than {args.device} left out", file=sys.stderr)
        entries = [e for e in entries if e["id"] not in elsewhere]
        claims = [c for c in claims if not set(figures_of(expression(c))) & elsewhere]
    if not entries:
        print("no entries selected", file=sys.stderr)
        return 2
    if args.commands:
        print("\n".join(plan(entries)))
        return 0
    if not args.no_run:
        for cmd in plan(entries):
            print(f"$ {cmd}", flush=True)
            try:
                subprocess.run(argv_of(cmd), cwd=REPO, check=True)
            except (OSError, subprocess.CalledProcessError) as err:
                print(f"failed: {cmd}: {err}", file=sys.stderr)
                return 1
    rows, values, drifted = [], {}, 0
    for e in entries:
        try:
            data = json.loads((REPO / e["json"]).read_text(encoding="utf-8"))
            got = values[e["id"]] = float(lookup(data, e["path"])) * float(e.get("scale", 1))
            ok = abs(got - float(e["expected"])) <= float(e["tolerance"])
        except (OSError, KeyError, TypeError, ValueError) as err:
            got, ok = f"missing ({err.__class__.__name__})", False
        drifted += not ok
        rows.append({"id": e["id"], "expected": e["expected"], "tolerance": e["tolerance"], "got": got,
                     "status": "ok" if ok else "DRIFT"})
    broken = 0
    for c in claims:
        node = expression(c)
        absent = [f for f in figures_of(node) if f not in values]
        if absent:
            claim_got, ok = f"missing ({absent[0]})", False
        else:
            claim_got = value_of(node, values)
            ok = holds(c, claim_got)
        broken += not ok
        rows.append({"id": c["id"], "expected": bound_text(c), "tolerance": "claim", "got": claim_got,
                     "status": "ok" if ok else "FAIL"})
    print(table(rows))
    summary = f"{len(rows) - drifted - broken} ok, {drifted} drifted"
    print(f"\n{summary}, {broken} of {len(claims)} claims failed" if claims else f"\n{summary}")
    return 1 if drifted or broken else 0


if __name__ == "__main__":
    sys.exit(main())
