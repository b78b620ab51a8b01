"""The JSON search API and the web page, as one FastAPI application.

Design choices:

* The :class:`~hiera.collection.Collection` and one instance of every
  retriever are created once, in :func:`create_app`; the slow loading (FAISS,
  BM25 matrices, encoder weights) happens in the lifespan start-up when
  ``warmup`` is on, so uvicorn only accepts connections once the first search
  will be as fast as the hundredth.
* Endpoints are plain ``def`` functions: FastAPI runs them in its thread pool,
  so searches overlap. The encoders and BM25 analyzers serialize their own
  thread-unsafe calls, the corpus store opens one SQLite connection per
  thread, and FAISS/numpy reads need no lock.
* Every error a user can cause is a 4xx with ``{"detail": "<one readable
  line>"}``: the web page shows ``detail`` as is, so it must be a sentence,
  never a stack trace or a pydantic error list.
* Request parameters are never turned into file paths: a document id is only
  a SQL parameter, and the only files served are the packaged web assets.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI, HTTPException, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from hiera import __version__
from hiera.collection import Collection
from hiera.corpus.tree import Document, Passage, Section
from hiera.errors import HieraError
from hiera.retrieve import RETRIEVERS, get_retriever
from hiera.retrieve.docstage import DOC_STAGES
from hiera.retrieve.hybrid import FUSIONS
from hiera.retrieve.protocol import MAX_QUERY_CHARS, Retriever

log = logging.getLogger("hiera.serve")

WEB_DIR = Path(__file__).resolve().parent / "web"
MAX_K = 1000  # stricter than the library's limit: one request must stay cheap
MAX_LINKS = 200
MAX_DOC_ID_CHARS = 1000
PROCESS_TIME_HEADER = "X-Process-Time-Ms"

# What each retriever needs built; a collection built with --no-dense (or
# --no-bm25) still serves the others.
_NEEDS: dict[str, tuple[str, ...]] = {
    "bm25": ("bm25",),
    "bm25-doc": ("bm25",),
    "bm25-dhr": ("bm25",),
    "dense": ("dense",),
    "dhr": ("dense",),
    "dhr-parallel": ("dense",),
    "hybrid": ("bm25", "dense"),
}


class Service:
    """What the app loads once: the collection, its retrievers and what they can serve."""

    def __init__(
        self, root: Path, reranker: Path | None = None, rerank_depth: int = 20, vectors: str = "float16"
    ) -> None:
        self.root = Path(root)
        self.col = Collection(self.root, vectors=vectors)
        self.reranker = None
        self.rerank_depth = rerank_depth
        if reranker is not None:
            from hiera.rerank import MAX_DEPTH, Reranker

            if not 1 <= rerank_depth <= MAX_DEPTH:
                raise HieraError(f"--rerank-depth must be in 1..{MAX_DEPTH}, got {rerank_depth}")
            self.reranker = Reranker(reranker)
        built = set()
        if self.col.manifest.bm25 is not None:
            built.add("bm25")
        if self.col.has_dense:
            built.add("dense")
        self.available = [n for n in RETRIEVERS if set(_NEEDS.get(n, ())) <= built]
        self.missing = {n: [x for x in _NEEDS.get(n, ()) if x not in built] for n in RETRIEVERS if n not in self.available}
        self.retrievers: dict[str, Retriever] = {n: get_retriever(n, self.col) for n in self.available}
        self.warm = False

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
            from hiera.rerank import RerankRetriever

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
            "warm": self.warm,
            "stats": self.col.store.stats(),
            "models": {level: {"name": info.get("name"), "fingerprint": str(info.get("fingerprint", ""))[:12]}
                       for level, info in m.models.items()},
            "retrievers": list(self.available),
            "defaults": dict(m.defaults),
            "retriever_params": {n: _jsonable(getattr(r, "defaults", {})) for n, r in self.retrievers.items()},
            "retriever_levels": {n: list(getattr(r, "levels", ("passage",))) for n, r in self.retrievers.items()},
            "doc_stages": list(DOC_STAGES),
            "reranker": None
            if self.reranker is None
            else {"name": self.reranker.name, "threshold": self.reranker.threshold, "depth": self.rerank_depth},
            "fusions": list(FUSIONS),
            "limits": {"k": MAX_K, "query_chars": MAX_QUERY_CHARS},
        }


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


def _finite(name: str, value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise _unprocessable(f"{name} must be a finite number, got {value!r}")
    return value


def create_app(
    root: Path,
    warmup: bool = True,
    reranker: Path | None = None,
    rerank_depth: int = 20,
    vectors: str = "float16",
) -> FastAPI:
    """The API for the collection at ``root``.

    The collection is opened here, not at the first request, so a wrong
    directory or a stale index fails at start-up with its own message
    (a :class:`HieraError`). ``warmup`` loads everything before serving.
    """
    service = Service(Path(root), reranker=reranker, rerank_depth=rerank_depth, vectors=vectors)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if warmup:
            service.warmup()
        log.info("serving %s: %d documents, retrievers %s", service.root, service.col.n_docs, ", ".join(service.available))
        yield

    app = FastAPI(
        title="hiera",
        version=__version__,
        description="Hierarchical retrieval over structured documents: search passages or documents, "
        "see why each hit ranks where it does, and browse a document's table of contents.",
        lifespan=lifespan,
    )
    app.state.service = service

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

    @app.get("/search", summary="Search the collection")
    def search(
        q: str = Query(..., description=f"the question, 1 to {MAX_QUERY_CHARS} characters"),
        k: int = Query(10, description=f"number of hits, 1 to {MAX_K}"),
        retriever: str = Query("dhr", description="retrieval method; /health lists the valid ones"),
        lam: float | None = Query(None, alias="lambda", description="DHR: weight of the document score"),
        k1: int | None = Query(None, description="DHR: documents kept by the document stage"),
        level: Literal["passage", "doc"] | None = Query(None, description="rank passages or documents"),
        doc_stage: str | None = Query(None, description="DHR: document-stage scorer"),
        fusion: str | None = Query(None, description="hybrid: rrf or interp"),
        alpha: float | None = Query(None, description="hybrid interp: weight of the dense score"),
        rerank: bool = Query(False, description="rescore the top hits with the server's cross-encoder"),
    ) -> JSONResponse:
        """Ranked hits with per-stage scores, a one-line reason each, and the timed trace.

        Parameters the chosen retriever does not take are ignored (and listed
        under ``ignored``): the web page sends its controls' values whatever
        the method, and that must not be an error.
        """
        if not q.strip():
            raise _unprocessable("the query is empty: type a question")
        if len(q) > MAX_QUERY_CHARS:
            raise _unprocessable(f"the query is {len(q)} characters long; the limit is {MAX_QUERY_CHARS}")
        if not 1 <= k <= MAX_K:
            raise _unprocessable(f"k must be between 1 and {MAX_K}, got {k}")
        r = service.retriever(retriever, rerank=rerank)
        given = {
            "lam": _finite("lambda", lam),
            "k1": k1,
            "doc_stage": doc_stage or None,
            "fusion": fusion or None,
            "alpha": _finite("alpha", alpha),
        }
        spec = getattr(r, "param_spec", {})
        params = {n: v for n, v in given.items() if v is not None and n in spec}
        ignored = sorted("lambda" if n == "lam" else n for n, v in given.items() if v is not None and n not in spec)
        t0 = time.perf_counter()
        res = r.search(q, k=k, level=level, **params)
        took = (time.perf_counter() - t0) * 1000.0
        body = res.to_dict()
        body["took_ms"] = round(took, 3)
        body["ignored"] = ignored
        return JSONResponse(body)

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
        return JSONResponse(service.health())

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(WEB_DIR / "index.html", media_type="text/html")

    app.mount("/static", StaticFiles(directory=WEB_DIR), name="static")
    return app
