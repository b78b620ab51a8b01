"""Helpers shared by the benchmark scripts: paths, tables, JSON output."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "out"
WORK = REPO / "bench" / "work"


def data_dir() -> Path:
    """``$HIERA_DATA_DIR`` or ``../shared/data`` beside the repository."""
    return Path(os.environ.get("HIERA_DATA_DIR", REPO.parent / "shared" / "data"))


def table(rows: list[dict[str, Any]], columns: list[str] | None = None) -> str:
    """A GitHub-markdown table (what the notes quote)."""
    if not rows:
        return "(no rows)"
    cols = columns or list(rows[0])

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.4g}" if abs(v) < 1000 else f"{v:.0f}"
        return str(v)

    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    lines += ["| " + " | ".join(fmt(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def write_json(name: str, payload: dict[str, Any]) -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    payload = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "when": time.strftime("%Y-%m-%d %H:%M:%S")},
        **payload,
    }
    path = OUT / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2))
    return path


def ensure_collection(root: Path, sources: list[tuple[list[Path], str]], rules: Any = None, options: Any = None) -> None:
    """Ingest ``sources`` and build once; reruns reuse the collection (and the embedding cache)."""
    from hiera.corpus.ingest import ingest
    from hiera.corpus.store import STORE_FILE
    from hiera.index.build import build, live_build_dir

    if not (root / STORE_FILE).exists():
        for paths, fmt in sources:
            t = time.perf_counter()
            rep = ingest(paths, fmt, root, rules=rules)
            print(f"ingested {fmt}: {rep.documents} documents, {rep.passages} passages ({time.perf_counter() - t:.1f}s)")
    if live_build_dir(root) is None:
        t = time.perf_counter()
        build(root, options)
        print(f"built {root} in {time.perf_counter() - t:.1f}s")
