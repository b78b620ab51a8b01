"""Build profiles: chosen from the collection's size (or as asked), recorded in the manifest, followed by the indexes
and by the default method's ``auto`` document stage."""

from __future__ import annotations

import json
from pathlib import Path

import helpers
import numpy as np
import pytest

from hiera.builds import build_collection, open_collection
from hiera.cli import main
from hiera.errors import BadInputError
from hiera.index.build import BuildOptions
from hiera.index.dense import (
    HNSW_EF_CONSTRUCTION,
    build_faiss,
    faiss_module,
    faiss_search,
    load_faiss,
    save_faiss,
)
from hiera.index.profile import COMPRESSED_AT, COMPRESSED_FACTORY, LARGE_AT, LARGE_FACTORY, choose, factories
from hiera.retrieve import get_retriever
from hiera.spec import LARGE_DOC_STAGE, resolve_doc_stage


def test_auto_follows_the_size_and_an_explicit_choice_wins() -> None:
    assert choose("auto", LARGE_AT - 1).name == "small" and choose("auto", LARGE_AT).name == "large"
    assert "auto" in choose("auto", LARGE_AT).why and f"{LARGE_AT:,}" in choose("auto", 5).why
    assert choose("large", 10).name == "large" and choose("small", 10**9).name == "small"
    with pytest.raises(BadInputError, match="--profile must be one of"):
        choose("huge", 10)


def test_factories_follow_the_profile_unless_given_and_shards_stay_flat() -> None:
    large, small = choose("large", 1), choose("small", 1)
    assert factories(large, None, None, sharded=False) == (LARGE_FACTORY, LARGE_FACTORY)
    assert factories(small, None, None, sharded=False) == ("Flat", "Flat")
    assert factories(large, "IVF64,Flat", None, sharded=False) == ("IVF64,Flat", LARGE_FACTORY)
    assert factories(large, None, None, sharded=True) == ("Flat", "Flat")  # exact merging needs Flat shards


def test_very_large_builds_get_compressed_graphs_and_say_so() -> None:
    big = choose("auto", COMPRESSED_AT)
    assert big.name == "large" and COMPRESSED_FACTORY in big.why
    assert factories(big, None, None, sharded=False) == (COMPRESSED_FACTORY, COMPRESSED_FACTORY)
    assert factories(choose("auto", COMPRESSED_AT - 1), None, None, sharded=False) == (LARGE_FACTORY, LARGE_FACTORY)
    assert factories(big, "Flat", None, sharded=False) == ("Flat", COMPRESSED_FACTORY)  # an explicit type wins
    assert factories(choose("small", COMPRESSED_AT), None, None, sharded=False) == ("Flat", "Flat")


def test_auto_stage_follows_the_profile() -> None:
    assert resolve_doc_stage("auto", True, True, "small") == "hybrid-max"
    assert resolve_doc_stage("auto", True, True, "large") == LARGE_DOC_STAGE
    assert resolve_doc_stage("auto", True, False, "large") == "bm25"
    assert resolve_doc_stage("summary", True, True, "large") == "summary"  # a named stage is never replaced


# -- the large profile's graphs where they are approximate --------------------------------------------------
N_VECTORS, DIM, N_QUERIES, RECALL_AT = 8000, 384, 200, 10
# measured (deterministic: the same on 1 and 2 threads): at the loaded efSearch 128, HNSW32 0.998 and HNSW32_SQ8
# 0.990; efSearch 32 0.93, FAISS's default 16 0.81; HNSW8 0.91, HNSW4 0.66
RECALL_FLOOR = 0.97


