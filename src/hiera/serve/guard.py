"""The server's limits and the ASGI guard in front of every request.

Hardened for being put behind a service: an optional API key on every data
endpoint (``Authorization: Bearer KEY`` or ``X-API-Key``, compared in constant
time; the page shell, its static assets and the OpenAPI docs stay public, they
hold no collection data) and a request body limit (413). CORS (off unless one
origin is allowed) is set up by :func:`hiera.serve.api.create_app`, the time
limit per search by :class:`hiera.serve.pool.SearchPool`.

Every limit's default lives here, and this module imports no FastAPI:
``hiera serve``'s argument parser reads them when any ``hiera`` command starts.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger("hiera.serve")

API_KEY_ENV = "HIERA_API_KEY"
MAX_BODY_BYTES = 64 * 1024  # the API takes no request bodies; this only bounds what a client may send
SEARCH_TIMEOUT_S = 30.0
SHARD_TIMEOUT_S = 10.0  # --engine ray: longest wait for one shard call before a 503 (serve/ray.py)
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
