"""The JSON search API and the web page, as one FastAPI application: :func:`create_app` and its routes.

What the routes stand on lives beside this module: the collection and its
retrievers (:mod:`~hiera.serve.service`), the query parameters generated from
the registry (:mod:`~hiera.serve.params`), the API key and body limit
(:mod:`~hiera.serve.guard`) and the bounded search pool
(:mod:`~hiera.serve.pool`).

Design choices:

* Searches (``/search``, ``/answer``) run in the search pool, with a deadline
  each; the other endpoints are plain ``def`` functions that FastAPI runs in
  its thread pool.
* Every error a user can cause is a 4xx with ``{"detail": "<one readable
  line>"}``: the web page shows ``detail`` as is, so it must be a sentence,
  never a stack trace or a pydantic error list.
* Request parameters are never turned into file paths: a document id is only
  a SQL parameter, and the only files served are the packaged web assets.
* CORS is off unless one origin is allowed.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI, HTTPException, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool

from hiera.builds import open_collection, remove_documents
from hiera.collection import Collection
from hiera.errors import (
    BadInputError,
    CollectionChangedError,
    HieraError,
    ShardUnavailableError,
    StoreBusyError,
)
from hiera.index.exact import resolve_placement
from hiera.lock import CollectionBusyError
from hiera.results import TraceStep, check_level
from hiera.retrieve.protocol import Retriever
from hiera.serve.guard import API_KEY_ENV, MAX_BODY_BYTES, MAX_PENDING_SEARCHES, SEARCH_TIMEOUT_S, Guard
from hiera.serve.params import (
    READER_SERVER_SIDE,
    SERVER_SIDE,
    SERVER_SIDE_TYPE,
    method_parameters,
    query_names,
    reader_parameters,
    request_parameters,
    unknown_message,
    validation_message,
)
from hiera.serve.pool import Gate, SearchPool
from hiera.serve.service import Service, document_payload
from hiera.shard.fanout import ShardCalls, shard_calls
from hiera.spec import MAX_K, MAX_QUERY_CHARS, reader_spec
from hiera.version import __version__

__all__ = ["API_KEY_ENV", "MAX_BODY_BYTES", "SEARCH_TIMEOUT_S", "create_app"]

log = logging.getLogger("hiera.serve")

WEB_DIR = Path(__file__).resolve().parent / "web"


def _docs_assets() -> Path | None:
    """Swagger UI and ReDoc files from fastapi-offline (a dependency); None where it is missing (a bare
    PYTHONPATH=src checkout), and FastAPI's CDN-loaded pages serve instead."""
    spec = importlib.util.find_spec("fastapi_offline")
    return Path(spec.origin).parent / "static" if spec is not None and spec.origin else None
MAX_DOC_ID_CHARS = 1000
PROCESS_TIME_HEADER = "X-Process-Time-Ms"
MAX_READ_K = 100  # passages one /answer reads: a reader pass costs ~30 ms a passage on a CPU
SHARD_WAIT_MARGIN_S = 1.0  # shard calls give up this long before the search deadline: a 503 that says why, not a 504


def _unprocessable(msg: str) -> HTTPException:
    return HTTPException(status_code=422, detail=msg)


def mark_partial(body: dict[str, Any], calls: ShardCalls) -> None:
    """``partial`` and ``missing_shards`` (the request asked for partial results), and a trace step naming them."""
    missing = sorted(calls.missing)
    body["partial"] = bool(missing)
    body["missing_shards"] = missing
    if missing:
        step = TraceStep("partial", {"missing_shards": missing, "why": {m: calls.missing[m] for m in missing},
                                     "note": "hits of the missing shards are absent from this answer"})
        body.setdefault("trace", []).append(asdict(step))


