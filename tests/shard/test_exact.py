"""A sharded build answers exactly like one index, in-process (no Ray needed)."""

from __future__ import annotations

from pathlib import Path

import helpers
import numpy as np
import pytest
from shard.compare import QUERIES, assert_same

from hiera.builds import build_collection, open_collection
from hiera.collection import Collection, LocalCollection
from hiera.errors import BadInputError, IndexMissingError
from hiera.index.bm25 import Bm25Config, Bm25Index
from hiera.index.bm25stats import CorpusStats, analyze, build_with_stats
from hiera.index.build import BuildOptions
from hiera.retrieve import get_retriever
from hiera.shard.collection import EXACT_METHODS, ShardedCollection
from hiera.shard.layout import plan_ranges
from hiera.spec import METHODS

CASES = [(name, level) for name, spec in METHODS.items() for level in spec.levels]


@pytest.fixture(scope="module")
def cols(unsharded: Path, sharded1: Path, sharded3: Path) -> dict[str, Collection]:
    return {"one": open_collection(unsharded), "s1": open_collection(sharded1), "s3": open_collection(sharded3)}


def test_sharded_builds_open_as_sharded(cols: dict[str, Collection]) -> None:
    assert type(cols["one"]) is LocalCollection and isinstance(cols["one"], Collection)
    assert isinstance(cols["s3"], ShardedCollection)
    assert [e["name"] for e in cols["s3"].manifest.shards] == ["000", "001", "002"]
    # the shards tile the global order
    assert cols["s3"].manifest.shards[-1]["passages"][1] == cols["one"].n_passages
    assert cols["s3"].n_docs == cols["one"].n_docs


@pytest.mark.parametrize("name,level", CASES, ids=[f"{n}-{lv}" for n, lv in CASES])
def test_every_method_is_exact_or_refused(cols: dict[str, Collection], name: str, level: str) -> None:
    one = get_retriever(name, cols["one"])
    for key in ("s1", "s3"):
        sharded = get_retriever(name, cols[key])
        if name not in EXACT_METHODS:
            with pytest.raises(BadInputError, match=f"method '{name}' is not served on a sharded build"):
                sharded.search(QUERIES[0], k=5, level=level)
            continue
        for q in QUERIES:
            assert_same(one.search(q, k=10, level=level).hits, sharded.search(q, k=10, level=level).hits,
                        f"{name} {level} {key} {q!r}")


def test_dhr_every_document_stage_is_exact(cols: dict[str, Collection]) -> None:
    stages = METHODS["dhr"].param("doc_stage").choices
    for stage in stages:
        for params in ({"doc_stage": stage}, {"doc_stage": stage, "passage_alpha": 0.4, "top_docs": 3}):
            a = get_retriever("dhr", cols["one"]).search(QUERIES[0], k=8, **params)
            b = get_retriever("dhr", cols["s3"]).search(QUERIES[0], k=8, **params)
            assert_same(a.hits, b.hits, f"dhr {params}")


def test_hybrid_interpolation_is_exact(cols: dict[str, Collection]) -> None:
    for level in ("passage", "doc"):
        a = get_retriever("hybrid", cols["one"]).search(QUERIES[1], k=10, level=level, fusion="interp", alpha=0.3)
        b = get_retriever("hybrid", cols["s3"]).search(QUERIES[1], k=10, level=level, fusion="interp", alpha=0.3)
        assert_same(a.hits, b.hits, f"hybrid interp {level}")


def test_bm25_shards_use_corpus_wide_statistics() -> None:
    """Shard score vectors, concatenated, are the one index's; shard-local IDF would not be."""
    texts = ["the volcano erupted in 1815", "a river delta", "volcano volcano ash", "city founded by the river",
             "", "ash clouds over the city"]
    cfg = Bm25Config()
    whole = Bm25Index.build(texts, cfg)
    parts = [texts[:2], texts[2:5], texts[5:]]
    tokens = [analyze(p, cfg) for p in parts]
    stats = sum((CorpusStats.of(t) for t in tokens), CorpusStats())
    shards = [build_with_stats(t, stats, cfg) for t in tokens]
    local = [Bm25Index.build(p, cfg) for p in parts]
    for q in ("volcano ash", "river city", "unknown words"):
        glued = np.concatenate([s.scores(q) for s in shards])
        # the same floats, not merely close: near-ties must rank as on one index
        np.testing.assert_array_equal(glued, whole.scores(q))
    # the point of global statistics: a shard indexed alone scores differently
    assert not np.allclose(np.concatenate([s.scores("volcano ash") for s in local]), whole.scores("volcano ash"))


