"""hiera as a LangChain retriever (``pip install 'hiera[langchain]'``).

    from hiera.integrations.langchain import HieraRetriever

    retriever = HieraRetriever(source="coll/", method="dhr", k=5, params={"lam": 1.5})
    docs = retriever.invoke("Who won Super Bowl 50?")
    docs[0].metadata["breadcrumb"], docs[0].metadata["stages"]

``source`` is a collection directory, an opened collection, a
:class:`hiera.client.HieraClient` or a server URL. ``method``, ``k``,
``level`` and ``params`` (``--set``'s names, aliases accepted) are validated
by the registry when the retriever is made, and again for per-call overrides
(``retriever.invoke(query, k=3, lam=0.5)``). Each ``Document`` holds the
passage text (a document-level hit: its best passage or summary), its id is
the passage id (else the document id), and its metadata are
:func:`hiera.integrations.source.hit_metadata`'s.
"""

from __future__ import annotations

from typing import Any

from hiera.integrations import missing_extra

try:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from pydantic import ConfigDict, PrivateAttr, model_validator
except ImportError:  # pragma: no cover - exercised only without the extra
    raise missing_extra("langchain", "langchain-core", "langchain") from None

from hiera.integrations.source import Source, check_request, hit_metadata, open_source
from hiera.results import Results

__all__ = ["HieraRetriever", "to_documents"]


def to_documents(results: Results) -> list[Document]:
    """LangChain documents for a hiera result list, best first."""
    return [
        Document(page_content=h.text, metadata=hit_metadata(h, results), id=h.passage_id or h.doc_id)
        for h in results.hits
    ]


class HieraRetriever(BaseRetriever):
    """Any hiera method as a LangChain ``BaseRetriever`` (a Runnable: ``invoke``, ``batch``, LCEL's ``|``)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    source: Any
    """A collection directory, an opened collection, a ``HieraClient`` or a server URL."""
    method: str = "dhr"
    """The retrieval method (``hiera methods`` lists them)."""
    k: int = 10
    level: str | None = None
    """Rank passages (``passage``) or documents (``doc``); default: the method's first level. Checked by the
    registry, so a level the method does not rank is the same ``BadInputError`` as on every other surface."""
    params: dict[str, Any] = {}
    """Method parameters by their ``--set`` names, e.g. ``{"lam": 1.5, "top_docs": 50}``."""
    filter: str | None = None
    """Search only what this expression allows, e.g. ``"source = wikipedia and year >= 2019"`` (docs/FILTERS.md)."""

    _source: Source = PrivateAttr()

    @model_validator(mode="after")
    def _checked(self) -> HieraRetriever:
        self.params = check_request(self.method, self.k, self.level, dict(self.params))
        self._source = open_source(self.source)
        return self

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **overrides: Any
    ) -> list[Document]:
        k = overrides.pop("k", self.k)
        level = overrides.pop("level", self.level)
        flt = overrides.pop("filter", self.filter)
        # an override replaces the constructor's value under whichever of its names it is given (k1 for top_docs)
        params = {**self.params, **check_request(self.method, k, level, overrides)}
        return to_documents(self._source.search(query, k, self.method, level, params, flt))
