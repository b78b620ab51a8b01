"""The ``check`` part of ``bench/data/quest_phrasing.jsonl`` stays out of the code and the tests.

Figures on a part of the data mean something about queries the rules were not written for only while nobody
writes rules or tests from its text. This check compares the part's text with every file under ``src/`` and
``tests/`` without reading it: word 4-grams (lower-cased letters and digits) of the part's queries are hashed,
those that also occur in the rest of the file (the ``tune`` part's queries, marked originals and gold atoms: text
the rules were written on anyway) or that hold fewer than two content words ("not found in the") are dropped, and
what is left must not occur in any file. Failures name files and counts, never the text.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PHRASING = REPO / "bench" / "data" / "quest_phrasing.jsonl"
GUARDED = "check"  # the value of metadata.split this file keeps out of src/ and tests/
N = 4
SUFFIXES = {".py", ".md", ".txt", ".json", ".jsonl", ".yaml", ".yml", ".toml", ".html", ".js", ".css"}
# function words: a 4-gram needs two words outside this list to count ("found in the Andes", not "not found in the")
FUNCTION_WORDS = frozenset(
    "a an the of in on at to for from by with and or but not no nor that which who whom whose are is were was be "
    "been being also both as into about than this those these it its their ones one aren isn weren wasn don doesn "
    "didn can cannot won t s".split()
)


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def _hash(gram: Iterable[str]) -> str:
    return hashlib.sha1(" ".join(gram).encode()).hexdigest()[:16]


def grams(words: list[str]) -> Iterable[str]:
    """Hashes of the word 4-grams with at least two content words."""
    for i in range(len(words) - N + 1):
        gram = words[i : i + N]
        if sum(w not in FUNCTION_WORDS for w in gram) >= 2:
            yield _hash(gram)


def _rows() -> list[dict]:
    return [json.loads(line) for line in PHRASING.read_text(encoding="utf-8").splitlines() if line.strip()]


def _texts(row: dict) -> list[str]:
    return [row["query"], re.sub(r"</?mark>", "", row.get("original_query") or ""), *row["metadata"].get("atoms", [])]


def guarded_grams() -> tuple[set[str], int]:
    """Hashed 4-grams only the guarded part's queries hold, and how many queries it has."""
    rows = _rows()
    guarded = [r for r in rows if r["metadata"].get("split") == GUARDED]
    rest = {g for r in rows if r["metadata"].get("split") != GUARDED for t in _texts(r) for g in grams(_words(t))}
    return {g for r in guarded for g in grams(_words(r["query"]))} - rest, len(guarded)


def overlaps(paths: Iterable[Path], guarded: set[str], root: Path = REPO) -> Counter[str]:
    """Per file (relative to ``root``), how many of its 4-grams are guarded ones (files with none left out).

    A file is read as one word stream, so a quotation split over lines or string literals is still found."""
    hits: Counter[str] = Counter()
    for path in paths:
        n = sum(g in guarded for g in grams(_words(path.read_text(encoding="utf-8", errors="replace"))))
        if n:
            hits[str(path.relative_to(root))] = n
    return hits


def _files() -> list[Path]:
    return sorted(p for root in ("src", "tests") for p in (REPO / root).rglob("*")
                  if p.is_file() and p.suffix in SUFFIXES and "__pycache__" not in p.parts)


def test_no_text_of_the_check_part_in_src_or_tests():
    guarded, count = guarded_grams()
    assert count == 142 and len(guarded) > 300  # the part exists and the hashing finds its text
    files = _files()
    hits = overlaps(files, guarded)
    print(f"{len(guarded)} guarded 4-grams of {count} queries; {len(files)} files scanned; "
          f"{sum(hits.values())} overlaps in {len(hits)} files")
    assert not hits, f"4-grams of the {GUARDED!r} part found (counts only): {dict(hits)}"


def test_the_scan_finds_a_quotation(tmp_path: Path):
    """The check can fail: a file that quotes the part (every query, never printed) is found, with one hit or more
    for most queries, while the tune part's text finds nothing."""
    guarded, _ = guarded_grams()
    rows = _rows()
    quoted = [r for r in rows if r["metadata"]["split"] == GUARDED]
    inside = tmp_path / "quoting.py"
    found = 0
    for r in quoted:
        inside.write_text(f"# {r['query']}\n", encoding="utf-8")
        found += bool(overlaps([inside], guarded, root=tmp_path))
    assert found >= 0.8 * len(quoted), f"only {found} of {len(quoted)} queries detectable"
    inside.write_text("\n".join(t for r in rows if r["metadata"]["split"] != GUARDED for t in _texts(r)))
    assert not overlaps([inside], guarded, root=tmp_path)
