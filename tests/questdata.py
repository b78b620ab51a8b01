"""A small real QUEST-style collection: the ovos summaries of a few quest-vital queries' gold sets plus distractors.

Built once per session (the ``quest`` fixture of tests/conftest.py calls
:func:`quest_collection`), BM25 only (no encoding: fast). The queries are
real quest-vital dev queries; :class:`FakeClassifier` stands in for a trained
cross-encoder in the mechanics tests by reading each document's Wikidata
short description (what the gold sets were built from, never indexed).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from pathlib import Path

import helpers

from hiera.index.build import BuildOptions
from hiera.sets.classifier import Thresholds

QUERIES = (
    "American physicists who were not chemists",
    "English or Flemish painters",
    "French mathematicians born in the 19th century",
    "German architects",
    "American singers who were also dancers",
)
DISTRACTOR_WORDS = ("physicist", "chemist", "painter", "mathematician", "architect", "singer", "dancer")


def quest_collection(data_dir: Path, base: Path) -> dict:
    """The chosen queries (a QUEST-format file), the summaries' descriptions and the collection, built under ``base``."""
    from hiera.corpus.readers.ovos import ovos_summaries_path

    dev = data_dir / "quest-vital" / "dev.jsonl"
    lines = [ln for ln in dev.read_text(encoding="utf-8").splitlines() if ln.strip()]
    chosen = [ln for ln in lines if json.loads(ln)["query"] in QUERIES]
    assert len(chosen) == len(QUERIES)
    summaries = json.loads(ovos_summaries_path().read_text(encoding="utf-8"))
    keep = {t for ln in chosen for t in json.loads(ln)["docs"]}
    for word in DISTRACTOR_WORDS:
        keep |= set(sorted(t for t, e in summaries.items() if word in e.get("description", "").lower())[:15])
    # physicists who are also chemists: what "American physicists who were not chemists" must exclude
    keep |= {t for t, e in summaries.items() if {"physicist", "chemist"} <= set(e.get("description", "").lower().split())}
    keep |= set(random.Random(0).sample(sorted(summaries), 30))
    subset = {t: summaries[t] for t in sorted(keep) if t in summaries}
    (base / "summaries.json").write_text(json.dumps(subset), encoding="utf-8")
    (base / "queries.jsonl").write_text("\n".join(chosen) + "\n", encoding="utf-8")
    root = helpers.build_collection(base / "col", files=[base / "summaries.json"], fmt="ovos-summaries",
                                    options=BuildOptions(dense=False, progress=False))
    return {
        "root": root, "queries": base / "queries.jsonl", "descriptions": {t: e["description"] for t, e in subset.items()},
    }


_STOP = {"of", "in", "the", "who", "were", "also", "not", "born", "that", "are"}


def fake_probability(constraint: str, description: str) -> float:
    """0.9 when the description states the constraint (its words; a century by the first year), else 0.05."""
    c = constraint.lower()
    ok = True
    m = re.search(r"born in the (\d+)(?:st|nd|rd|th) century", c)
    if m:
        y = re.search(r"\((?:c\. )?(\d{3,4})", description)
        ok = bool(y) and (int(y.group(1)) - 1) // 100 + 1 == int(m.group(1))
        c = c[: m.start()]
    words = [w.rstrip("s") for w in re.findall(r"[a-z]+", c) if w not in _STOP]
    return 0.9 if ok and all(w in description.lower() for w in words) else 0.05


class FakeClassifier:
    """The SetClassifier interface over descriptions; counts the pairs it is asked about."""

    name = "fake"
    path = Path("fake-classifier")

    def __init__(self, descriptions: dict[str, str], store, zero: Sequence[str] = ()) -> None:
        self.by_id = {}
        for title, desc in descriptions.items():
            d = store.resolve_title(title)
            if d is not None:
                self.by_id[d] = desc
        self.thresholds = Thresholds(0.5, {}, "tuned")
        self.zero = set(zero)
        self.pairs = 0

    def score(self, constraint: str, doc_ids: Sequence[str], texts: Sequence[str]):
        import numpy as np

        self.pairs += len(doc_ids)
        if constraint in self.zero:
            return np.zeros(len(doc_ids), dtype=np.float32)
        return np.asarray([fake_probability(constraint, self.by_id.get(d, "")) for d in doc_ids], dtype=np.float32)
