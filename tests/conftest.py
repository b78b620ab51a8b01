"""Fixtures shared across the suite, each defined once here.

Where the read-only benchmark data lives; the session's collections, each
built once through :func:`helpers.build_collection` (the six hand-written
documents with dense and BM25, the same BM25 only, the page's five documents,
a QUEST sample, a tiny SQuAD sample); the models trained once for the tests
that need one (a cross-encoder, a reader). A test that changes a collection
takes a ``*_copy`` fixture.
"""

from __future__ import annotations

import os
from pathlib import Path

import helpers
import pytest

from hiera.builds import open_collection
from hiera.collection import Collection
from hiera.index.build import BuildOptions
from hiera.retrieve import Retriever, get_retriever

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """``$HIERA_DATA_DIR``, default ``<repo>/../shared/data``; skips the test when absent.

    The data is never copied into the repository, so a checkout without it
    must still pass its tests.
    """
    path = Path(os.environ.get("HIERA_DATA_DIR", REPO.parent / "shared" / "data")).resolve()
    if not path.is_dir():
        pytest.skip(f"benchmark data not found at {path} (set HIERA_DATA_DIR)")
    return path


def pytest_configure(config: pytest.Config) -> None:
    """No tqdm monitor thread: it wakes every 10 s to refresh bars of tests long finished (their captured streams
    closed), and an exception or warning it raises lands in whichever test is running then."""
    import tqdm

    tqdm.tqdm.monitor_interval = 0


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Report a failure even when pytest cannot render it: on CPython before 3.11.8 (gh-106905) ``ast.parse`` of a
    long source file can raise ``SystemError: AST constructor recursion depth mismatch`` when another thread parses
    at the same time, and pytest's long tracebacks parse every file of the failure. Retry with native tracebacks
    rather than end the whole run in an INTERNALERROR that hides which test failed and why."""
    try:
        return (yield)
    except SystemError as e:
        if "AST constructor recursion depth mismatch" not in str(e):
            raise
        style = item.config.option.tbstyle
        item.config.option.tbstyle = "native"
        try:
            return pytest.TestReport.from_item_and_call(item, call)
        finally:
            item.config.option.tbstyle = style


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``slow`` tests (real data at benchmark scale) run only with HIERA_SLOW=1 or ``-m slow``."""
    if os.environ.get("HIERA_SLOW") == "1" or "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow test: set HIERA_SLOW=1 (or make test-all) to run it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _hiera_cache(tmp_path_factory: pytest.TempPathFactory):
    """Keep every embedding-cache write of the test session in a temp dir, never in ~/.cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HIERA_CACHE_DIR", str(helpers.session_cache_dir(tmp_path_factory)))
        yield


@pytest.fixture(scope="session")
def shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The six-document collection built once per session: read it, never change it."""
    return helpers.shared_collection(tmp_path_factory)


@pytest.fixture(scope="session")
def col(shared_root: Path) -> Collection:
    """The shared collection, opened once (its readers only read it)."""
    return open_collection(shared_root)


@pytest.fixture(scope="session")
def fetchhr(col: Collection) -> Retriever:
    """``fetchhr`` on the shared collection: the retriever, and the source of model-free per-layer query vectors."""
    return get_retriever("fetchhr", col)


@pytest.fixture
def col_copy(shared_root: Path, tmp_path: Path) -> Path:
    """A private copy of the shared collection that a test may change."""
    return helpers.copy_collection(shared_root, tmp_path / "col")


@pytest.fixture(scope="session")
def bm25_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The six documents, BM25 only (no model): read it, never change it."""
    root = tmp_path_factory.mktemp("bm25") / "col"
    return helpers.build_collection(root, helpers.make_docs(), BuildOptions(dense=False, progress=False))


@pytest.fixture
def bm25_copy(bm25_root: Path, tmp_path: Path) -> Path:
    """A private copy of the BM25-only collection that a test may damage."""
    return helpers.copy_collection(bm25_root, tmp_path / "bm25")


@pytest.fixture(scope="session")
def ref(col: Collection) -> helpers.Reference:
    """What DHR computes, recomputed from the shared collection's store texts with the model itself."""
    return helpers.reference(col)


@pytest.fixture(scope="session")
def collection_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The served collection (:func:`helpers.make_page_docs`): the API, page and ``hiera serve`` tests share it."""
    return helpers.build_collection(tmp_path_factory.mktemp("collections") / "tiny", helpers.make_page_docs())


@pytest.fixture(scope="session")
def reranker_dir(shared_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cross-encoder trained for two steps on the shared collection (``hiera train-reranker``'s output)."""
    from hiera.train.args import RerankerArgs
    from hiera.train.reranker import train_reranker

    out = tmp_path_factory.mktemp("rerank") / "rr"
    train_reranker(shared_root, helpers.tiny_questions(), out, RerankerArgs(max_steps=2, batch_size=4, progress=False),
                   log=helpers.QUIET)
    return out


@pytest.fixture(scope="session")
def quest(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The QUEST sample (:func:`questdata.quest_collection`): its queries file, descriptions and built collection."""
    from questdata import quest_collection

    return quest_collection(data_dir, tmp_path_factory.mktemp("quest"))


@pytest.fixture(scope="session")
def quest_col(quest: dict) -> Collection:
    return open_collection(quest["root"])


@pytest.fixture(scope="session")
def squad_tiny(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A tiny real SQuAD collection, BM25 only: (collection root, questions file)."""
    from readdata import RULES, tiny_squad

    tmp = tmp_path_factory.mktemp("squad-tiny")
    qfile = tiny_squad(data_dir, tmp / "squad.json")
    root = helpers.build_collection(tmp / "col", files=[qfile], fmt="squad", rules=RULES,
                                    options=BuildOptions(dense=False, progress=False))
    return root, qfile


@pytest.fixture(scope="session")
def tiny_reader(squad_tiny: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A reader trained long enough to memorize its dozen training questions."""
    from readdata import RULES

    from hiera.eval.questions import load_squad
    from hiera.train.args import ReaderArgs
    from hiera.train.reader import train_reader

    root, qfile = squad_tiny
    out = tmp_path_factory.mktemp("reader") / "rd"
    args = ReaderArgs(max_steps=30, batch_size=4, learning_rate=5e-4, max_length=96, stride=32, warmup_ratio=0.0,
                      save_steps=1000, progress=False, seed=3)
    train_reader(root, load_squad(qfile, rules=RULES), out, args, log=helpers.QUIET)
    return out


@pytest.fixture(scope="session")
def squad_article(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One SQuAD dev article's first paragraphs as a collection (dense and BM25), and their first 24 questions."""
    from readdata import squad_article as write_article

    from hiera.eval.questions import load_questions

    tmp = tmp_path_factory.mktemp("squad-article")
    path = write_article(data_dir, tmp / "squad-small.json")
    root = helpers.build_collection(tmp / "col", files=[path], fmt="squad")
    col = open_collection(root)
    qs = load_questions(path, "squad", limit=24, rules=col.store.rules)
    return {"root": root, "questions": qs, "file": path, "col": col}
