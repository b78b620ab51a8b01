"""A typed client for ``hiera serve``: the HTTP API as Python calls returning hiera's own result types.

    from hiera.client import HieraClient

    with HieraClient("http://127.0.0.1:8000", api_key="…") as hc:
        for hit in hc.search("Who won Super Bowl 50?", k=5, retriever="dhr", lam=1.5):
            print(hit.breadcrumb(), hit.score, hit.reason())

It speaks HTTP only (it never opens a collection or loads a model), so it
sits low in the package: it imports the registry (:mod:`hiera.spec`) and the
result types (:mod:`hiera.results`), nothing that retrieves. The adapters in
:mod:`hiera.integrations` take a client wherever they take a local collection.

Design:

* Method parameters are checked against the registry before the request is
  sent (a name the method does not have, a wrong type or an out-of-range value
  is a :class:`~hiera.errors.BadInputError` at once; the server would only list
  an unknown name under ``ignored``).
* Every failure is a :class:`ServerError` (a :class:`~hiera.errors.HieraError`)
  carrying the server's one-line ``detail``, its HTTP ``status`` and the URL;
  the subclass says what kind: :class:`RequestError` (400/422, also a
  ``BadInputError``), :class:`AuthError` (401/403), :class:`NotFoundError`
  (404), :class:`ConflictError` (409: a write the collection's state refuses),
  :class:`UnavailableError` (503: a stale index, a full queue, or no server
  at the address) and :class:`SearchTimeoutError` (504, or no answer within
  ``timeout``).
* The API key comes from ``api_key`` or ``$HIERA_API_KEY``, as the server's does.
* httpx is imported when a client is made: ``pip install 'hiera[client]'``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from hiera.errors import BadInputError, HieraError
from hiera.results import Results, TraceStep
from hiera.spec import Level, method, reader_spec

API_KEY_ENV = "HIERA_API_KEY"  # the server's variable too (hiera.serve.guard; the tests check they agree)
DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_TIMEOUT_S = 60.0  # the server gives a search 30 s (--search-timeout) before it answers 504


class ServerError(HieraError):
    """A request the server refused or could not answer; ``detail`` is the server's own sentence."""

    def __init__(self, detail: str, status: int | None = None, url: str = "") -> None:
        self.detail, self.status, self.url = detail, status, url
        where = f"{url}: " if url else ""
        code = f"HTTP {status}: " if status is not None else ""
        super().__init__(f"{where}{code}{detail}")


class RequestError(ServerError, BadInputError):
    """400/422: the query or a parameter is not acceptable."""


class AuthError(ServerError):
    """401/403: the server wants an API key (``api_key=`` or ``$HIERA_API_KEY``), or another one."""


class NotFoundError(ServerError):
    """404: no such document (or endpoint)."""


class ConflictError(ServerError):
    """409: a write refused by the collection's state (another writer holds it, or it would remove every document)."""


class UnavailableError(ServerError):
    """503, or nothing listening: the index is being rebuilt, the search queue is full, or the server is down."""


class SearchTimeoutError(ServerError):
    """504, or no answer within the client's ``timeout``."""


_BY_STATUS: dict[int, type[ServerError]] = {
    400: RequestError, 413: RequestError, 422: RequestError, 401: AuthError, 403: AuthError, 404: NotFoundError,
    409: ConflictError, 503: UnavailableError, 504: SearchTimeoutError,
}


@dataclass
class Answer:
    """One answer of ``/answer``: the span, its passage and offsets, and every passage that gave the same string."""

    text: str
    score: float
    passage_id: str | None
    doc_id: str
    breadcrumb: str
    start: int
    end: int
    passage_rank: int | None = None
    evidence: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Answer:
        return cls(text=str(d["text"]), score=float(d["score"]), passage_id=d.get("passage_id"), doc_id=str(d["doc_id"]),
                   breadcrumb=str(d.get("breadcrumb") or ""), start=int(d["start"]), end=int(d["end"]),
                   passage_rank=d.get("passage_rank"), evidence=list(d.get("evidence") or []))


@dataclass
class Answers:
    """``/answer``'s body: ranked answers, the passages that were read (a :class:`Results`), the reader, the trace."""

    question: str
    answers: list[Answer]
    results: Results
    reader: dict[str, Any] = field(default_factory=dict)
    trace: list[TraceStep] = field(default_factory=list)

    @classmethod
    def from_dict(cls, d: dict[str, Any], level: Level = "passage") -> Answers:
        results = Results.from_dict({"query": d["question"], "level": level, "hits": d.get("passages") or [],
                                     "retriever": d.get("retriever", ""), "params": d.get("params") or {}})
        trace = [TraceStep(str(t["name"]), dict(t.get("detail") or {}), float(t.get("ms") or 0.0))
                 for t in d.get("trace") or []]
        return cls(question=str(d["question"]), answers=[Answer.from_dict(a) for a in d.get("answers") or []],
                   results=results, reader=dict(d.get("reader") or {}), trace=trace)


@dataclass(frozen=True)
class RemovedDocuments:
    """``DELETE /documents/{id}``'s body: the ids removed, how many documents and passages, the new corpus version."""

    removed: list[str]
    documents: int
    passages: int
    generation: int

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RemovedDocuments:
        return cls(removed=[str(i) for i in d["removed"]], documents=int(d["documents"]), passages=int(d["passages"]),
                   generation=int(d["generation"]))