def test_plan_ranges_are_contiguous_balanced_and_checked() -> None:
    offsets = np.array([0, 5, 6, 7, 20, 21, 30], dtype=np.int64)
    ranges = plan_ranges(offsets, 3)
    assert ranges[0][0] == 0 and ranges[-1][1] == 6
    assert all(a < b for a, b in ranges) and all(ranges[i][1] == ranges[i + 1][0] for i in range(2))
    assert plan_ranges(offsets, 6) == [(i, i + 1) for i in range(6)]
    with pytest.raises(BadInputError, match="cannot split 6 documents into 7 shards"):
        plan_ranges(offsets, 7)


def test_approximate_indexes_are_refused(unsharded: Path, tmp_path: Path, shard_cache: Path) -> None:
    import helpers

    col = helpers.copy_collection(unsharded, tmp_path / "col")
    live = (col / "index").resolve()
    with pytest.raises(BadInputError, match="sharded builds need Flat FAISS indexes"):
        build_collection(col, BuildOptions(progress=False, cache_dir=shard_cache, shards=2, passage_factory="HNSW32"),
              log=lambda m: None)
    assert (col / "index").resolve() == live
    assert not list((col / "builds").glob("*.partial"))


class CountingFanOut:
    """Wraps a collection's fan-out and records which primitive each round trip called."""

    def __init__(self, inner) -> None:
        self.inner, self.n, self.calls = inner, inner.n, []

    def call(self, method, args, *, partial_ok=False):
        self.calls.append(method)
        return self.inner.call(method, args, partial_ok=partial_ok)

    def close(self) -> None:
        self.inner.close()


@pytest.mark.parametrize("name,trips", [("hybrid", ["passage_lists"]),
                                        ("dhr", ["passage_lists", "score_candidates"])])
def test_fused_methods_ask_each_shard_once(sharded3: Path, cols: dict[str, Collection], name: str,
                                           trips: list[str]) -> None:
    """Every round trip costs milliseconds behind Ray Serve: hybrid makes one per query; the default DHR one for its
    hybrid-max documents and one for the passage stage (for a whole batch at once), and both stay exact."""
    col = ShardedCollection(sharded3)
    counting = CountingFanOut(col.fanout)
    col.fanout = counting  # before the index proxies exist: they keep the fan-out they were made with
    col.warmup()
    retriever = get_retriever(name, col)
    for q in QUERIES:
        counting.calls.clear()
        res = retriever.search(q, k=10, level="passage")
        assert counting.calls == trips, q
        assert_same(get_retriever(name, cols["one"]).search(q, k=10, level="passage").hits, res.hits, q)


def test_a_build_without_bm25_refuses_hybrid_as_one_index_does(tmp_path: Path, shard_cache: Path,
                                                                unsharded: Path) -> None:
    """``hybrid`` needs BM25: a sharded build made without it refuses in the same line as an unsharded one, rather
    than fusing the dense list with an empty BM25 list."""
    errors = []
    for name, shards in (("one", 0), ("s2", 2)):
        opts = BuildOptions(progress=False, cache_dir=shard_cache, bm25=False, shards=shards)
        col = open_collection(helpers.build_collection(tmp_path / name, helpers.make_docs(), opts))
        with pytest.raises(IndexMissingError) as e:
            get_retriever("hybrid", col).search("volcano lava", k=3)
        errors.append(str(e.value).replace(str(tmp_path / name), "ROOT"))
    assert errors[0] == errors[1] and "has no BM25 index" in errors[0]


def test_stats_lists_the_filter_fields_of_a_sharded_build(unsharded: Path, sharded3: Path, capsys) -> None:
    """``hiera stats`` shows what ``--filter`` can name on a sharded build too (the same fields), and its shards."""
    import json

    from hiera.cli import main

    shown = {}
    for name, root in (("one", unsharded), ("s3", sharded3)):
        assert main(["stats", str(root), "--json"]) == 0
        shown[name] = json.loads(capsys.readouterr().out)
    assert shown["s3"]["filter_fields"] == shown["one"]["filter_fields"] and shown["one"]["filter_fields"]
    assert shown["s3"]["index"]["shards"] == 3 and "shards" not in shown["one"]["index"]
