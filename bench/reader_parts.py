"""A reader directory as a few float16 parts, and back: how a reader trained on a lent GPU comes home.

A lent machine returns at most 8 files of at most 16 MiB each. A MiniLM
reader is ~90 MB of float32 weights, so :func:`pack` casts every floating
tensor of the directory's ``*.safetensors`` files to float16 (~45 MB) and
deals them into parts of at most ``max_bytes``; every other file (config,
tokenizer, ``hiera-reader.json``) goes into one JSON manifest, base64-coded.
:func:`unpack` writes the directory again, each tensor in its original dtype
(float16 values widened to float32: the CPU reads the reader in float32), and
checks it loads as a reader.

    python -m bench.reader_parts pack READER_DIR PARTS_DIR
    python -m bench.reader_parts unpack PARTS_DIR READER_DIR
"""

from __future__ import annotations

import argparse
import base64
import json
from pathlib import Path
from typing import Any

MANIFEST = "reader-files.json"
PART = "reader-fp16-{:02d}.safetensors"
MiB = 1 << 20
# a part's header (names, shapes, offsets) is small: keep this much room for it under the limit
HEADER_ROOM = 256 * 1024


def pack(reader_dir: Path, out: Path, max_bytes: int = 16 * MiB, max_files: int = 8) -> list[Path]:
    """Write ``reader_dir`` as float16 parts plus a manifest under ``out``; returns the files written."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file

    reader_dir, out = Path(reader_dir), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tensors: list[tuple[str, Any]] = []
    dtypes: dict[str, str] = {}
    metadata: dict[str, dict[str, str]] = {}
    files: dict[str, str] = {}
    for f in sorted(p for p in reader_dir.iterdir() if p.is_file()):
        if f.suffix == ".safetensors":
            with safe_open(str(f), framework="pt") as fh:
                metadata[f.name] = fh.metadata() or {}
                for k in fh.keys():  # noqa: SIM118 - safe_open is not a mapping
                    t = fh.get_tensor(k)
                    key = f"{f.name}::{k}"
                    dtypes[key] = str(t.dtype).removeprefix("torch.")
                    tensors.append((key, t.half() if t.is_floating_point() else t))
        else:
            files[f.name] = base64.b64encode(f.read_bytes()).decode("ascii")
    room = max_bytes - min(HEADER_ROOM, max_bytes // 8)
    pieces: dict[str, list[str]] = {}  # a tensor over one part's room travels in row blocks
    parts: list[dict[str, Any]] = [{}]
    size = 0
    for key, t in tensors:
        rows = max(1, room // max(1, t[:1].numel() * t.element_size())) if t.dim() else 1
        blocks = [t] if t.dim() == 0 else list(t.split(rows))
        pieces[key] = []
        for i, b in enumerate(blocks):
            n = b.numel() * b.element_size()
            if n > room:
                raise ValueError(f"{key}: one row is {n} bytes in float16, more than a part holds ({max_bytes})")
            if size + n > room and parts[-1]:
                parts.append({})
                size = 0
            name = f"{key}#{i}"
            parts[-1][name] = b.contiguous()
            pieces[key].append(name)
            size += n
    names = [PART.format(i) for i in range(len(parts))]
    if len(names) + 1 > max_files:
        raise ValueError(f"{len(names)} parts and a manifest: more than {max_files} files")
    written = []
    for name, part in zip(names, parts, strict=True):
        save_file(part, str(out / name))
        written.append(out / name)
    manifest = {"format": "hiera-reader-parts/1", "parts": names, "dtypes": dtypes, "pieces": pieces,
                "metadata": metadata, "files": files, "torch": torch.__version__}
    (out / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
    written.append(out / MANIFEST)
    too_big = [p for p in written if p.stat().st_size > max_bytes]
    if too_big:
        raise ValueError(f"{too_big[0]}: {too_big[0].stat().st_size} bytes, over {max_bytes}")
    return written


def unpack(parts_dir: Path, reader_dir: Path) -> Path:
    """The reader directory again from :func:`pack`'s files; refuses a set with a part missing."""
    import torch
    from safetensors.torch import load_file, save_file

    parts_dir, reader_dir = Path(parts_dir), Path(reader_dir)
    manifest = json.loads((parts_dir / MANIFEST).read_text(encoding="utf-8"))
    if manifest.get("format") != "hiera-reader-parts/1":
        raise ValueError(f"{parts_dir / MANIFEST}: not a reader parts manifest")
    missing = [p for p in manifest["parts"] if not (parts_dir / p).is_file()]
    if missing:
        raise ValueError(f"{parts_dir}: part {missing[0]} is missing")
    loaded: dict[str, Any] = {}
    for name in manifest["parts"]:
        loaded.update(load_file(str(parts_dir / name)))
    by_file: dict[str, dict[str, Any]] = {name: {} for name in manifest["metadata"]}
    for key, names in manifest["pieces"].items():
        lost = [n for n in names if n not in loaded]
        if lost:
            raise ValueError(f"{parts_dir}: {lost[0]} is in no part")
        blocks = [loaded[n] for n in names]
        t = blocks[0] if len(blocks) == 1 else torch.cat(blocks)
        fname, _, k = key.partition("::")
        by_file[fname][k] = t.to(getattr(torch, manifest["dtypes"][key]))
    reader_dir.mkdir(parents=True, exist_ok=True)
    for fname, tensors in by_file.items():
        save_file(tensors, str(reader_dir / fname), metadata=manifest["metadata"][fname] or None)
    for fname, data in manifest["files"].items():
        (reader_dir / fname).write_bytes(base64.b64decode(data))
    return reader_dir


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack", help="a reader directory into float16 parts")
    p.add_argument("reader", type=Path)
    p.add_argument("out", type=Path)
    u = sub.add_parser("unpack", help="float16 parts back into a reader directory (float32), checked by loading it")
    u.add_argument("parts", type=Path)
    u.add_argument("reader", type=Path)
    args = ap.parse_args()
    if args.cmd == "pack":
        for f in pack(args.reader, args.out):
            print(f"{f} ({f.stat().st_size / MiB:.1f} MiB)")
        return
    from hiera.read.model import load_reader_model

    out = unpack(args.parts, args.reader)
    _, _, meta = load_reader_model(out)
    print(f"{out}: reader ({meta['train']['steps']} steps on {meta['train'].get('device', '?')})")


if __name__ == "__main__":
    main()
