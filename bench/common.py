"""Helpers shared by the benchmark scripts: paths, collections, the report every script writes.

Scripts run as modules from the repository root (``python -m bench.wiki_qa``)
and import these as ``from bench.common import ...``.
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "out"
WORK = REPO / "bench" / "work"

TOPK = ("top1", "top5", "top20", "top100")
# The registry defaults the published rows were measured with, where the registry has since moved on:
# dhr's were λ 1 and the paper's dense passage stage until 2026-11-23 (now the tuned hybrid passage
# stage). Scripts pass them for their plain "dhr" rows, so a rerun reproduces bench/expected.yaml.
PINNED: dict[str, dict[str, Any]] = {"dhr": {"lam": 1.0, "passage_alpha": 0.0}}
DOC_TOPK = ("doc_top1", "doc_top5", "doc_top20", "doc_top100")


def data_dir() -> Path:
    """``$HIERA_DATA_DIR`` or ``../shared/data`` beside the repository."""
    return Path(os.environ.get("HIERA_DATA_DIR", REPO.parent / "shared" / "data"))


def table(rows: list[dict[str, Any]], columns: Sequence[str] | None = None) -> str:
    """A GitHub-markdown table (what the notes quote)."""
    if not rows:
        return "(no rows)"
    cols = list(columns or rows[0])

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.4g}" if abs(v) < 1000 else f"{v:.0f}"
        return str(v)

    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    lines += ["| " + " | ".join(fmt(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def write_json(name: str | Path, payload: Mapping[str, Any]) -> Path:
    """``bench/out/<name>.json`` (or the path ``name``): ``payload`` after a ``machine`` block (cores, Python, when)."""
    path = name if isinstance(name, Path) else OUT / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "when": time.strftime("%Y-%m-%d %H:%M:%S")},
        **payload,
    }
    path.write_text(json.dumps(payload, indent=2))
    return path


def percent(metrics: Mapping[str, float], keys: Iterable[str], missing: str = "–") -> dict[str, Any]:
    """``{key: metric in %, one decimal}`` for a table row; ``missing`` where the run has no such metric."""
    return {k: round(100 * metrics[k], 1) if k in metrics else missing for k in keys}


class Report:
    """What a benchmark records: table rows, a ``results`` dict keyed by label, then a table and a JSON file.

    ``add`` appends a row (and, with ``result``, stores it under ``key``,
    default the row's first value) and echoes it; ``print`` prints the
    markdown table; ``write`` writes ``bench/out/<name>.json`` with
    ``results`` and ``rows`` beside any extra fields. ``to_dict`` gives the
    same two fields for a report nested inside a bigger JSON.
    """

    def __init__(self, name: str, columns: Sequence[str] | None = None) -> None:
        self.name = name
        self.columns = list(columns) if columns else None
        self.rows: list[dict[str, Any]] = []
        self.results: dict[str, Any] = {}

    def add(self, row: dict[str, Any], result: Any = None, *, key: str | None = None, echo: bool | str = True) -> dict[str, Any]:
        """Record ``row`` (and ``result`` under ``key``); ``echo``: print the row, or this line instead."""
        self.rows.append(row)
        if result is not None:
            self.results[key if key is not None else str(next(iter(row.values())))] = result
        if echo:
            print(echo if isinstance(echo, str) else row, flush=True)
        return row

    def extend(self, other: Report) -> None:
        self.rows += other.rows
        self.results.update(other.results)

    def table(self, columns: Sequence[str] | None = None) -> str:
        return table(self.rows, columns or self.columns)

    def print(self, title: str | None = None, columns: Sequence[str] | None = None) -> None:
        print()
        if title:
            print(title)
        print(self.table(columns))

    def to_dict(self, **extra: Any) -> dict[str, Any]:
        """``extra``, then ``results`` (when any were recorded) and ``rows``."""
        return {**extra, **({"results": self.results} if self.results else {}), "rows": self.rows}

    def write(self, name: str | None = None, **extra: Any) -> Path:
        """Write the JSON and say where; ``extra`` fields come first."""
        path = write_json(name or self.name, self.to_dict(**extra))
        print(f"\nwrote {path}")
        return path


# -- DHR parameters under their canonical names (hiera.spec: lam, top_docs, doc_stage, doc_alpha) ------------
TUNE_GRID = (10, 20, 50, 100)  # top_docs values tried, as `hiera tune` does by default


def tuned_params(res: Any) -> dict[str, Any]:
    """The parameters a ``tune_dhr`` result chose, by canonical name (``lam``, ``top_docs``, maybe ``doc_alpha``).

    The one place bench reads a tuning result.
    """
    return dict(res.params)


def tune(col: Any, questions: Sequence[Any], grid: Sequence[int] = TUNE_GRID, **kw: Any) -> tuple[dict[str, Any], Any]:
    """``tune_dhr`` over ``grid`` (top_docs values) → (canonical parameters, the full result)."""
    from hiera.eval.tune import tune_dhr

    res = tune_dhr(col, questions, top_docs=tuple(grid), progress=False, **kw)
    return tuned_params(res), res


def label_params(params: Mapping[str, Any], keys: Sequence[str] = ("lam", "top_docs", "doc_alpha", "passage_alpha")) -> str:
    """``lam=1.9 top_docs=20`` for a row label (what a ``--set`` would say)."""
    return " ".join(f"{k}={params[k]}" for k in keys if k in params and not (k == "passage_alpha" and not params[k]))


# -- collections ---------------------------------------------------------------------------------------------
# The benchmark collections are built with torch, the reference encoder backend: every figure in expected.yaml
# was measured on torch's (or onnx's, equal) vectors, while hiera's default (auto → onnx-int8) trades up to 0.4
# points of top-1 for speed; bench.encode_speed measures that trade on its own.
REFERENCE_BACKEND = "torch"


def ensure_collection(root: Path, sources: list[tuple[list[Path], str]], rules: Any = None, options: Any = None) -> None:
    """Ingest ``sources`` and build once; reruns reuse the collection (and the embedding cache).

    Every source's documents are kept (``duplicates="keep"``): the published figures were measured on corpora
    where SQuAD's, HotpotQA's and the summaries' copies of an article are separate documents, and their gold
    passage ids are the ones those copies have.
    """
    from hiera.corpus.ingest import ingest
    from hiera.corpus.store import STORE_FILE
    from hiera.index.build import build
    from hiera.index.publish import live_build_dir

    if not (root / STORE_FILE).exists():
        for paths, fmt in sources:
            t = time.perf_counter()
            rep = ingest(paths, fmt, root, rules=rules, duplicates="keep")
            print(f"ingested {fmt}: {rep.documents} documents, {rep.passages} passages ({time.perf_counter() - t:.1f}s)")
    if live_build_dir(root) is None:
        from hiera.index.build import BuildOptions

        t = time.perf_counter()
        build(root, options or BuildOptions(backend=REFERENCE_BACKEND))
        print(f"built {root} in {time.perf_counter() - t:.1f}s")
