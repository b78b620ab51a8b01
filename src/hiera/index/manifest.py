"""The index manifest: what an index was built from, so a mismatch is refused.

A collection directory looks like::

    DIR/corpus.sqlite          the corpus store
    DIR/index -> builds/<id>   symlink to the live index build (swapped atomically)
    DIR/builds/<id>/manifest.json, layout/, bm25-passages/, bm25-docs/, dense/

A build is written into a fresh ``builds/<id>`` directory, its manifest last;
only then is the ``index`` symlink replaced (``os.replace`` is atomic), so an
interrupted build never leaves a half-written index in place of a good one.

Builds are immutable: ``hiera tune`` never rewrites a manifest. It writes its
chosen parameters to ``builds/<id>.tuned.json`` beside the build (atomically),
and the next build of the collection starts from them.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from hiera.errors import HieraError, IndexMissingError, ManifestMismatchError
from hiera.io import loads_json, write_json_atomic
from hiera.schema import MANIFEST as MANIFEST_SCHEMA
from hiera.schema import TUNED as TUNED_SCHEMA
from hiera.schema import SchemaError, validate
from hiera.version import __version__

MANIFEST = "manifest.json"
FORMAT = "hiera-index/2"  # 2: per-method defaults, tuned values beside the build
TUNED_SUFFIX = ".tuned.json"


def library_versions() -> dict[str, str]:
    out = {"hiera": __version__, "python": platform.python_version()}
    for pkg in ("numpy", "faiss-cpu", "bm25s", "torch", "sentence-transformers", "transformers"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    return out


@dataclass
class Manifest:
    """Everything needed to check that an index matches its corpus and models."""

    corpus_version: int
    documents: int
    passages: int
    passage_rules: dict[str, Any]
    bm25: dict[str, Any] | None = None
    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    faiss: dict[str, str] = field(default_factory=dict)
    defaults: dict[str, dict[str, Any]] = field(default_factory=dict)  # method → parameter → value (hiera build --set)
    # a sharded build (hiera.shard): one entry per shard, {name, docs: [start, end], passages: [start, end],
    # manifest_sha256}; a shard's own manifest says which shard it is in ``shard``
    shards: list[dict[str, Any]] = field(default_factory=list)
    shard: dict[str, Any] = field(default_factory=dict)
    # the name table (hiera.index.names: rows, keys, documents, whether a prior and BM25 were built); {}: none
    names: dict[str, Any] = field(default_factory=dict)
    # the build profile (hiera.index.profile): name, what was asked, passages, threshold, why; {}: made before profiles
    profile: dict[str, Any] = field(default_factory=dict)
    # a build made by a change instead of a rebuild (hiera.index.update): generation, base and delta sizes, dead
    # documents and passages (deleted, superseded), the delta's BM25 token counts; {}: a build from scratch
    updates: dict[str, Any] = field(default_factory=dict)
    files: dict[str, int] = field(default_factory=dict)
    checksums: dict[str, str] = field(default_factory=dict)  # sha256 of every file (`hiera check` verifies them)
    versions: dict[str, str] = field(default_factory=library_versions)
    created: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    format: str = FORMAT

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        for key in ("shards", "shard", "names", "profile", "updates"):  # absent when empty: a manifest says only what the build has
            if not d[key]:
                del d[key]
        return d

    @property
    def base_version(self) -> int:
        """The corpus version the index files were written at: a changed build's base keeps its own (its shards' too)."""
        return int(self.updates.get("base_version", self.corpus_version)) if self.updates else self.corpus_version

    def backend(self, level: str) -> str | None:
        """The encoder backend ``level``'s vectors were made with; None without dense vectors at that level.

        Builds made before backends were recorded ran torch.
        """
        info = self.models.get(level)
        return None if info is None else str(info.get("backend", "torch"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Manifest:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})

    def write(self, build_dir: Path, known: dict[str, str] | None = None) -> None:
        """Record file sizes and checksums, then write the manifest atomically (it goes last).

        Every file is fsynced first, so a manifest on disk means its files are too.
        ``known``: checksums of files hard-linked from a build that recorded
        them (the same bytes, already synced), not read again.
        """
        known = known or {}
        nested = nested_builds(build_dir)  # shards: each listed and checked by its own manifest
        files = [
            p for p in sorted(build_dir.rglob("*"))
            if p.is_file() and p.name != MANIFEST and not p.name.endswith(".tmp")
            and not any(p.is_relative_to(d) for d in nested)
        ]
        self.files = {str(p.relative_to(build_dir)): p.stat().st_size for p in files}
        self.checksums = {}
        for p in files:
            rel = str(p.relative_to(build_dir))
            self.checksums[rel] = known[rel] if rel in known else file_sha256(p, sync=True)
        write_json_atomic(build_dir / MANIFEST, self.to_dict())

    @classmethod
    def read(cls, build_dir: Path) -> Manifest:
        path = build_dir / MANIFEST
        if not path.exists():
            raise IndexMissingError(f"{build_dir} has no {MANIFEST}: the index is missing or half-built; run `hiera build`")
        try:
            data = loads_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise IndexMissingError(f"{path} is unreadable ({e}); rebuild with `hiera build`") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            found = data.get("format") if isinstance(data, dict) else None
            raise ManifestMismatchError(
                f"{path}: index format {found!r}, this hiera reads {FORMAT!r}; rebuild with `hiera build` "
                "(cached embeddings make it quick)"
            )
        try:
            validate(data, MANIFEST_SCHEMA)
        except SchemaError as e:
            raise ManifestMismatchError(f"{path}: {e}; rebuild with `hiera build`") from None
        return cls.from_dict(data)

    def check_files(self, build_dir: Path) -> None:
        """Refuse an index whose files are missing or were changed after the build."""
        missing = [f for f in self.files if not (build_dir / f).exists()]
        if missing:
            raise IndexMissingError(
                f"index at {build_dir} is incomplete: missing {', '.join(missing[:5])}; rebuild with `hiera build`"
            )
        changed = [f for f, size in self.files.items() if (build_dir / f).stat().st_size != size]
        if changed:
            raise ManifestMismatchError(
                f"index files changed since the build ({', '.join(changed[:5])}); rebuild with `hiera build`"
            )

    def check_checksums(self, build_dir: Path) -> list[str]:
        """Files whose content differs from the build's (a full read of the index); [] when all match."""
        return [f for f, digest in self.checksums.items()
                if (build_dir / f).is_file() and file_sha256(build_dir / f) != digest]

    def check_model(self, level: str, fingerprint: str, name: str) -> None:
        built = self.models.get(level)
        if built is None:
            raise IndexMissingError(f"the index has no dense {level} vectors; run `hiera build` with dense indexes")
        if built["fingerprint"] != fingerprint:
            raise ManifestMismatchError(
                f"the {level} index was built with model {built['name']} (fingerprint {built['fingerprint'][:12]}), "
                f"not {name} (fingerprint {fingerprint[:12]}); rebuild with `hiera build` or use the same model"
            )