def _embedding_like(n: int, seed: int = 0) -> np.ndarray:
    """Unit vectors on a 48-dimensional subspace plus noise: neighbours close enough that a graph search can miss."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 48), dtype=np.float32) @ rng.standard_normal((48, DIM), dtype=np.float32)
    x += 0.3 * np.sqrt(48) * rng.standard_normal((n, DIM), dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _recall(index, queries: np.ndarray, exact: np.ndarray) -> float:
    found, _ = faiss_search(index, queries, RECALL_AT)
    return float(np.mean([len(set(f) & set(e)) / RECALL_AT for f, e in zip(found, exact, strict=True)]))


@pytest.mark.parametrize("factory", [LARGE_FACTORY, COMPRESSED_FACTORY])
def test_the_large_profiles_graphs_find_the_exact_neighbours(factory: str, tmp_path: Path) -> None:
    """Thousands of vectors, where a graph search is approximate: built, saved and loaded as a build does it,
    the graph finds at least 97% of the exact top 10 (inner product over the stored float16 vectors)."""
    x = _embedding_like(N_VECTORS + N_QUERIES)
    stored, queries = x[:N_VECTORS].astype(np.float16), x[N_VECTORS:]
    exact = np.argsort(-(queries @ stored.astype(np.float32).T), axis=1)[:, :RECALL_AT]
    save_faiss(build_faiss(stored, factory), tmp_path / "g.faiss")
    index = load_faiss(tmp_path / "g.faiss")
    assert _recall(index, queries, exact) >= RECALL_FLOOR
    # ... and the test is where it can fail: the same graph searched shallowly misses neighbours
    graph = faiss_module().downcast_index(index).hnsw
    # linked with the deeper construction search, which the saved graph keeps for rows appended later
    assert graph.efConstruction == HNSW_EF_CONSTRUCTION > 40
    ef, graph.efSearch = graph.efSearch, 16
    assert _recall(index, queries, exact) < 0.9
    graph.efSearch = ef


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("profile") / "col"
    opts = BuildOptions(progress=False, profile="large", cache_dir=helpers.session_cache_dir(tmp_path_factory),
                        backend=helpers.SHARED_BACKEND)
    return helpers.build_collection(root, helpers.make_docs(), opts)


def test_a_large_build_records_its_profile_uses_hnsw_and_the_large_stage(large: Path, shared_root: Path) -> None:
    col = open_collection(large)
    assert col.profile == "large" and col.manifest.profile["asked"] == "large"
    assert col.faiss_types == {"passage": LARGE_FACTORY, "doc": LARGE_FACTORY}
    dhr = get_retriever("dhr", col)
    assert dhr.defaults["doc_stage"] == LARGE_DOC_STAGE
    res = dhr.search("How do plants turn sunlight into chemical energy?", k=3)
    assert res.params["doc_stage"] == LARGE_DOC_STAGE and res.hits[0].doc_id == "photosynthesis"
    small = open_collection(shared_root)  # six documents: auto chose small, as every build before profiles
    assert small.profile == "small" and small.manifest.profile["asked"] == "auto"
    assert get_retriever("dhr", small).defaults["doc_stage"] == "hybrid-max"
    assert small.faiss_types == {"passage": "Flat", "doc": "Flat"}


def test_the_same_documents_rank_alike_whatever_the_profile(large: Path, shared_root: Path) -> None:
    """Six documents: HNSW finds every neighbour, so doc-hybrid on HNSW equals doc-hybrid on Flat."""
    a = get_retriever("dhr", open_collection(large), doc_stage="doc-hybrid")
    b = get_retriever("dhr", open_collection(shared_root), doc_stage="doc-hybrid")
    for q in ("How do plants turn sunlight into energy?", "When did the Roman Empire fall?", "jazz improvisation"):
        ra, rb = a.search(q, k=5), b.search(q, k=5)
        assert [h.passage_id for h in ra] == [h.passage_id for h in rb]


def test_stats_and_rebuild_keep_the_profile(large: Path, tmp_path: Path, capsys) -> None:
    root = helpers.copy_collection(large, tmp_path / "col")
    assert main(["stats", str(root), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["index"]["profile"]["name"] == "large" and stats["index"]["profile"]["why"] == "--profile large"
    opts = BuildOptions.from_manifest(open_collection(root).manifest)
    opts.progress = False
    m = build_collection(root, opts, log=helpers.QUIET)  # what hiera add does: the build's own options again
    assert m.profile["name"] == "large" and m.faiss == {"passage": LARGE_FACTORY, "doc": LARGE_FACTORY}


def test_a_build_with_compressed_graphs_searches_and_rebuilds_like_the_float_one(
    large: Path, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The 8-bit graphs very large builds get (trained on the float16 matrix), on six documents: the same ranked documents
    (their recall where graphs are approximate: test_the_large_profiles_graphs_find_the_exact_neighbours)."""
    root = tmp_path / "sq8"
    opts = BuildOptions(progress=False, profile="large", passage_factory=COMPRESSED_FACTORY, doc_factory=COMPRESSED_FACTORY,
                        cache_dir=helpers.session_cache_dir(tmp_path_factory), backend=helpers.SHARED_BACKEND)
    helpers.build_collection(root, helpers.make_docs(), opts)
    col = open_collection(root)
    assert col.faiss_types == {"passage": COMPRESSED_FACTORY, "doc": COMPRESSED_FACTORY}
    a, b = get_retriever("dhr", col), get_retriever("dhr", open_collection(large))
    for q in ("How do plants turn sunlight into energy?", "When did the Roman Empire fall?", "jazz improvisation"):
        assert [h.doc_id for h in a.search(q, k=3)] == [h.doc_id for h in b.search(q, k=3)]
    again = BuildOptions.from_manifest(col.manifest)
    again.progress = False
    assert build_collection(root, again, log=helpers.QUIET).faiss == {"passage": COMPRESSED_FACTORY,
                                                                      "doc": COMPRESSED_FACTORY}
