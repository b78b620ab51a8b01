"""The JSON search API and the web page, as one FastAPI application.

Design choices:

* The :class:`~hiera.collection.Collection` and one instance of every
  retriever are created once, in :func:`create_app`; the slow loading (FAISS,
  BM25 matrices, encoder weights) happens in the lifespan start-up when
  ``warmup`` is on, so uvicorn only accepts connections once the first search
  will be as fast as the hundredth.
* Searches run in a thread pool of their own (:class:`SearchPool`, with a
  deadline each); the other endpoints are plain ``def`` functions that FastAPI
  runs in its thread pool. Searches overlap: the encoders and BM25 analyzers serialize their own
  thread-unsafe calls, the corpus store opens one SQLite connection per
  thread, and FAISS/numpy reads need no lock.
* Every error a user can cause is a 4xx with ``{"detail": "<one readable
  line>"}``: the web page shows ``detail`` as is, so it must be a sentence,
  never a stack trace or a pydantic error list.
* Request parameters are never turned into file paths: a document id is only
  a SQL parameter, and the only files served are the packaged web assets.
* Hardened for being put behind a service (see :class:`Guard`): an optional
  API key on every data endpoint (``Authorization: Bearer KEY`` or
  ``X-API-Key``, compared in constant time; the page shell, its static assets
  and the OpenAPI docs stay public, they hold no collection data), a request
  body limit (413), CORS off unless one origin is allowed, and a time limit per
  search: a search runs in a bounded pool and answers 504 when it takes longer
  than ``search_timeout``, 503 when too many are already waiting, instead of
  holding connections open without bound.
* Method parameters are not written here: ``/search``'s query parameters, their
  OpenAPI schema and bounds, and ``/methods`` are generated from the registry in
  :mod:`hiera.spec`, so a new method appears on the API (and on the page, which
  builds its controls from ``/methods``) without touching this file.
"""

from __future__ import annotations

import asyncio
import hmac
import inspect
import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI, HTTPException, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from hiera.builds import open_collection
from hiera.collection import Collection
from hiera.corpus.tree import Document, Passage, Section
from hiera.errors import HieraError
from hiera.index.publish import live_build_dir
from hiera.retrieve import get_retriever
from hiera.retrieve.protocol import Retriever
from hiera.spec import MAX_K, MAX_QUERY_CHARS, METHODS, READERS, Param, all_params, reader_spec
from hiera.version import __version__

log = logging.getLogger("hiera.serve")

WEB_DIR = Path(__file__).resolve().parent / "web"
MAX_LINKS = 200
MAX_DOC_ID_CHARS = 1000
PROCESS_TIME_HEADER = "X-Process-Time-Ms"
API_KEY_ENV = "HIERA_API_KEY"
MAX_READ_K = 100  # passages one /answer reads: a reader pass costs ~30 ms a passage on a CPU
MAX_BODY_BYTES = 64 * 1024  # the API takes no request bodies; this only bounds what a client may send
SEARCH_TIMEOUT_S = 30.0
SEARCH_WORKERS = 8
MAX_PENDING_SEARCHES = 256  # searches running or queued before new ones get 503
# No collection data behind these: the page shell, its assets and the API description.
PUBLIC_PATHS = ("/", "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json", "/favicon.ico")
PUBLIC_PREFIXES = ("/static/",)