def nested_builds(build_dir: Path) -> list[Path]:
    """Directories below ``build_dir`` with a manifest of their own (the shards of a sharded build)."""
    return [p.parent for p in build_dir.rglob(MANIFEST) if p.parent != build_dir]


def file_sha256(path: Path, sync: bool = False) -> str:
    """sha256 of a file's bytes; ``sync`` also fsyncs it (the build does, before its manifest)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
        if sync:
            os.fsync(fh.fileno())
    return h.hexdigest()


def tuned_path(build_dir: Path) -> Path:
    return build_dir.with_name(build_dir.name + TUNED_SUFFIX)


def read_tuned(build_dir: Path) -> dict[str, dict[str, Any]]:
    """``hiera tune``'s parameters for this build (method → parameter → value), or nothing."""
    path = tuned_path(build_dir)
    if not path.exists():
        return {}
    try:
        data = loads_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ManifestMismatchError(f"{path} is unreadable ({e}); delete it or rerun `hiera tune`") from None
    try:
        validate(data, TUNED_SCHEMA)
    except SchemaError as e:
        raise ManifestMismatchError(f"{path} is not a tuning file ({e}); delete it or rerun `hiera tune`") from None
    return data["params"]


def write_tuned(build_dir: Path, method: str, params: dict[str, Any], meta: dict[str, Any]) -> Path:
    """Merge ``params`` for ``method`` into the build's tuning file, atomically; the manifest is untouched."""
    path = tuned_path(build_dir)
    current = read_tuned(build_dir)
    current[method] = {**current.get(method, {}), **params}
    old_meta = json.loads(path.read_text(encoding="utf-8")).get("meta", {}) if path.exists() else {}
    write_json_atomic(path, {"build": build_dir.name, "params": current, "meta": {**old_meta, method: meta}})
    return path


# -- sharded builds: where the shards are and how a shard is opened checked ------------------------------------
# A sharded build (hiera.shard) keeps the collection-wide layout at its top and one directory per shard under
# SHARDS_DIR, each a build of its own. Knowing that layout is the manifest's business: `hiera check` and the
# collection loaders check shards with it, without importing hiera.shard.
SHARDS_DIR = "shards"


def shard_name(i: int) -> str:
    return f"{i:03d}"


def is_sharded(build_dir: Path | None) -> bool:
    """Whether the build at ``build_dir`` is sharded (its manifest lists shards); False when unreadable.

    Cheap on purpose (one small JSON read): :func:`hiera.builds.open_collection` asks it on every open.
    """
    if build_dir is None:
        return False
    try:
        data = json.loads((build_dir / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and bool(data.get("shards"))


def shard_label(entry: dict[str, Any], build_dir: Path) -> str:
    return f"shard {entry['name']} ({build_dir / SHARDS_DIR / entry['name']})"


def open_shard_manifest(build_dir: Path, entry: dict[str, Any], corpus_version: int) -> Manifest:
    """The shard's manifest, checked against the build's record of it; every refusal names the shard."""
    label = shard_label(entry, build_dir)
    shard_dir = build_dir / SHARDS_DIR / entry["name"]
    path = shard_dir / MANIFEST
    fix = "rebuild the collection with `hiera build`"
    if not path.is_file():
        raise IndexMissingError(f"{label} is missing (no {MANIFEST}); {fix}")
    if file_sha256(path) != entry.get("manifest_sha256"):
        raise ManifestMismatchError(f"{label} is stale: its manifest is not the one this build recorded; {fix}")
    try:
        m = Manifest.read(shard_dir)
    except HieraError as e:
        raise ManifestMismatchError(f"{label}: {e}") from None
    if m.corpus_version != corpus_version:
        raise ManifestMismatchError(
            f"{label} is stale: built at corpus version {m.corpus_version}, the build at {corpus_version}; {fix}"
        )
    missing = [f for f in m.files if not (shard_dir / f).exists()]
    if missing:
        raise IndexMissingError(f"{label} is incomplete: missing {', '.join(missing[:5])}; {fix}")
    changed = [f for f, size in m.files.items() if (shard_dir / f).stat().st_size != size]
    if changed:
        raise ManifestMismatchError(f"{label} is stale: files changed since the build ({', '.join(changed[:5])}); {fix}")
    return m
