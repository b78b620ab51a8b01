"""FetchHR: every layer of the query encoder retrieves, k passages each, none fetched twice; one ranked list.

Ennen et al., "Hierarchical Representations in Dense Passage Retrieval for
Question-Answering": a head (RNet) per encoder layer maps that layer's hidden
states to a query vector in the passage vectors' space. Layer ℓ takes from
the ordinary passage index (Flat, HNSW or IVF: the passage encoder is frozen,
so one index serves every layer) ``k_ℓ`` passages no earlier layer fetched
(:mod:`hiera.fetchhr.exclude`). L layers return Σ k_ℓ passages (the search's
``k`` split by ``last_share`` unless ``k_per_layer`` says otherwise; ``k``
still caps the hits returned).

The union is then one ranking (:mod:`hiera.fetchhr.rank`): every fetched
passage scored by the encoder's own query vector (``rank=encoder``), which
the layers' own scores are not comparable enough to give. Each hit's
``stages`` holds ``layerN``, the layer that fetched it, with its score and
rank within that layer.

The cost per query (the trace has each step): one forward pass of the
encoder for every layer (``encode-query``), the heads stacked into one
batched product per weight (``heads``), one batched index search for every
layer at the depth that serves them all (``search``), exclusion over its
rows (a ``layerN`` step per layer; only a layer an approximate index left
short searches again), and the re-scoring (``rank``).

``single_layer=N`` retrieves from layer N alone, without exclusion, ranked
by its own score (the paper's Figure 3). Without a ``model`` every layer
retrieves with its mean-pooled hidden states (untrained heads; the last
layer is then ``dense``).

Two defaults depart from the paper's Table 1, both chosen on SQuAD dev
questions outside the benchmark's sample (bench/fetchhr.py): the final
layer queries with the encoder's own query vector (``last_layer=encoder``:
the frozen encoder already maps into the passage space, and a head trained
on the CPU's budget only approximates it), and it fetches two thirds of
``k`` (``last_share=0.67``); ``last_layer=head last_share=0`` is the
paper's setting.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from hiera.collection import Collection
from hiera.errors import BadInputError
from hiera.fetchhr.exclude import fetch_layers, shared_depth
from hiera.fetchhr.layers import parse_k_per_layer, parse_layers
from hiera.fetchhr.rank import Union, order, union
from hiera.index.dense import faiss_search
from hiera.index.masked import MaskedIndex
from hiera.query import PASSAGE, Query, QueryBatch
from hiera.results import Hit, StageScore, TraceStep, timed
from hiera.retrieve.base import BaseRetriever
from hiera.spec import Level


@dataclass(frozen=True)
class Heads:
    """What a batch's preparation tells each query: the layers that retrieve, trained heads or not, their time."""

    layers: list[int]
    trained: bool
    ms: float  # running the heads, per query


def _layer(n: int) -> str:
    """The batch vector name of layer ``n``'s query (the encoder's own is :data:`hiera.query.PASSAGE`)."""
    return f"layer{n}"