class Guard:
    """ASGI middleware: request body limit, then the API key; one-line JSON ``detail`` on refusal.

    A body announced larger than ``max_body`` is refused (413) before it is
    read; a body without a length (chunked) is read up to the limit and then
    refused. With ``api_key`` set, every path but :data:`PUBLIC_PATHS` needs
    ``Authorization: Bearer KEY`` or ``X-API-Key: KEY`` (401 otherwise).
    """

    def __init__(self, app: Any, api_key: str | None, max_body: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.key = api_key.encode() if api_key else None
        self.max_body = max_body

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: dict[bytes, bytes] = {}
        for k, v in scope.get("headers", []):
            headers.setdefault(k.lower(), v)
        length = headers.get(b"content-length")
        if length is not None:
            if not length.isdigit():
                await _refuse(send, 400, "the Content-Length header is not a number")
                return
            if int(length) > self.max_body:
                await _refuse(send, 413, f"the request body is {int(length)} bytes; the limit is {self.max_body}")
                return
        if self.key is not None and not _public(scope.get("path", "")) and not self._authorized(headers):
            await _refuse(send, 401, "an API key is required: send 'Authorization: Bearer KEY' or 'X-API-Key: KEY'",
                          [(b"www-authenticate", b'Bearer realm="hiera"')])
            return
        if length is None and b"chunked" in headers.get(b"transfer-encoding", b"").lower():
            body, more, messages = 0, True, []
            while more:
                msg = await receive()
                messages.append(msg)
                body += len(msg.get("body", b""))
                more = msg.get("more_body", False) and msg.get("type") == "http.request"
                if body > self.max_body:
                    await _refuse(send, 413, f"the request body is over the limit of {self.max_body} bytes")
                    return
            replay = iter(messages)

            async def receive_again() -> dict:
                return next(replay, {"type": "http.request", "body": b"", "more_body": False})

            await self.app(scope, receive_again, send)
            return
        await self.app(scope, receive, send)

    def _authorized(self, headers: dict[bytes, bytes]) -> bool:
        assert self.key is not None
        auth = headers.get(b"authorization", b"")
        given = auth[7:].strip() if auth[:7].lower() == b"bearer " else headers.get(b"x-api-key", b"").strip()
        return bool(given) and hmac.compare_digest(given, self.key)


def _public(path: str) -> bool:
    return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)


async def _refuse(send: Callable, status: int, detail: str, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
    log.info("refused %d: %s", status, detail)


class SearchPool:
    """Searches run here, each with a deadline: 504 past ``timeout``, 503 when ``max_pending`` are in the pool.

    A search past its deadline cannot be interrupted (FAISS and numpy do not
    check for cancellation); its thread finishes it and the result is dropped,
    and ``max_pending`` bounds how many such threads can pile up.
    """

    def __init__(self, timeout: float = SEARCH_TIMEOUT_S, workers: int = SEARCH_WORKERS,
                 max_pending: int = MAX_PENDING_SEARCHES) -> None:
        if not timeout > 0:
            raise HieraError(f"the search timeout must be positive, got {timeout}")
        self.timeout = timeout
        self.max_pending = max_pending
        self.workers = workers
        self.executor: ThreadPoolExecutor | None = None  # one per lifespan: an app may be served more than once
        self._pending = 0
        self._lock = threading.Lock()

    async def run(self, fn: Callable[[], Any]) -> Any:
        with self._lock:
            if self._pending >= self.max_pending:
                raise HTTPException(
                    status_code=503, detail=f"the server is busy ({self._pending} searches in progress); retry shortly",
                    headers={"Retry-After": "1"},
                )
            self._pending += 1
            if self.executor is None:
                self.executor = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="hiera-search")
            executor = self.executor
        fut = executor.submit(fn)
        fut.add_done_callback(lambda _: self._done())
        try:
            return await asyncio.wait_for(asyncio.wrap_future(fut), self.timeout)
        except TimeoutError:
            raise HTTPException(
                status_code=504,
                detail=f"the search took longer than {self.timeout:g} s and was abandoned; try a smaller k or top_docs",
            ) from None

    def _done(self) -> None:
        with self._lock:
            self._pending -= 1

    def shutdown(self) -> None:
        with self._lock:
            executor, self.executor = self.executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

