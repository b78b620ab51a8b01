"""The optional model decomposer: an OpenAI-compatible chat-completions endpoint writes the sub-facts.

As the paper's decomposer does, it asks for 5 sets of 3 short sentences that
would, together, support the answer (hypothetical facts, which need not be
true: they are queries for event linking). The reply's message content must
be JSON: ``{"sets": [["…", "…", "…"], …]}`` (a bare list of lists is
accepted, and a fenced code block around it).

It never fails a search: a refused connection, an HTTP error, a timeout or
a reply that is not that JSON falls back to the rules decomposer, and the
returned :class:`Decomposition` carries a warning saying what happened (the
trace shows it). Off by default; a URL is a server-side setting (a request
must not make the server call arbitrary addresses). The transport is
:mod:`hiera.chat` (shared with the set-query parser's endpoint).
"""

from __future__ import annotations

from typing import Any

from hiera.chat import (
    FAILURES,
    MAX_REPLY_BYTES,
    ChatError,
    chat_url,
    complete,
    failure,
    reply_json,
)
from hiera.errors import BadInputError
from hiera.link.decompose import Decomposer, Decomposition, get_decomposer
from hiera.link.nlp import SpacyModel
from hiera.spec import check_url

__all__ = ["MAX_REPLY_BYTES", "SETS", "EndpointDecomposer", "EndpointError", "chat_url", "parse_sets"]

SETS, SENTENCES = 5, 3
SYSTEM = (
    "You decompose multi-hop questions for a retrieval system. Reply with JSON only: "
    f'{{"sets": [[s1, s2, s3], ...]}} with exactly {SETS} sets of {SENTENCES} short declarative sentences each; '
    "each set states facts that together would answer the question, naming the entities involved."
)
EndpointError = ChatError  # the reply is unusable (the message says why)


def parse_sets(content: str) -> list[list[str]]:
    """The sentence sets of a reply's message content; :class:`EndpointError` when it is not the asked-for JSON."""
    data = reply_json(content)
    sets = data.get("sets") if isinstance(data, dict) else data
    if not isinstance(sets, list) or not sets:
        raise EndpointError('the reply has no "sets" list')
    out: list[list[str]] = []
    for group in sets[:SETS]:
        if isinstance(group, str):
            group = [group]
        if not isinstance(group, list) or not all(isinstance(s, str) for s in group):
            raise EndpointError("each set must be a list of sentences (strings)")
        kept = [" ".join(s.split()) for s in group[:SENTENCES] if s.strip()]
        if kept:
            out.append(kept)
    if not out:
        raise EndpointError("every set is empty")
    return out


class EndpointDecomposer:
    """Sentence sets from a chat-completions endpoint; the rules decomposer when it fails."""

    name = "endpoint"

    def __init__(self, url: str, fallback: Decomposer, timeout: float = 10.0, model: str = "default") -> None:
        self.url = chat_url(check_url(url, "decomposer_url"))
        self.fallback = fallback
        self.timeout = timeout
        self.model = model

    @classmethod
    def create(cls, nlp: SpacyModel, url: str | None = None, timeout: float = 10.0) -> EndpointDecomposer:
        """From the pipeline's settings; falls back to the rules decomposer over the same spaCy model."""
        if not url:
            raise BadInputError("decomposer=endpoint needs decomposer_url (an OpenAI-compatible chat-completions URL)")
        return cls(url, fallback=get_decomposer("rules", nlp), timeout=timeout)

    def request_body(self, question: str) -> dict[str, Any]:
        return {
            "model": self.model,
            "temperature": 0,
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}],
        }

    def _call(self, question: str) -> list[list[str]]:
        return parse_sets(complete(self.url, self.request_body(question), self.timeout))

    def decompose(self, question: str, doc: Any = None) -> Decomposition:
        try:
            sets = self._call(question)
        except FAILURES as e:
            kind, reason = failure(e)
            d = self.fallback.decompose(question, doc)
            d.warnings.append(f"decomposer endpoint {self.url} {kind} ({reason}); used the rules decomposer")
            return d
        return Decomposition("generated", sentences=sets, source="endpoint")
