"""User-facing errors.

Every failure a user can cause (bad input, missing index, mismatched model)
raises a :class:`HieraError`. The CLI prints its message on one line and exits
non-zero without a traceback; the HTTP API maps it to a 4xx answer. Anything
else escaping is a bug in hiera.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class HieraError(Exception):
    """Base class for errors caused by input, configuration or state."""


class BadInputError(HieraError):
    """A source file, record or query parameter cannot be used."""


class BadRecordError(BadInputError):
    """One record of a source is malformed; carries where it is."""

    def __init__(self, path: str, location: str, reason: str) -> None:
        self.path = str(path)
        self.location = location
        self.reason = reason
        super().__init__(f"{self.path}: {location}: {reason}")


class UnknownFormatError(BadInputError):
    """The requested reader format does not exist."""


class IndexMissingError(HieraError):
    """A collection, or one of its indexes, has not been built."""


class ManifestMismatchError(HieraError):
    """An index was built with other models, rules or files than requested."""


class CollectionChangedError(HieraError):
    """Rows a search found were removed from the store while it ran: another process committed a change.

    The search read an index built before the change and the store after it;
    it is refused rather than answered with rows that no longer exist (a
    server retries it once on the build of the new state).
    """


class StoreBusyError(HieraError):
    """The corpus store stayed locked by another process's write for the whole busy timeout.

    A write keeps its changes in memory until it commits, so readers wait
    only for a commit, or for a change too large for that memory; the
    server maps it to 503 (retry shortly).
    """


class ShardUnavailableError(HieraError):
    """A shard of a sharded build did not answer (its replica died, its node is gone, or it timed out).

    The search is refused rather than answered without that shard's part; the
    server maps it to 503 (retry shortly). ``shards``: the names of the shards
    that did not answer; ``reasons``: why, one line each.
    """

    def __init__(self, shards: list[str], reasons: list[str]) -> None:
        self.shards = list(shards)
        self.reasons = list(reasons)
        which = ", ".join(self.shards)
        why = "; ".join(dict.fromkeys(self.reasons))
        super().__init__(
            f"shard{'s' if len(self.shards) > 1 else ''} {which} of the sharded index did not answer ({why}); "
            "a result without it would be incomplete, so none is returned: retry shortly, or ask for partial "
            "results with partial=true"
        )


def exceptions_only(fn: Callable[[], Any]) -> Any:
    """``fn()``, with a failure that is not an ``Exception`` raised as one (``RuntimeError``).

    A Rust extension's panic (the tokenizers' ``PanicException``) is a ``BaseException``: it passes every
    ``except Exception`` a server has, so an HTTP request got a plain-text error page and an MCP server died.
    Interrupts and exits pass through unchanged.
    """
    try:
        return fn()
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except Exception:
        raise
    except BaseException as e:
        raise RuntimeError(f"{type(e).__name__}: {e}") from e
