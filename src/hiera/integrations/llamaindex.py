"""hiera as a LlamaIndex retriever (``pip install 'hiera[llamaindex]'``).

    from hiera.integrations.llamaindex import HieraRetriever

    retriever = HieraRetriever("coll/", method="dhr", k=5, params={"lam": 1.5})
    for n in retriever.retrieve("Who won Super Bowl 50?"):
        print(n.score, n.node.metadata["breadcrumb"])

The same sources, checks and metadata as the LangChain retriever
(:mod:`hiera.integrations.langchain`); each result is a ``NodeWithScore``
whose ``TextNode`` has the passage id as its id and the hit's final score as
its score. The bulky metadata (per-stage scores, set evidence) is kept out of
the text LlamaIndex shows an LLM or embeds; the breadcrumb stays in.
"""

from __future__ import annotations

from typing import Any

from hiera.integrations import missing_extra

try:
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError:  # pragma: no cover - exercised only without the extra
    raise missing_extra("llamaindex", "llama-index-core", "llamaindex") from None

from hiera.integrations.source import check_request, hit_metadata, open_source
from hiera.results import Results
from hiera.spec import Level

__all__ = ["HieraRetriever", "to_nodes"]

# what an LLM or an embedding gains nothing from: ids, scores and per-stage provenance (kept in metadata)
HIDDEN = ["stages", "reason", "support", "evidence", "section_path", "rank", "score", "method", "level", "passage_id",
          "doc_id"]


def to_nodes(results: Results) -> list[NodeWithScore]:
    """LlamaIndex nodes for a hiera result list, best first."""
    return [
        NodeWithScore(
            node=TextNode(id_=h.passage_id or h.doc_id, text=h.text, metadata=hit_metadata(h, results),
                          excluded_llm_metadata_keys=list(HIDDEN), excluded_embed_metadata_keys=list(HIDDEN)),
            score=h.score,
        )
        for h in results.hits
    ]


class HieraRetriever(BaseRetriever):
    """Any hiera method as a LlamaIndex ``BaseRetriever`` (``retrieve``, ``aretrieve``, query engines)."""

    def __init__(
        self,
        source: Any,
        method: str = "dhr",
        k: int = 10,
        level: Level | None = None,
        params: dict[str, Any] | None = None,
        callback_manager: CallbackManager | None = None,
        filter: str | None = None,
    ) -> None:
        """``source``: a collection directory, an opened collection, a ``HieraClient`` or a server URL;
        ``filter``: search only what the expression allows (docs/FILTERS.md)."""
        self.params = check_request(method, k, level, dict(params or {}))
        self.filter = filter
        self.method, self.k, self.level = method, k, level
        self.source = open_source(source)
        super().__init__(callback_manager=callback_manager)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return to_nodes(self.source.search(query_bundle.query_str, self.k, self.method, self.level, self.params,
                                           self.filter))