class Service:
    """What the app loads once: the collection, its retrievers and what they can serve."""

    def __init__(
        self, root: Path, reranker: Path | None = None, rerank_depth: int = 20, vectors: str = "float16",
        opener: Callable[..., Collection] = open_collection, reader: Path | None = None,
    ) -> None:
        """``opener(root, vectors=…)`` opens the collection (Ray Serve's router passes one whose shards are remote).

        ``reader``: a reader directory (``hiera train-reader``) for ``/answer``; loaded before the collection,
        so a wrong directory fails at start-up.
        """
        self.root = Path(root)
        self.reader = None
        if reader is not None:
            from hiera.read.reader import Reader

            self.reader = Reader(reader)
        self.vectors = vectors
        self.opener = opener
        self.reranker = None
        self.rerank_depth = rerank_depth
        if reranker is not None:
            from hiera.crossencoder import MAX_DEPTH, Reranker

            if not 1 <= rerank_depth <= MAX_DEPTH:
                raise HieraError(f"--rerank-depth must be in 1..{MAX_DEPTH}, got {rerank_depth}")
            self.reranker = Reranker(reranker)
        self.warm = False
        self.limits: dict[str, Any] = {}  # the server's own limits, shown by /health
        self.stale: str | None = None  # why searches are refused until the next build, if they are
        self._reload_lock = threading.Lock()
        self._checked = time.monotonic()
        self._serve(self.opener(self.root, vectors=vectors))

    def _serve(self, col: Collection) -> None:
        """Serve ``col``: one retriever per method its build can serve (a reference swap, so requests see one build)."""
        built = col.built
        missing = {n: sorted(set(s.requires) - built) for n, s in METHODS.items()}
        available = [n for n in METHODS if not missing[n]]
        retrievers: dict[str, Retriever] = {n: get_retriever(n, col) for n in available}
        self.col, self.missing, self.available, self.retrievers = col, missing, available, retrievers

    def refresh(self, every: float = 1.0) -> None:
        """Pick up a build swapped in since the last look (``hiera build``/``add``), without a restart.

        At most one look a second: a readlink and the corpus version. The new
        build is opened and warmed while the old one keeps answering. If
        documents were ingested but not yet built, searches are refused with a
        message saying so until a build arrives (the old index no longer
        describes the corpus).
        """
        now = time.monotonic()
        if now - self._checked < every or not self._reload_lock.acquire(blocking=False):
            return
        try:
            self._checked = now
            live = live_build_dir(self.root)
            if live is not None and live != self.col.build_dir:
                try:
                    col = self.opener(self.root, vectors=self.vectors)
                except HieraError as e:
                    self.stale = f"the collection changed and its new index cannot be served ({e})"
                    log.warning("%s", self.stale)
                    return
                if self.warm:
                    col.warmup()
                self._serve(col)
                log.info("now serving build %s of %s", col.build_dir.name, self.root)
            version = self.col.store.version
            self.stale = None if version == self.col.manifest.corpus_version else (
                f"documents were ingested into {self.root.name} after its index was built; "
                f"searches resume once `hiera build {self.root}` finishes"
            )
        finally:
            self._reload_lock.release()

    def warmup(self) -> None:
        """Load every index and model and run one search per retriever (numba, BLAS, caches)."""
        t = time.perf_counter()
        self.col.warmup()
        for name, r in self.retrievers.items():
            try:
                r.search("warm up", k=1)
            except HieraError as e:  # e.g. a default doc stage whose index is missing
                log.warning("warm-up of %s failed: %s", name, e)
        self.warm = True
        log.info("warmed up %s in %.1f s", self.root, time.perf_counter() - t)

    def retriever(self, name: str, rerank: bool = False) -> Retriever:
        if rerank:
            if self.reranker is None:
                raise HieraError("this server was started without a reranker (hiera serve DIR --rerank MODEL)")
            from hiera.retrieve.rerank import RerankRetriever

            return RerankRetriever(self.retriever(name), self.reranker, depth=self.rerank_depth)
        if name in self.retrievers:
            return self.retrievers[name]
        valid = ", ".join(self.available)
        if name in self.missing:
            raise HieraError(
                f"retriever {name!r} needs the {' and '.join(self.missing[name])} index, which this collection "
                f"was built without; valid: {valid}"
            )
        raise HieraError(f"unknown retriever {name!r}; valid: {valid}")

    def health(self) -> dict[str, Any]:
        m = self.col.manifest
        return {
            "status": "ok",
            "version": __version__,
            "collection": self.root.name,
            "build": self.col.build_dir.name,
            "stale": self.stale,
            "warm": self.warm,
            "stats": self.col.store.stats(),
            "models": {level: {"name": info.get("name"), "fingerprint": str(info.get("fingerprint", ""))[:12],
                              "backend": m.backend(level)}
                       for level, info in m.models.items()},
            "retrievers": list(self.available),
            "search_device": self.col.search_device,
            "defaults": dict(m.defaults),
            "retriever_params": {n: _jsonable(r.defaults) for n, r in self.retrievers.items()},
            "retriever_levels": {n: list(METHODS[n].levels) for n in self.retrievers},
            "reranker": None
            if self.reranker is None
            else {"name": self.reranker.name, "threshold": self.reranker.threshold, "weight": self.reranker.weight,
                  "depth": self.rerank_depth},
            "reader": None if self.reader is None else {"name": self.reader.name, "params": _jsonable(self.reader.defaults)},
            "limits": {"k": MAX_K, "query_chars": MAX_QUERY_CHARS, **self.limits},
        }

    def methods(self) -> list[dict[str, Any]]:
        """The registry with this collection's effective defaults and what each method lacks here."""
        out = []
        for name, spec in METHODS.items():
            r = self.retrievers.get(name)
            defaults = r.defaults if r is not None else {**spec.defaults(), **self.col.method_defaults(name)}
            out.append({**spec.to_json(_jsonable(defaults)), "available": r is not None, "missing": self.missing[name]})
        for spec in READERS.values():  # kind "reader": /answer's parameters; missing when served without --reader
            defaults = self.reader.defaults if self.reader is not None else spec.defaults()
            out.append({**spec.to_json(_jsonable(defaults)), "available": self.reader is not None,
                        "missing": [] if self.reader is not None else ["reader"]})
        return out

    def answerer(self) -> Any:
        if self.reader is None:
            raise HieraError("this server was started without a reader (hiera serve DIR --reader DIR)")
        return self.reader


