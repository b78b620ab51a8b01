"""Shared pieces of the fuzz tests: hypothesis profiles, input mutations, a time bound, example counts.

Profiles (``HIERA_FUZZ``): ``quick`` (the default suite: few examples,
derandomized so that a run is reproducible) and ``big`` (ten times more,
random; ``python -m bench.reliability --fuzz big`` or ``HIERA_FUZZ=big
pytest tests/test_fuzz_inputs.py tests/serve/test_fuzz_api.py``).
``HIERA_FUZZ_REPORT=FILE`` makes the tests record how many examples each ran.
"""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

PROFILE = os.environ.get("HIERA_FUZZ", "quick")
SCALE = {"quick": 1, "big": 10}.get(PROFILE, 1)

settings.register_profile(
    "hiera-fuzz",
    deadline=None,  # the time bound below is the per-example limit
    derandomize=PROFILE != "big",
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
    print_blob=True,
    # no shrinking: an example can take seconds (megabyte inputs), and the mutation list is readable as found
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)

COUNTS: Counter[str] = Counter()


def fuzz_settings(examples: int) -> settings:
    return settings(settings.get_profile("hiera-fuzz"), max_examples=examples * SCALE)


def count(name: str) -> None:
    COUNTS[name] += 1


def write_counts() -> None:
    path = os.environ.get("HIERA_FUZZ_REPORT")
    if not path:
        return
    p = Path(path)
    old = json.loads(p.read_text()) if p.exists() else {}
    old.update(COUNTS)
    p.write_text(json.dumps(old, indent=1, sort_keys=True))


class Hang(BaseException):
    """Raised by the time bound; a BaseException so that no reader's ``except Exception`` swallows it."""


@contextmanager
def time_bound(seconds: float, what: Any = None) -> Iterator[None]:
    """Fail an example that runs longer than ``seconds`` (checked between Python bytecodes).

    The hang is raised as a :class:`Hang` (which no reader can swallow) and
    reported as an ``AssertionError`` naming ``what``, which hypothesis shows.
    """

    def fire(signum: int, frame: Any) -> None:
        raise Hang(f"no answer within {seconds:g} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except Hang as e:
        where = f"{frame_info(e)}"
        raise AssertionError(f"{e} ({where}) for {what!r}"[:2000]) from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def frame_info(e: BaseException) -> str:
    tb = e.__traceback__
    last = None
    while tb is not None:
        if "/hiera/" in tb.tb_frame.f_code.co_filename:
            last = tb
        tb = tb.tb_next
    if last is None:
        return "?"
    return f"{Path(last.tb_frame.f_code.co_filename).name}:{last.tb_lineno} in {last.tb_frame.f_code.co_name}"


# -- mutations of a real file ----------------------------------------------------------------------
BAD_BYTES = [
    b"\xff", b"\xc3\x28", b"\x80\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",  # invalid UTF-8
    b"\x00", b"\x00" * 64, b"\xef\xbb\xbf",  # NUL bytes, a stray BOM
    b"\r", b"\n\n\n", b'"', b"{", b"}", b"[", b"<", b"\\", b"\\u0000", b"\\ud800", b"\t", b"#", b"=", b"|",
]


def nesting(kind: str, depth: int) -> bytes:
    if kind == "json":
        return b"[" * depth + b"]" * depth
    if kind == "json-obj":
        return b'{"a":' * depth + b"1" + b"}" * depth
    if kind == "xml":
        return b"<a>" * depth + b"</a>" * depth
    if kind == "wiki":
        return b"{{" * depth + b"[[" * depth + b"x" + b"]]" * depth + b"}}" * depth
    return b"> " * depth + b"- " * depth + b"x"  # markdown: nested quotes and lists


mutation = st.one_of(
    st.tuples(st.just("truncate"), st.floats(0, 1)),
    st.tuples(st.just("flip"), st.floats(0, 1), st.integers(1, 255)),
    st.tuples(st.just("insert"), st.floats(0, 1), st.sampled_from(BAD_BYTES)),
    st.tuples(st.just("nest"), st.floats(0, 1), st.sampled_from(["json", "json-obj", "xml", "wiki", "md"]),
              st.sampled_from([50, 5_000, 100_000])),
    # at a line start or as a JSON value: where a parser descends into it rather than failing before it
    st.tuples(st.just("nest-line"), st.floats(0, 1), st.sampled_from(["json", "json-obj", "xml", "wiki", "md"]),
              st.sampled_from([50, 5_000, 100_000])),
    st.tuples(st.just("nest-value"), st.floats(0, 1), st.sampled_from(["json", "json-obj"]),
              st.sampled_from([50, 5_000, 100_000])),
    st.tuples(st.just("huge"), st.floats(0, 1), st.sampled_from(["words", "blob", "lines"])),
    st.tuples(st.just("bytes"), st.floats(0, 1), st.binary(min_size=1, max_size=40)),
)
mutations = st.lists(mutation, min_size=1, max_size=3)


def mutate(data: bytes, muts: list[tuple]) -> bytes:
    for m in muts:
        at = min(len(data), int(m[1] * len(data)))
        kind = m[0]
        if kind == "truncate":
            data = data[:at]
        elif kind == "flip" and data:
            i = min(at, len(data) - 1)
            data = data[:i] + bytes([data[i] ^ m[2]]) + data[i + 1 :]
        elif kind == "insert":
            data = data[:at] + m[2] + data[at:]
        elif kind == "nest":
            data = data[:at] + nesting(m[2], m[3]) + data[at:]
        elif kind == "nest-line":
            start = data.rfind(b"\n", 0, at) + 1
            data = data[:start] + nesting(m[2], m[3]) + b"\n" + data[start:]
        elif kind == "nest-value":
            colon = data.find(b'": ', at)
            colon = colon if colon >= 0 else data.find(b'": ')
            if colon >= 0:
                end = colon + 3
                data = data[:end] + nesting(m[2], m[3]) + b", " + data[end:]
        elif kind == "huge":
            blob = {"words": b"lorem ipsum " * 150_000, "blob": b"x" * 2_000_000, "lines": b"a\n" * 50_000}[m[2]]
            data = data[:at] + blob + data[at:]
        elif kind == "bytes":
            data = data[:at] + m[2] + data[at:]
    return data
