"""Build profiles: which index types a collection gets, chosen from its size, and recorded in its manifest.

A flat (exact) FAISS index scans every vector for every query: on 2 cores
that is ~7 ms at 26k passages and grows linearly, ~0.3 s at a million. The
``large`` profile keeps search cost growing with documents rather than
passages:

* the dense indexes (passages, document summaries, mean vectors, names) are
  HNSW graphs (``HNSW32``), searched approximately in about a millisecond;
* the default method's ``auto`` document stage (:data:`LARGE_DOC_STAGE`) stays
  ``hybrid-max``, now over those graphs, and DHR's passage stage scores only
  the passages of the documents it keeps (BM25 included:
  :meth:`Bm25Index.scores_at`). A document-level stage (``doc-hybrid``) was the
  first choice and lost 13.8 points of top-1 on real-text distractors
  (``bench/scale_real.py``), so it stays a named option.

From :data:`COMPRESSED_AT` passages on, the large profile's graphs hold
8-bit scalar-quantized vectors (``HNSW32_SQ8``): a quarter of the float
vectors' memory (at 5M passages ≈ 3.3 GB for the passage graph instead of
≈ 9 GB), so a search stays within a few GB of RAM; the float16 matrix that
DHR's passage stage reads is unchanged. Below that size the float graphs fit
easily and are kept.

``small`` is every build before profiles existed: Flat indexes, and the
``hybrid-max`` stage that scores passages of the whole collection (the best
quality on the pooled benchmark, and cheap at that size). ``auto`` picks
``large`` from :data:`LARGE_AT` passages on. ``--passage-index`` /
``--doc-index`` given explicitly win over the profile's index types; a
sharded build keeps Flat indexes (its merge is exact only over them) but
records the profile, so its methods default the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hiera.errors import BadInputError

PROFILES = ("auto", "small", "large")
LARGE_AT = 100_000  # passages: where a Flat scan passes ~25 ms a query on 2 cores (bench/scale_real.py)
LARGE_FACTORY = "HNSW32"
COMPRESSED_AT = 2_000_000  # passages: where float HNSW graphs pass ~3.6 GB (bench/scale_real.py --synthetic)
COMPRESSED_FACTORY = "HNSW32_SQ8"
SMALL_FACTORY = "Flat"


@dataclass(frozen=True)
class Profile:
    """The profile a build was made with, and why (``hiera stats`` and ``/health`` show both)."""

    name: str  # "small" | "large"
    asked: str  # "auto" | "small" | "large"
    passages: int
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "asked": self.asked, "passages": self.passages, "threshold": LARGE_AT,
                "why": self.why}


def choose(asked: str, passages: int) -> Profile:
    """The profile for a build of ``passages`` passages when ``asked`` (``auto`` decides by size)."""
    if asked not in PROFILES:
        raise BadInputError(f"--profile must be one of {', '.join(PROFILES)}, got {asked!r}")
    if asked != "auto":
        return Profile(asked, asked, passages, f"--profile {asked}")
    name = "large" if passages >= LARGE_AT else "small"
    relation = "≥" if name == "large" else "<"
    why = f"{passages:,} passages {relation} {LARGE_AT:,} (auto)"
    if passages >= COMPRESSED_AT:
        why += f"; ≥ {COMPRESSED_AT:,}: 8-bit graphs ({COMPRESSED_FACTORY})"
    return Profile(name, "auto", passages, why)


def factories(profile: Profile, passage: str | None, doc: str | None, sharded: bool) -> tuple[str, str]:
    """The FAISS factory strings of the passage and document indexes: as given, else the profile's."""
    if sharded or profile.name == "small":
        default = SMALL_FACTORY
    else:
        default = COMPRESSED_FACTORY if profile.passages >= COMPRESSED_AT else LARGE_FACTORY
    return passage or default, doc or default


def profile_of(record: dict[str, Any] | None) -> str:
    """The profile name a manifest records; builds made before profiles were ``small``."""
    return str((record or {}).get("name", "small"))
