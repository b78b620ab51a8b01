"""User-facing errors.

Every failure a user can cause (bad input, missing index, mismatched model)
raises a :class:`HieraError`. The CLI prints its message on one line and exits
non-zero without a traceback; the HTTP API maps it to a 4xx answer. Anything
else escaping is a bug in hiera.
"""

from __future__ import annotations


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
