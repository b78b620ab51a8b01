"""A reader travels as float16 parts of bounded size and comes back a reader that answers the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from hiera.read.reader import Reader

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def parts():
    import bench.reader_parts as mod

    return mod


def test_parts_stay_under_the_limit_and_come_back_in_their_dtypes(parts, tmp_path: Path):
    src = tmp_path / "src"
    src.mkdir()
    big = torch.randn(300, 64)  # 38 KB in float16: split in row blocks over several parts
    ids = torch.arange(10, dtype=torch.int64)
    save_file({"big": big, "ids": ids, "small": torch.randn(3)}, str(src / "model.safetensors"), metadata={"format": "pt"})
    (src / "config.json").write_text('{"a": 1}', encoding="utf-8")
    (src / "blob.bin").write_bytes(bytes(range(256)))
    files = parts.pack(src, tmp_path / "parts", max_bytes=16_000, max_files=8)
    assert 3 <= len(files) <= 8
    assert all(f.stat().st_size <= 16_000 for f in files)
    out = parts.unpack(tmp_path / "parts", tmp_path / "back")
    back = load_file(str(out / "model.safetensors"))
    assert back["big"].dtype == torch.float32 and back["ids"].dtype == torch.int64
    assert torch.equal(back["big"], big.half().float())  # float16 rounding, nothing else
    assert torch.equal(back["ids"], ids)
    assert (out / "blob.bin").read_bytes() == bytes(range(256))
    assert json.loads((out / "config.json").read_text(encoding="utf-8")) == {"a": 1}


def test_too_many_parts_and_a_missing_part_are_refused(parts, tmp_path: Path):
    src = tmp_path / "src"
    src.mkdir()
    save_file({"big": torch.randn(300, 64)}, str(src / "model.safetensors"))
    with pytest.raises(ValueError, match="more than 2 files"):
        parts.pack(src, tmp_path / "few", max_bytes=16_000, max_files=2)
    files = parts.pack(src, tmp_path / "parts", max_bytes=16_000)
    next(f for f in files if f.name != parts.MANIFEST).unlink()
    with pytest.raises(ValueError, match="missing"):
        parts.unpack(tmp_path / "parts", tmp_path / "back")


def test_an_unpacked_reader_answers_as_the_original(parts, tiny_reader: Path, tmp_path: Path):
    files = parts.pack(tiny_reader, tmp_path / "parts")
    assert len(files) <= 8 and all(f.stat().st_size <= 16 * 2**20 for f in files)
    back = parts.unpack(tmp_path / "parts", tmp_path / "reader")
    a, b = Reader(tiny_reader, device="cpu"), Reader(back, device="cpu")
    passage = ("University of Notre Dame", "The university is located in Notre Dame, Indiana, and was founded in 1842.")
    q = "Where is the university located?"
    la, lb = a.logits(q, [passage]), b.logits(q, [passage])
    assert abs(la.start - lb.start).max() < 0.05 and abs(la.select - lb.select).max() < 0.05
    assert [x.text for x in a.decode(la)][:1] == [x.text for x in b.decode(lb)][:1]
