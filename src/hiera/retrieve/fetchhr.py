"""FetchHR: every layer of the query encoder retrieves, k passages each, none fetched twice.

Ennen et al., "Hierarchical Representations in Dense Passage Retrieval for
Question-Answering": a head (RNet) per encoder layer maps that layer's hidden
states to a query vector in the passage vectors' space. Layer ℓ searches the
ordinary passage index (Flat, HNSW or IVF: the passage encoder is frozen, so
one index serves every layer) for ``k_ℓ`` passages no earlier layer fetched,
growing its search depth until it has them (:mod:`hiera.fetchhr.exclude`).
L layers return Σ k_ℓ passages (the search's ``k`` split by ``last_share``
unless ``k_per_layer`` says otherwise; ``k`` still caps the hits returned),
ranked by their own layer's score; each hit's
``stages`` holds ``layerN`` (score and rank within that layer), and the trace
has one step per layer with its time and how deep it had to search.

``single_layer=N`` retrieves from layer N alone, without exclusion (the
paper's Figure 3). Without a ``model`` every layer retrieves with its
mean-pooled hidden states (untrained heads; the last layer is then ``dense``).

Two defaults depart from the paper's Table 1, both chosen on SQuAD dev
questions outside the benchmark's sample (bench/fetchhr.py): the final
layer queries with the encoder's own query vector (``last_layer=encoder``:
the frozen encoder already maps into the passage space, and a head trained
on the CPU's budget only approximates it), and it fetches two thirds of
``k`` (``last_share=0.67``); ``last_layer=head last_share=0`` is the
paper's setting.
All layers share one forward pass of the encoder (``encode-query`` step).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from hiera.collection import Collection
from hiera.errors import BadInputError
from hiera.fetchhr.exclude import LayerFetch, fetch_new
from hiera.fetchhr.layers import parse_k_per_layer, parse_layers
from hiera.results import Hit, StageScore, TraceStep, timed
from hiera.retrieve.base import BaseRetriever
from hiera.spec import Level


class FetchHRRetriever(BaseRetriever):
    """Layer-wise queries with exclusion; passage and document level."""

    name = "fetchhr"

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

    def _prepare(self, queries: list[str], params: dict[str, Any]) -> list[dict[str, Any]]:
        model = self.model(params.get("model"))
        layers = self.layers_for(model, params)
        t = time.perf_counter()
        vecs = model.query_vectors(queries, layers, own_last=params["last_layer"] == "encoder")
        ms = (time.perf_counter() - t) * 1000 / len(queries)
        return [{"q": {n: vecs[n][i] for n in layers}, "layers": layers, "encode_ms": ms} for i in range(len(queries))]

    def _search(
        self, query: str, k: int, level: Level, params: dict[str, Any], trace: list[TraceStep], ctx: dict[str, Any]
    ) -> list[Hit]:
        layers: list[int] = ctx["layers"]
        single = params.get("single_layer") is not None
        budgets = [k] if single else parse_k_per_layer(params.get("k_per_layer"), len(layers), k,
                                                        float(params["last_share"]))
        index = self.col.passage_faiss
        keys = None if level == "passage" else self.col.passage_doc
        seen: set[int] = set()
        fetched: list[LayerFetch] = []
        for n, budget in zip(layers, budgets, strict=True):
            if budget == 0:  # k below the number of layers: the later layers fetch one each
                trace.append(TraceStep(f"layer{n}", {"layer": n, "k": 0, "skipped": f"k={k} < {len(layers)} layers"}))
                continue
            with timed(trace, f"layer{n}", layer=n, k=budget, exclusion=not single) as step:
                f = fetch_new(index, ctx["q"][n], budget, seen, keys, n)
                step.detail.update(k_grew_to=f.depth, searches=f.searches, fetched=len(f.positions))
                if f.partial:
                    step.detail["partial"] = f"the index held only {len(f.positions)} new of the {budget} asked for"
            fetched.append(f)
        return self._hits(fetched, k, level)

    def _hits(self, fetched: list[LayerFetch], k: int, level: Level) -> list[Hit]:
        """All layers' results ranked by their layer's score (the first ``k``), each tagged with its layer."""
        pos = np.concatenate([f.positions for f in fetched]) if fetched else np.zeros(0, np.int64)
        sc = np.concatenate([f.scores for f in fetched]) if fetched else np.zeros(0, np.float32)
        tag = [(f.layer, r + 1) for f in fetched for r in range(len(f.positions))]
        order = np.argsort(-sc, kind="stable")[:k]
        pos, sc = pos[order], sc[order]
        if level == "passage":
            hits = self.passage_hits(pos, sc)
        else:
            hits = self.doc_hits(np.asarray(self.col.passage_doc[pos], dtype=np.int64), sc, None, pos)
        for h, i, s in zip(hits, order, sc, strict=True):
            layer, rank = tag[int(i)]
            h.stages = {f"layer{layer}": StageScore(float(s), rank)}
        return hits