def create_app(
    root: Path,
    warmup: bool = True,
    reranker: Path | None = None,
    rerank_depth: int = 20,
    vectors: str = "float16",
    *,
    api_key: str | None = None,
    cors_origin: str | None = None,
    search_timeout: float = SEARCH_TIMEOUT_S,
    max_body: int = MAX_BODY_BYTES,
    max_pending: int = MAX_PENDING_SEARCHES,
    opener: Callable[..., Collection] = open_collection,
    reader: Path | None = None,
    device: str = "auto",
    dense_search: str = "auto",
) -> FastAPI:
    """The API for the collection at ``root``.

    The collection is opened here, not at the first request, so a wrong
    directory or a stale index fails at start-up with its own message
    (a :class:`HieraError`). ``warmup`` loads everything before serving.

    ``api_key``: required on every data endpoint (``None``: the
    ``HIERA_API_KEY`` environment variable if set; ``""``: no key).
    ``cors_origin``: the one origin whose pages may call the API (default:
    none, so browsers keep other sites' pages from reading it).
    """
    if api_key is None:
        api_key = os.environ.get(API_KEY_ENV) or None
    placement = resolve_placement(device, dense_search)  # bad choices fail at start-up, in one line
    if (device, dense_search) != ("auto", "auto"):  # where the models run and how dense indexes are searched
        opener = functools.partial(opener, device=device, dense_search=dense_search)
    service = Service(Path(root), reranker=reranker, rerank_depth=rerank_depth, vectors=vectors, opener=opener,
                      reader=reader, device=placement.device)
    pool = SearchPool(search_timeout, max_pending=max_pending)
    gate = Gate()  # searches share it; a removal holds it alone from its commit to the reload
    service.limits = {"search_timeout_s": search_timeout, "body_bytes": max_body, "pending_searches": max_pending}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if warmup:
            service.warmup()
        log.info("serving %s: %d documents, retrievers %s", service.root, service.col.n_docs, ", ".join(service.available))
        try:
            yield
        finally:
            pool.shutdown()

    docs_assets = _docs_assets()
    app = FastAPI(
        title="hiera",
        version=__version__,
        description="Hierarchical retrieval over structured documents: search passages or documents, "
        "see why each hit ranks where it does, and browse a document's table of contents.",
        lifespan=lifespan,
        # both pages are served below from packaged assets where they are installed: FastAPI's load from a CDN
        **({"docs_url": None, "redoc_url": None} if docs_assets else {}),
    )
    app.state.service = service
    app.state.pool = pool
    app.state.api_key_required = bool(api_key)
    # Starlette runs the last added middleware first: CORS answers preflights before the key is asked for.
    app.add_middleware(Guard, api_key=api_key, max_body=max_body)
    if cors_origin:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware, allow_origins=[cors_origin], allow_methods=["GET"],
            allow_headers=["Authorization", "X-API-Key"], expose_headers=[PROCESS_TIME_HEADER],
        )

    @app.middleware("http")
    async def timing(request: Request, call_next: Callable[[Request], Any]) -> Response:
        """One log line per request and the time in a header: the numbers a load test checks."""
        t0 = time.perf_counter()
        status = 500
        try:
            response = await call_next(request)
            status = response.status_code
        finally:
            ms = (time.perf_counter() - t0) * 1000.0
            log.info("%s %s %d %.1f ms", request.method, request.url.path, status, ms)
        response.headers[PROCESS_TIME_HEADER] = f"{ms:.1f}"
        return response

    @app.exception_handler(HieraError)
    async def hiera_error(request: Request, exc: HieraError) -> JSONResponse:
        return JSONResponse(status_code=400, content={"detail": str(exc)})

    @app.exception_handler(CollectionChangedError)
    async def collection_changed(request: Request, exc: CollectionChangedError) -> JSONResponse:
        """Changed twice under one search: 503 (retry), never rows the store no longer holds."""
        return JSONResponse(status_code=503, content={"detail": str(exc)}, headers={"Retry-After": "1"})

    @app.exception_handler(StoreBusyError)
    async def store_busy(request: Request, exc: StoreBusyError) -> JSONResponse:
        """The store stayed locked by another process's commit: 503 (retry), not an internal error."""
        log.warning("%s %s 503: %s", request.method, request.url.path, exc)
        return JSONResponse(status_code=503, content={"detail": str(exc)}, headers={"Retry-After": "2"})

    @app.exception_handler(ShardUnavailableError)
    async def shard_unavailable(request: Request, exc: ShardUnavailableError) -> JSONResponse:
        """A shard did not answer: 503 (retry), never a result silently missing that shard's hits."""
        log.warning("%s %s 503: %s", request.method, request.url.path, exc)
        return JSONResponse(status_code=503, content={"detail": str(exc), "missing_shards": exc.shards},
                            headers={"Retry-After": "2"})

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        """A failure no handler above names: still JSON with a one-line ``detail`` (the traceback goes to the log)."""
        log.exception("%s %s failed", request.method, request.url.path)
        line = " ".join(str(exc).split()) or "no message"
        return JSONResponse(status_code=500, content={"detail": f"internal error ({type(exc).__name__}): {line}"})

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(status_code=422, content={"detail": validation_message(exc)})

    method_params, canonical = method_parameters()
    reader_params, reader_canonical = reader_parameters()

    def checked_request(
        request: Request, q: str, retriever: str, rerank: bool, given: dict[str, Any], filter: str | None,
        accepted: frozenset[str],
    ) -> tuple[Retriever, dict[str, Any], list[str]]:
        """What /search and /answer check alike: the query, server-side names, staleness, the method's parameters.

        A name the route does not declare (``accepted``) is a 422, not silently dropped: ``lamda=0.3`` would
        otherwise search with the default λ and look like an answer to the question asked. A declared name the
        chosen method does not take is only listed under ``ignored`` (the web page sends every control).
        """
        if not q.strip():
            raise _unprocessable("the query is empty: type a question")
        if len(q) > MAX_QUERY_CHARS:
            raise _unprocessable(f"the query is {len(q)} characters long; the limit is {MAX_QUERY_CHARS}")
        refused = sorted(set(request.query_params) & SERVER_SIDE)
        if refused:
            what, value = ("a URL", "URL") if SERVER_SIDE_TYPE.get(refused[0]) == "url" else ("a directory", "PATH")
            raise _unprocessable(
                f"{', '.join(refused)}: a server-side setting ({what}), not a request parameter; "
                f"set it with `hiera build DIR --set METHOD.{refused[0]}={value}` and restart or rebuild"
            )
        unknown = sorted(set(request.query_params) - accepted)
        if unknown:
            raise _unprocessable(unknown_message(unknown, accepted))
        service.refresh()
        if service.stale:
            raise HTTPException(status_code=503, detail=service.stale)
        try:
            r = service.retriever(retriever, rerank=rerank)
        except HieraError as e:  # an unknown method, one whose index is missing, a reranker the server lacks
            raise _unprocessable(str(e)) from None
        values: dict[str, Any] = {}
        for n, v in given.items():
            if v is None or v == "":
                continue
            if canonical[n] in values:  # ?lam=1&lambda=2: two spellings of one parameter
                raise _unprocessable(f"{canonical[n]} is given under two names (it has aliases); give it once")
            values[canonical[n]] = v
        params = {n: v for n, v in values.items() if r.spec.param(n) is not None}
        try:
            params = r.spec.check(params)
            if filter:  # checked and compiled (once per build) here, so a bad one is a 422 before any search
                getattr(r, "base", r).compile_filter(filter)
        except HieraError as e:
            raise _unprocessable(str(e)) from None
        return r, params, sorted(set(values) - set(params))

    async def respond(work: Callable[[], dict[str, Any]], ignored: list[str], partial: bool = False) -> JSONResponse:
        """Run ``work`` in the search pool (its time limit, its queue bound); the body gets its time and what was ignored.

        Shard calls (a sharded index served by Ray) stop waiting just before
        the search deadline, counted from the request's arrival, so a shard
        that does not answer is a 503 naming it rather than a 504. With
        ``partial`` the body says whether shards were missing.
        """
        arrived = time.monotonic()

        def timed() -> dict[str, Any]:
            t0 = time.perf_counter()
            budget = pool.timeout - SHARD_WAIT_MARGIN_S - (time.monotonic() - arrived)
            with gate.search(), shard_calls(partial=partial, timeout=max(0.0, budget)) as calls:
                try:
                    body = work()
                except CollectionChangedError:
                    # another process removed rows this search found after it began: once more, on the build
                    # that serves the store's new state (work looks its retriever up again)
                    service.refresh(wait=True)
                    body = work()
            if partial:
                mark_partial(body, calls)
            body["took_ms"] = round((time.perf_counter() - t0) * 1000.0, 3)
            return body

        body = await pool.run(timed)
        body["ignored"] = ignored
        return JSONResponse(body)

    async def search(
        request: Request, q: str, k: int, retriever: str, partial: bool, filter: str | None,
        level: Literal["passage", "doc"] | None, rerank: bool, **given: Any,
    ) -> JSONResponse:
        """Ranked hits with per-stage scores, a one-line reason each, and the timed trace.

        Parameters the chosen retriever does not take are ignored (and listed
        under ``ignored``): the web page sends its controls' values whatever
        the method, and that must not be an error.
        """
        # in a worker thread: a refresh opens the newer build (and, served by Ray, calls its shards), which must not
        # block the event loop, and Ray refuses its blocking calls there
        r, params, ignored = await run_in_threadpool(
            checked_request, request, q, retriever, rerank, given, filter, search_names)
        if level is not None:
            try:
                check_level(retriever, r.levels, level)  # a bad value like any other: a 422 before any search
            except HieraError as e:
                raise _unprocessable(str(e)) from None
        fkw = {"filter": filter} if filter else {}
        # the retriever is looked up again in the pool: the build may have been swapped while the search waited
        return await respond(lambda: service.retriever(retriever, rerank=rerank).search(
            q, k=k, level=level, **fkw, **params).to_dict(), ignored, partial)

    search.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            *request_parameters(MAX_K, "number of hits"),
            inspect.Parameter("level", inspect.Parameter.KEYWORD_ONLY, annotation=Literal["passage", "doc"] | None,
                              default=Query(None, description="rank passages or documents (default: the method's first level)")),
            inspect.Parameter("rerank", inspect.Parameter.KEYWORD_ONLY, annotation=bool,
                              default=Query(False, description="rescore the top hits with the server's cross-encoder")),
            *method_params,
        ]
    )
    search_names = query_names(search.__signature__)  # type: ignore[attr-defined]
    app.get("/search", summary="Search the collection")(search)

    async def answer(request: Request, q: str, k: int, retriever: str, partial: bool, filter: str | None,
                     rerank: bool, **given: Any) -> JSONResponse:
        """Retrieve ``k`` passages and read them: ranked answers, each with its passage, offsets and evidence.

        The same JSON as ``hiera answer --json``; ``start``/``end`` are
        character offsets of the answer in its passage's text.
        """
        refused = sorted(set(request.query_params) & READER_SERVER_SIDE)
        if refused:
            raise _unprocessable(f"{', '.join(refused)}: the reader is chosen when the server starts (--reader DIR)")
        reader = service.answerer()
        r, params, ignored = await run_in_threadpool(
            checked_request, request, q, retriever, rerank, {n: v for n, v in given.items() if n in canonical}, filter,
            answer_names,
        )
        if "passage" not in r.spec.levels:
            raise _unprocessable(f"the reader reads passages; retriever {retriever!r} ranks documents only")
        try:
            read = reader_spec().check(
                {reader_canonical[n]: v for n, v in given.items() if n in reader_canonical and v is not None and v != ""}
            )
        except HieraError as e:
            raise _unprocessable(str(e)) from None

        def run() -> dict[str, Any]:
            from hiera.read.pipeline import read_results

            res = service.retriever(retriever, rerank=rerank).search(
                q, k=k, level="passage", **({"filter": filter} if filter else {}), **params)
            sep = service.col.store.title_sep
            return read_results(reader, res, sep, **read).to_dict()

        return await respond(run, ignored, partial)

    answer.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            *request_parameters(MAX_READ_K, "passages retrieved and read"),
            inspect.Parameter("rerank", inspect.Parameter.KEYWORD_ONLY, annotation=bool,
                              default=Query(False, description="rerank before reading (the server's cross-encoder)")),
            *method_params,
            *reader_params,
        ]
    )
    answer_names = query_names(answer.__signature__)  # type: ignore[attr-defined]
    app.get("/answer", summary="Answer a question: retrieve passages, then read them")(answer)

    @app.get("/methods", summary="Every retrieval method with its parameters, defaults and requirements")
    def methods() -> JSONResponse:
        return JSONResponse(service.methods())

    @app.get("/documents/{doc_id:path}", summary="One document's title tree")
    def document(doc_id: str) -> JSONResponse:
        """The document's table of contents and its passages grouped by section.

        ``doc_id`` is looked up in SQL only (by id, then as a title or
        redirect), never used as a path.
        """
        doc = None
        if 0 < len(doc_id) <= MAX_DOC_ID_CHARS:
            doc = service.col.store.find_document(doc_id)
        if doc is None:
            shown = doc_id if len(doc_id) <= 80 else doc_id[:77] + "..."
            raise HTTPException(status_code=404, detail=f"no document with id {shown!r}")
        return JSONResponse(document_payload(service, doc))

    writing = threading.Lock()  # one write of this server at a time (the writer lock is re-entrant in a process)

    @app.delete("/documents/{doc_id:path}", summary="Remove one document and serve the build without it")
    def delete_document(doc_id: str) -> JSONResponse:
        """Remove the document (by id, or an id merged into it) and publish the build without it.

        Writes need a key: a server started without ``--api-key`` refuses
        them (403), since anyone who can reach it could otherwise empty the
        collection. The change is one transaction (:func:`hiera.builds.remove_documents`):
        a refusal leaves the collection as it was. The service reloads before
        answering, so the next search never returns the removed document.
        """
        if not api_key:
            raise HTTPException(status_code=403, detail="writes need an API key: start the server with "
                                "`hiera serve DIR --api-key KEY` (or $HIERA_API_KEY) and send it")
        shown = doc_id if len(doc_id) <= 80 else doc_id[:77] + "..."
        store = service.col.store
        if not 0 < len(doc_id) <= MAX_DOC_ID_CHARS or store.canonical_id(doc_id) is None:
            raise HTTPException(status_code=404, detail=f"no document with id {shown!r}; nothing removed")
        if not writing.acquire(blocking=False):
            raise HTTPException(status_code=409, detail="the collection is busy: this server is already removing "
                                "documents; retry when that finishes")
        held = False

        def hold_searches() -> None:  # the new build is published; the commit comes next
            nonlocal held
            gate.hold()
            held = True

        try:
            report = remove_documents(service.root, [doc_id], log=log.info, device=placement.device, progress=False,
                                      before_commit=hold_searches)
            service.refresh(wait=True)  # searches resume on the build without the document
        except CollectionBusyError as e:
            raise HTTPException(status_code=409, detail=str(e)) from None
        except BadInputError as e:  # the last document, or removed by another writer since the look above
            status = 404 if store.canonical_id(doc_id) is None else 409
            raise HTTPException(status_code=status, detail=str(e)) from None
        finally:
            if held:
                gate.release()
            writing.release()
        log.info("removed %s (%d passages): now serving build %s", ", ".join(report.ids), report.passages,
                 service.col.build_dir.name)
        return JSONResponse({"removed": report.ids, "documents": report.documents, "passages": report.passages,
                             "generation": service.col.manifest.corpus_version})

    @app.get("/health", summary="Collection statistics, models and retrievers")
    def health() -> JSONResponse:
        service.refresh()
        return JSONResponse(service.health())

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(WEB_DIR / "index.html", media_type="text/html")

    if docs_assets:
        _api_pages(app)
        app.mount("/static/docs", StaticFiles(directory=docs_assets), name="docs-assets")
    app.mount("/static", StaticFiles(directory=WEB_DIR), name="static")
    return app


def _api_pages(app: FastAPI) -> None:
    """``/docs`` (Swagger UI) and ``/redoc`` on assets the package ships (fastapi-offline's copies), so both work
    with no network, as the search page does."""
    from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
    from fastapi.responses import HTMLResponse

    redirect = app.swagger_ui_oauth2_redirect_url or "/docs/oauth2-redirect"

    @app.get("/docs", include_in_schema=False)
    def swagger(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}", title=f"{app.title} API", oauth2_redirect_url=redirect,
            swagger_js_url=f"{root}/static/docs/swagger-ui-bundle.js",
            swagger_css_url=f"{root}/static/docs/swagger-ui.css", swagger_favicon_url=f"{root}/static/docs/favicon.png",
        )

    @app.get(redirect, include_in_schema=False)
    def swagger_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(
            openapi_url=f"{root}{app.openapi_url}", title=f"{app.title} API",
            redoc_js_url=f"{root}/static/docs/redoc.standalone.js", redoc_favicon_url=f"{root}/static/docs/favicon.png",
            with_google_fonts=False,
        )
