"""Checks of one build directory (files, BM25, dense): what ``hiera check`` runs on a build and on each shard.

A shard of a sharded build is a build of its own (manifest, files with sizes
and checksums, BM25, dense), so one set of per-build checks serves both;
:mod:`hiera.check` runs them and reports a shard's findings under its name.
Every check reads; none repairs or rewrites.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from hiera.errors import HieraError
from hiera.index.manifest import MANIFEST, Manifest, nested_builds
from hiera.io import load_npy

Status = Literal["ok", "warning", "error"]



@dataclass(frozen=True)
class Finding:
    check: str
    status: Status
    detail: str

    def line(self) -> str:
        tag = {"ok": "ok", "warning": "WARN", "error": "FAIL"}[self.status]
        return f"{tag:<4} {self.check}: {self.detail}"


class Checks:
    """The findings of one run, in order (a shard's are gathered apart, then reported under its name)."""

    def __init__(self) -> None:
        self.findings: list[Finding] = []

    def add(self, check: str, status: Status, detail: str) -> Finding:
        f = Finding(check, status, " ".join(str(detail).split()))
        self.findings.append(f)
        return f

    def ok(self, check: str, detail: str) -> None:
        self.add(check, "ok", detail)

    def warn(self, check: str, detail: str) -> None:
        self.add(check, "warning", detail)

    def error(self, check: str, detail: str) -> None:
        self.add(check, "error", detail)



def check_files(build_dir: Path, m: Manifest, c: Checks, checksums: bool) -> bool:
    """The build's files against the manifest: present, sizes, sha256 (unless ``checksums`` is off); True when sound."""
    try:
        m.check_files(build_dir)
    except HieraError as e:
        c.error("files", str(e))
        return False
    nested = nested_builds(build_dir)  # shards list their own files
    extra = sorted(
        str(p.relative_to(build_dir)) for p in build_dir.rglob("*")
        if p.is_file() and p.name != MANIFEST and str(p.relative_to(build_dir)) not in m.files
        and not any(p.is_relative_to(d) for d in nested)
    )
    if extra:
        c.warn("files", f"files the manifest does not list: {', '.join(extra[:5])}")
    if not checksums:
        c.ok("files", f"{len(m.files)} files with the sizes the manifest records (checksums not read: --quick)")
        return True
    if not m.checksums:
        c.ok("files", f"{len(m.files)} files with the recorded sizes (this build predates checksums)")
        return True
    bad = m.check_checksums(build_dir)
    if bad:
        c.error("files", f"contents changed since the build (sha256 differs): {', '.join(bad[:5])}; rebuild with `hiera build`")
        return False
    c.ok("files", f"{len(m.files)} files match the manifest's sizes and sha256 checksums")
    return True


def segments(m: Manifest) -> list[tuple[str, int, int]]:
    """``(directory, passages, documents)`` of each segment a build's index files hold.

    A build from scratch is one segment; a changed build (:mod:`hiera.index.segments`)
    is its base (the manifest's ``updates.base``) and, when it has one, its delta
    under ``delta/``.
    """
    if not m.updates:
        return [("", m.passages, m.documents)]
    base = m.updates.get("base", {})
    out = [("", int(base.get("passages", m.passages)), int(base.get("documents", m.documents)))]
    delta = m.updates.get("delta")
    if delta:
        out.append(("delta", int(delta.get("passages", 0)), int(delta.get("documents", 0))))
    return out


def _where(sub: str, name: str) -> str:
    return f"{sub}/{name}" if sub else name


def check_bm25(build_dir: Path, m: Manifest, c: Checks) -> None:
    """Each BM25 index (of each segment) holds as many texts as the manifest counts."""
    if m.bm25 is None:
        return
    from hiera.index.bm25 import Bm25Config, Bm25Index

    cfg = Bm25Config.from_dict(m.bm25)
    sizes = {"bm25-passages": 0, "bm25-docs": 0}
    for sub, passages, documents in segments(m):
        for name, want in (("bm25-passages", passages), ("bm25-docs", documents)):
            n = Bm25Index.load(build_dir / sub / name, cfg, mmap=True).size
            if n != want:
                c.error("bm25", f"{_where(sub, name)} indexes {n} texts, the manifest {want}")
                return
            sizes[name] += n
    c.ok("bm25", f"passages {sizes['bm25-passages']}, documents {sizes['bm25-docs']}")


def check_dense(build_dir: Path, m: Manifest, c: Checks) -> None:
    """Every float16 matrix and FAISS index (of each segment) has the manifest's rows and the model's dimension."""
    if not m.models:
        return
    from hiera.index.dense import load_faiss

    problems = []
    for sub, passages, documents in segments(m):
        dense = build_dir / sub / "dense"
        for name, rows, level in (
            ("passages", passages, "passage"), ("docs", documents, "doc"), ("docs-mean", documents, "passage")
        ):
            dim = int(m.models.get(level, {}).get("dim", 0))
            mat_path = dense / f"{name}.f16.npy"
            if mat_path.exists():
                mat = load_npy(mat_path, mmap=True)
                if mat.shape != (rows, dim):
                    problems.append(f"{_where(sub, mat_path.name)} has shape {mat.shape}, expected ({rows}, {dim})")
            elif sub:
                problems.append(f"{_where(sub, mat_path.name)} is missing")
            idx_path = dense / f"{name}.faiss"
            if idx_path.exists():
                index = load_faiss(idx_path, mmap=True)
                if index.ntotal != rows or index.d != dim:
                    problems.append(f"{_where(sub, idx_path.name)} holds {index.ntotal} vectors of dim {index.d}, "
                                    f"expected {rows} of {dim}")
    if problems:
        c.error("dense", "; ".join(problems))
        return
    c.ok("dense", f"FAISS and float16 matrices: {m.passages} passages, {m.documents} documents")


def check_names(build_dir: Path, m: Manifest, c: Checks) -> None:
    """The name table's arrays agree with each other and with the manifest; its vectors, one per name.

    A changed build's delta names (``delta/names/``) are checked the same way
    against the delta's documents, the base table against the base's.
    """
    if not m.names:
        return
    delta = (m.updates or {}).get("names")
    base_docs = int(m.updates["base"]["documents"]) if delta else m.documents
    parts = [("", build_dir, m.names, base_docs)]
    if delta:
        parts.append(("delta ", build_dir / "delta", delta, m.documents - base_docs))
    problems: list[str] = []
    for label, where, record, documents in parts:
        problems += [label + p for p in _name_problems(where, record, documents)]
    if problems:
        c.error("names", "; ".join(problems))
        return
    rows = sum(int(r["rows"]) for _, _, r, _ in parts)
    c.ok("names", f"{rows} names of {m.documents} documents" + (", with vectors" if m.names.get("dense") else "")
         + (" (base and delta)" if delta else ""))


def _name_problems(where: Path, record: dict, documents: int) -> list[str]:
    from hiera.index.names import NAMES_DIR, StringTable

    d = where / NAMES_DIR
    rows, problems = int(record.get("rows", -1)), []
    docs = load_npy(d / "doc.npy", mmap=True)
    sizes = {"names": len(StringTable.load(d, "names")), "keys": len(StringTable.load(d, "keys")),
             "doc.npy": len(docs), "kind.npy": len(load_npy(d / "kind.npy", mmap=True)),
             "key_hash.npy": len(load_npy(d / "key_hash.npy", mmap=True))}
    problems += [f"{name} has {n} rows, the manifest {rows}" for name, n in sizes.items() if n != rows]
    titles = len(StringTable.load(d, "titles"))
    if titles != documents or len(load_npy(d / "prior.npy", mmap=True)) != documents:
        problems.append(f"titles/prior cover {titles} documents, the manifest {documents}")
    if rows > 0 and len(docs) == rows:
        if int(docs.min()) < 0 or int(docs.max()) >= documents:
            problems.append("a name points at no document")
    vec = where / "dense" / "names.f16.npy"
    if record.get("dense") and vec.exists() and len(load_npy(vec, mmap=True)) != rows:
        problems.append(f"{vec.name} does not hold one vector per name")
    return problems