def _jsonable(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v if isinstance(v, str | int | float | bool) or v is None else str(v) for k, v in d.items()}


# -- documents ---------------------------------------------------------------
def _norm(text: str) -> str:
    return " ".join(text.split())


def document_payload(service: Service, doc: Document) -> dict[str, Any]:
    """The title tree with each section's passages, as the web page's side panel shows it.

    Passages are stored in the order the splitter walked the tree (pre-order,
    lead first), so they are handed out to sections in that same walk. A
    passage must also be text of its section: two sibling sections with the
    same title share a section path, and only the text tells them apart.
    """
    store = service.col.store
    queue: deque[Passage] = deque(p for _, p in store.iter_passages([doc.id]))

    def take(path: tuple[str, ...], paragraphs: Sequence[str]) -> list[dict[str, str]]:
        leaf = _norm(" ".join(paragraphs))
        out = []
        while queue and queue[0].section_path == path and _norm(queue[0].text) in leaf:
            p = queue.popleft()
            out.append({"id": p.id, "text": p.text})
        return out

    toc: list[dict[str, Any]] = []

    def walk(sections: list[Section], path: tuple[str, ...], depth: int) -> list[dict[str, Any]]:
        nodes = []
        for s in sections:
            p = (*path, s.title)
            toc.append({"depth": depth, "title": s.title, "path": list(p)})
            node: dict[str, Any] = {"title": s.title, "level": s.level, "path": list(p), "passages": take(p, s.paragraphs)}
            node["sections"] = walk(s.children, p, depth + 1)
            nodes.append(node)
        return nodes

    lead_passages = take((), doc.lead)
    sections = walk(doc.sections, (), 1)
    row = next(store.iter_docs([doc.id]), None)
    out: dict[str, Any] = {
        "id": doc.id,
        "title": doc.title,
        "summary": row.summary if row is not None else doc.summary(),
        "lead": list(doc.lead),
        "lead_passages": lead_passages,
        "toc": toc,
        "sections": sections,
        "categories": list(doc.categories),
        "links": list(doc.links[:MAX_LINKS]),
        "links_total": len(doc.links),
        "aliases": list(doc.aliases),
    }
    if queue:  # the tree and the stored passages disagree; show them rather than lose them
        out["other_passages"] = [{"id": p.id, "text": p.text, "section_path": list(p.section_path)} for p in queue]
    return out


# -- the application -----------------------------------------------------------
def _unprocessable(msg: str) -> HTTPException:
    return HTTPException(status_code=422, detail=msg)


