"""A minimal OpenAI-compatible chat-completions client: one request, the reply's message text.

Two optional model components ask an endpoint for structured text: the
linking pipeline's decomposer (:mod:`hiera.link.endpoint`) and the set-query
parser (:mod:`hiera.sets.endpoint`). Both are off by default, both fall back
to their rules when the endpoint fails, and neither may import the other (the
feature rooms are independent), so the transport lives here, below both. The
standard library's ``urllib`` is the client: no extra dependency, and a
test's local fake server is all it needs. A URL is a server-side setting
(a request must not make the server call arbitrary addresses); callers check
it with :func:`hiera.spec.check_url`, the registry's check of every URL parameter.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from typing import Any

MAX_REPLY_BYTES = 1_000_000
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")


class ChatError(ValueError):
    """The endpoint's reply is unusable (the message says why)."""


def chat_url(url: str) -> str:
    """``…/chat/completions`` as given, else appended to the base URL (``http://host/v1`` → ``…/v1/chat/completions``)."""
    url = url.rstrip("/")
    return url if url.endswith("/chat/completions") else url + "/chat/completions"


def complete(url: str, body: dict[str, Any], timeout: float) -> str:
    """POST ``body`` to ``url`` and return ``choices[0].message.content``.

    Raises :class:`ChatError` for a reply that is not a chat completion (or is too
    large), and lets ``urllib``'s errors (``URLError``, ``HTTPError``) and
    ``TimeoutError``/``OSError`` through: :func:`failure` words any of them.
    """
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - http(s) only (spec.check_url)
        raw = resp.read(MAX_REPLY_BYTES + 1)
    if len(raw) > MAX_REPLY_BYTES:
        raise ChatError(f"the reply is larger than {MAX_REPLY_BYTES} bytes")
    try:
        content = json.loads(raw)["choices"][0]["message"]["content"]
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, IndexError, TypeError):
        raise ChatError("the reply is not a chat-completions response (choices[0].message.content)") from None
    if not isinstance(content, str):
        raise ChatError("the reply's message content is not text")
    return content


def reply_json(content: str) -> Any:
    """The JSON in a reply's message content (a fenced code block around it is accepted)."""
    try:
        return json.loads(_FENCE.sub("", content.strip()))
    except json.JSONDecodeError as e:
        raise ChatError(f"the reply is not JSON ({e.msg})") from None


FAILURES = (TimeoutError, urllib.error.URLError, OSError, ChatError)


def failure(e: BaseException) -> tuple[str, str]:
    """``(kind, reason)`` for a failed call: ``("timed out" | "failed", "HTTP 500 ..." | the error)``."""
    reason = f"HTTP {e.code} {e.reason}" if isinstance(e, urllib.error.HTTPError) else getattr(e, "reason", None) or e
    kind = "timed out" if isinstance(e, TimeoutError) or "timed out" in str(reason) else "failed"
    return kind, str(reason)