class FetchHRRetriever(BaseRetriever):
    """Layer-wise queries with exclusion; passage and document level."""

    name = "fetchhr"
    filters = True  # each layer searches and excludes among the allowed passages

    def __init__(self, collection: Collection, **defaults: Any) -> None:
        super().__init__(collection, **defaults)
        self._models: dict[str | None, Any] = {}  # model path (None: model-free) → FetchHRModel
        self._lock = threading.Lock()

    def model(self, path: str | None) -> Any:
        """The FetchHR model at ``path`` (loaded once), checked against this collection's passage encoder."""
        from hiera.fetchhr.model import FetchHRModel

        with self._lock:
            if path not in self._models:
                enc = self.col.passage_encoder
                m = FetchHRModel.mean_pooled(enc) if path is None else FetchHRModel.load(path, enc)
                m.check_passages(self.col.models["passage"]["fingerprint"], str(self.col.root))
                self._models[path] = m
            return self._models[path]

    def layers_for(self, model: Any, params: dict[str, Any]) -> list[int]:
        """The layers that retrieve: ``single_layer`` alone, else ``layers`` (default: every head)."""
        single = params.get("single_layer")
        if single is not None:
            if single not in model.layers:
                raise BadInputError(
                    f"single_layer={single}: the model has heads for layers {model.layers[0]}-{model.layers[-1]}"
                    if model.layers == list(range(model.layers[0], model.layers[-1] + 1))
                    else f"single_layer={single}: the model has heads for layers {','.join(map(str, model.layers))}"
                )
            return [single]
        return parse_layers(params.get("layers"), model.layers)

    def _prepare(self, queries: list[str], params: dict[str, Any]) -> QueryBatch:
        model = self.model(params.get("model"))
        layers = self.layers_for(model, params)
        qv = model.vectors(queries, layers, own_last=params["last_layer"] == "encoder")
        n = len(queries)
        vectors = {_layer(ly): np.asarray(qv.layers[ly], dtype=np.float32) for ly in layers}
        vectors[PASSAGE] = np.asarray(qv.own, dtype=np.float32)
        state = Heads(layers, model.trained, qv.heads_ms / n)
        return QueryBatch(queries, params, vectors, qv.encode_ms / n, [state] * n)

    def _search(self, q: Query, k: int, level: Level, params: dict[str, Any], trace: list[TraceStep]) -> list[Hit]:
        heads: Heads = q.state
        layers = heads.layers
        single = params.get("single_layer") is not None
        trace.append(TraceStep("heads", {"layers": layers, "trained": heads.trained, "stacked": True}, heads.ms))
        budgets = [k] if single else parse_k_per_layer(params.get("k_per_layer"), len(layers), k,
                                                        float(params["last_share"]))
        active = [(n, b) for n, b in zip(layers, budgets, strict=True) if b > 0]
        index = self.col.passage_faiss
        if q.filter is not None:  # every layer searches the allowed passages only (exclusion runs unchanged)
            index = MaskedIndex(index, lambda: self.col.passage_vectors, q.filter, "passage")
        keys = None if level == "passage" else self.col.passage_doc
        queries = np.stack([q.vector(_layer(n)) for n, _ in active])
        depth = shared_depth([b for _, b in active], int(index.ntotal), keys is not None)
        with timed(trace, "search", queries=len(active), depth=depth,
                   index=self.col.faiss_types.get("passage")):
            found = faiss_search(index, queries, depth)
        fetched = fetch_layers(index, queries, [b for _, b in active], [n for n, _ in active], keys, found)
        by_layer = {f.layer: f for f in fetched}
        for n, budget in zip(layers, budgets, strict=True):
            if budget == 0:  # k split over the layers left this one nothing (k_per_layer never gives 0)
                trace.append(TraceStep(f"layer{n}", {"layer": n, "k": 0, "skipped": _why_none(k, budgets,
                                                                                        params["last_share"])}))
                continue
            f = by_layer[n]
            detail: dict[str, Any] = {"layer": n, "k": budget, "exclusion": not single, "k_grew_to": f.depth,
                                      "searches": f.searches, "fetched": len(f.positions)}
            if f.partial:
                detail["partial"] = f"the index held only {len(f.positions)} new of the {budget} asked for"
            trace.append(TraceStep(f"layer{n}", detail, f.ms))
        rank = "layer" if single else params["rank"]
        with timed(trace, "rank", by=rank, candidates=sum(len(f.positions) for f in fetched)):
            u = union(fetched)
            scores = u.layer_scores if rank == "layer" else self.col.passage_scores(u.positions, q.qp)
            top = order(scores)[:k]
        return self._hits(u, top, np.asarray(scores, dtype=np.float32)[top], level)

    def _hits(self, u: Union, top: np.ndarray, scores: np.ndarray, level: Level) -> list[Hit]:
        """The first ``k`` of the ranked union, each tagged with the layer that fetched it (its score and rank there)."""
        pos = u.positions[top]
        if level == "passage":
            hits = self.passage_hits(pos, scores)
        else:
            hits = self.doc_hits(np.asarray(self.col.passage_doc[pos], dtype=np.int64), scores, None, pos)
        for h, i in zip(hits, top, strict=True):
            h.stages = {f"layer{int(u.layers[i])}": StageScore(float(u.layer_scores[i]), int(u.layer_ranks[i]))}
        return hits


def _why_none(k: int, budgets: list[int], last_share: float) -> str:
    """Why k's split gave a layer no passages, in the terms of the parameters that split it."""
    if last_share > 0 and len(budgets) > 1:
        return (f"k={k} split by last_share={last_share:g}: the last layer fetches {budgets[-1]}, and the "
                f"{len(budgets) - 1} layers before it share {k - budgets[-1]} (k_per_layer gives every layer its own)")
    return f"k={k} split evenly over {len(budgets)} layers leaves the earlier ones none (k_per_layer gives every " \
           "layer its own)"