def _validation_message(exc: RequestValidationError) -> str:
    """One line from pydantic's error list: ``k: Input should be a valid integer``."""
    parts = []
    for err in exc.errors():
        loc = [str(x) for x in err.get("loc", ()) if x not in ("query", "path", "body")]
        parts.append(f"{'.'.join(loc) or 'request'}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


_PY_TYPES: dict[str, type] = {"int": int, "float": float, "bool": bool, "str": str, "path": str}


def _query_parameter(
    p: Param, pyname: str, alias: str | None = None, users: Sequence[str] | None = None
) -> inspect.Parameter:
    """One query parameter for a registry parameter (bounds and choices in the schema); ``users``: who takes it."""
    if users is None:
        users = [n for n, s in METHODS.items() if any(x.name == p.name for x in s.params)]
    ann: Any = Literal[p.choices] if p.choices else _PY_TYPES[p.type]  # type: ignore[valid-type]
    q = Query(
        None,
        alias=alias or p.name,
        description=f"{p.help} ({', '.join(users)})" + ("" if alias is None else f"; alias of {p.name}"),
        ge=p.min,
        le=p.max,
        include_in_schema=alias is None,
    )
    return inspect.Parameter(pyname, inspect.Parameter.KEYWORD_ONLY, default=q, annotation=ann | None)


# registry parameters a request may not set (model directories): named so that sending one is a clear 422
SERVER_SIDE = frozenset(name for p in all_params().values() if not p.http for name in (p.name, *p.aliases))


def _request_parameters(k_max: int, k_means: str) -> list[inspect.Parameter]:
    """The request, the question, k and the retriever: what /search and /answer both take first."""
    kw = inspect.Parameter.KEYWORD_ONLY
    return [
        inspect.Parameter("request", kw, annotation=Request),
        inspect.Parameter("q", kw, annotation=str,
                          default=Query(..., description=f"the question, 1 to {MAX_QUERY_CHARS} characters")),
        inspect.Parameter("k", kw, annotation=int, default=Query(10, ge=1, le=k_max, description=f"{k_means}, 1 to {k_max}")),
        inspect.Parameter("retriever", kw, annotation=str,
                          default=Query("dhr", description="retrieval method; /methods lists them with their parameters")),
    ]


def _reader_parameters() -> tuple[list[inspect.Parameter], dict[str, str]]:
    """``/answer``'s reader parameters (the registry's readers), as :func:`_method_parameters` does for methods."""
    params, canonical = [], {}
    for spec in READERS.values():
        for p in spec.params:
            if not p.http:
                continue
            params.append(_query_parameter(p, f"r_{p.name}", users=[spec.name]))
            canonical[f"r_{p.name}"] = p.name
    return params, canonical


READER_SERVER_SIDE = frozenset(p.name for s in READERS.values() for p in s.params if not p.http)


def _method_parameters() -> tuple[list[inspect.Parameter], dict[str, str]]:
    """Query parameters for every registry parameter and alias; maps each Python name to the canonical one."""
    params, canonical = [], {}
    for p in all_params().values():
        if not p.http:  # server-side only (model directories): set with `hiera build --set`
            continue
        for i, name in enumerate((p.name, *p.aliases)):
            pyname = f"p_{name}"
            params.append(_query_parameter(p, pyname, None if i == 0 else name))
            canonical[pyname] = p.name
    return params, canonical


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
    service = Service(Path(root), reranker=reranker, rerank_depth=rerank_depth, vectors=vectors, opener=opener,
                      reader=reader)
    pool = SearchPool(search_timeout, max_pending=max_pending)
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

    app = FastAPI(
        title="hiera",
        version=__version__,
        description="Hierarchical retrieval over structured documents: search passages or documents, "
        "see why each hit ranks where it does, and browse a document's table of contents.",
        lifespan=lifespan,
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

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(status_code=422, content={"detail": _validation_message(exc)})

    method_params, canonical = _method_parameters()
    reader_params, reader_canonical = _reader_parameters()

    def checked_request(
        request: Request, q: str, retriever: str, rerank: bool, given: dict[str, Any]
    ) -> tuple[Retriever, dict[str, Any], list[str]]:
        """What /search and /answer check alike: the query, server-side names, staleness, the method's parameters."""
        if not q.strip():
            raise _unprocessable("the query is empty: type a question")
        if len(q) > MAX_QUERY_CHARS:
            raise _unprocessable(f"the query is {len(q)} characters long; the limit is {MAX_QUERY_CHARS}")
        refused = sorted(set(request.query_params) & SERVER_SIDE)
        if refused:
            raise _unprocessable(
                f"{', '.join(refused)}: a server-side setting (a directory), not a request parameter; "
                f"set it with `hiera build DIR --set METHOD.{refused[0]}=PATH` and restart or rebuild"
            )
        service.refresh()
        if service.stale:
            raise HTTPException(status_code=503, detail=service.stale)
        r = service.retriever(retriever, rerank=rerank)
        values = {canonical[n]: v for n, v in given.items() if v is not None and v != ""}
        params = {n: v for n, v in values.items() if r.spec.param(n) is not None}
        try:
            params = r.spec.check(params)
        except HieraError as e:
            raise _unprocessable(str(e)) from None
        return r, params, sorted(set(values) - set(params))

    async def respond(work: Callable[[], dict[str, Any]], ignored: list[str]) -> JSONResponse:
        """Run ``work`` in the search pool (its time limit, its queue bound); the body gets its time and what was ignored."""

        def timed() -> dict[str, Any]:
            t0 = time.perf_counter()
            body = work()
            body["took_ms"] = round((time.perf_counter() - t0) * 1000.0, 3)
            return body

        body = await pool.run(timed)
        body["ignored"] = ignored
        return JSONResponse(body)

    async def search(
        request: Request, q: str, k: int, retriever: str, level: Literal["passage", "doc"] | None, rerank: bool,
        **given: Any,
    ) -> JSONResponse:
        """Ranked hits with per-stage scores, a one-line reason each, and the timed trace.

        Parameters the chosen retriever does not take are ignored (and listed
        under ``ignored``): the web page sends its controls' values whatever
        the method, and that must not be an error.
        """
        r, params, ignored = checked_request(request, q, retriever, rerank, given)
        return await respond(lambda: r.search(q, k=k, level=level, **params).to_dict(), ignored)

    search.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            *_request_parameters(MAX_K, "number of hits"),
            inspect.Parameter("level", inspect.Parameter.KEYWORD_ONLY, annotation=Literal["passage", "doc"] | None,
                              default=Query(None, description="rank passages or documents (default: the method's first level)")),
            inspect.Parameter("rerank", inspect.Parameter.KEYWORD_ONLY, annotation=bool,
                              default=Query(False, description="rescore the top hits with the server's cross-encoder")),
            *method_params,
        ]
    )
    app.get("/search", summary="Search the collection")(search)

    async def answer(request: Request, q: str, k: int, retriever: str, rerank: bool, **given: Any) -> JSONResponse:
        """Retrieve ``k`` passages and read them: ranked answers, each with its passage, offsets and evidence.

        The same JSON as ``hiera answer --json``; ``start``/``end`` are
        character offsets of the answer in its passage's text.
        """
        refused = sorted(set(request.query_params) & READER_SERVER_SIDE)
        if refused:
            raise _unprocessable(f"{', '.join(refused)}: the reader is chosen when the server starts (--reader DIR)")
        reader = service.answerer()
        r, params, ignored = checked_request(
            request, q, retriever, rerank, {n: v for n, v in given.items() if n in canonical}
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

            res = r.search(q, k=k, level="passage", **params)
            sep = service.col.store.title_sep
            return read_results(reader, res, sep, **read).to_dict()

        return await respond(run, ignored)

    answer.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            *_request_parameters(MAX_READ_K, "passages retrieved and read"),
            inspect.Parameter("rerank", inspect.Parameter.KEYWORD_ONLY, annotation=bool,
                              default=Query(False, description="rerank before reading (the server's cross-encoder)")),
            *method_params,
            *reader_params,
        ]
    )
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
            store = service.col.store
            doc = store.get_document(doc_id)
            if doc is None:
                resolved = store.resolve_title(doc_id)
                doc = store.get_document(resolved) if resolved else None
        if doc is None:
            shown = doc_id if len(doc_id) <= 80 else doc_id[:77] + "..."
            raise HTTPException(status_code=404, detail=f"no document with id {shown!r}")
        return JSONResponse(document_payload(service, doc))

    @app.get("/health", summary="Collection statistics, models and retrievers")
    def health() -> JSONResponse:
        service.refresh()
        return JSONResponse(service.health())

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(WEB_DIR / "index.html", media_type="text/html")

    app.mount("/static", StaticFiles(directory=WEB_DIR), name="static")
    return app