def _query_value(v: Any) -> str | int | float:
    if isinstance(v, bool):
        return "true" if v else "false"
    return v if isinstance(v, int | float) else str(v)


class HieraClient:
    """A connection to one ``hiera serve``; reuse it (it keeps its HTTP connections open) and close it."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        *,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        transport: Any = None,
    ) -> None:
        """``transport``: an ``httpx`` transport (tests, proxies); ``timeout``: seconds to connect and to wait for an answer."""
        try:
            import httpx
        except ImportError:
            raise HieraError("hiera.client needs httpx: pip install 'hiera[client]'") from None
        if not isinstance(timeout, int | float) or isinstance(timeout, bool) or not timeout > 0:
            raise BadInputError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if not url.startswith(("http://", "https://")):
            raise BadInputError(f"the server URL must start with http:// or https://, got {url!r}")
        self.url = url.rstrip("/")
        self.timeout = float(timeout)
        key = api_key if api_key is not None else os.environ.get(API_KEY_ENV) or None
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._httpx = httpx
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=self.timeout, transport=transport)

    # -- plumbing ----------------------------------------------------------------
    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> HieraClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"HieraClient({self.url!r})"

    def _get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        return self._request("GET", path, params)

    def _request(self, verb: str, path: str, params: dict[str, Any] | None = None) -> Any:
        httpx = self._httpx
        url = f"{self.url}{path}"
        try:
            r = self._http.request(
                verb, path, params={k: _query_value(v) for k, v in (params or {}).items() if v is not None})
        except httpx.TimeoutException:
            raise SearchTimeoutError(f"no answer within {self.timeout:g} s (timeout=)", None, url) from None
        except httpx.TransportError as e:
            raise UnavailableError(f"cannot reach the server ({type(e).__name__}: {e})", None, url) from None
        if r.status_code >= 400:
            try:
                detail = r.json().get("detail")
            except ValueError:
                detail = None
            if not isinstance(detail, str):
                detail = " ".join(r.text.split())[:300] or r.reason_phrase
            raise _BY_STATUS.get(r.status_code, ServerError)(detail, r.status_code, url)
        try:
            return r.json()
        except ValueError:
            raise ServerError("the answer is not JSON: is this a hiera server?", r.status_code, url) from None

    # -- the API -------------------------------------------------------------------
    def search(
        self, query: str, k: int = 10, *, retriever: str = "dhr", level: Level | None = None, rerank: bool = False,
        filter: str | None = None, **params: Any,
    ) -> Results:
        """``/search``: ranked hits with per-stage scores and the trace; ``params`` as ``--set`` takes them;
        ``filter``: search only what the expression allows (the server checks it: a bad one is a ``ServerError``)."""
        checked = method(retriever).check(params)
        return Results.from_dict(
            self._get("/search", {"q": query, "k": k, "retriever": retriever, "level": level, "rerank": rerank,
                                  "filter": filter, **checked})
        )

    def answer(
        self, query: str, k: int = 10, *, retriever: str = "dhr", rerank: bool = False, filter: str | None = None,
        **params: Any,
    ) -> Answers:
        """``/answer`` (a server started with ``--reader``): ``params`` are the retriever's or the reader's."""
        spec, rspec = method(retriever), reader_spec()
        search_params = {n: v for n, v in params.items() if spec.param(n) is not None}
        read_params = {n: v for n, v in params.items() if n not in search_params}
        checked = {**spec.check(search_params), **rspec.check(read_params)}
        return Answers.from_dict(
            self._get("/answer", {"q": query, "k": k, "retriever": retriever, "rerank": rerank, "filter": filter,
                                  **checked})
        )

    def document(self, doc_id: str) -> dict[str, Any]:
        """``/documents/{id}``: the title tree with each section's passages (by id, title or redirect)."""
        from urllib.parse import quote

        if not isinstance(doc_id, str) or not doc_id:
            raise BadInputError("a document id is a non-empty string")
        return self._get(f"/documents/{quote(doc_id, safe='')}")

    def remove(self, doc_id: str) -> RemovedDocuments:
        """``DELETE /documents/{id}``: remove the document (by id, or an id merged into it) from the served collection.

        The server must have been started with an API key (a :class:`AuthError`
        otherwise); an unknown id is a :class:`NotFoundError`, a busy
        collection or its last document a :class:`ConflictError`, each with the
        server's sentence and nothing changed. Once this returns, the server's
        searches no longer return the document.
        """
        from urllib.parse import quote

        if not isinstance(doc_id, str) or not doc_id:
            raise BadInputError("a document id is a non-empty string")
        return RemovedDocuments.from_dict(self._request("DELETE", f"/documents/{quote(doc_id, safe='')}"))

    def methods(self) -> list[dict[str, Any]]:
        """``/methods``: every retriever and reader with the server's defaults and what each lacks there."""
        return self._get("/methods")

    def health(self) -> dict[str, Any]:
        """``/health``: the build served, statistics, models, retrievers, limits."""
        return self._get("/health")
