"""Fuzzing every corpus reader, every question loader and the CLI's query surface with mutated real files.

Seeds are small slices of the real benchmark files when ``../shared/data`` is
present (the gensim Wikipedia dump, SQuAD, BEIR SciFact, HotpotQA, QUEST,
WikiText-2, the DPR question files), otherwise hand-written files of the same
shape. Hypothesis mutates them (truncation anywhere, flipped bytes, invalid
UTF-8, NUL bytes, deep nesting, megabyte lines) and checks the invariant:

* a reader either yields records or raises a :class:`HieraError` whose
  message is one line; with ``--skip-bad`` its bad records are counted (one
  line each) — never another exception, never a hang (time-bounded);
* a failed ingest leaves the collection exactly as it was (store digest);
* a question loader returns questions or raises a one-line :class:`HieraError`.
"""

from __future__ import annotations

import bz2
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import fuzz
import helpers
import pytest
from hypothesis import given

from hiera.corpus.readers import FORMATS, get_reader
from hiera.corpus.store import CorpusStore
from hiera.errors import BadRecordError, HieraError

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("HIERA_DATA_DIR", REPO.parent / "shared" / "data"))
READ_LIMIT_S = 20.0  # per example; the huge-line mutations take a few seconds in the slowest readers


@pytest.fixture(scope="module", autouse=True)
def _report_counts() -> Iterator[None]:
    yield
    fuzz.write_counts()


# -- seeds ------------------------------------------------------------------------------------------------
def _head_lines(path: Path, n: int) -> bytes | None:
    if not path.is_file():
        return None
    with open(path, "rb") as fh:
        return b"".join(fh.readline() for _ in range(n))


def _jsonl(records: list[dict]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()


def _squad() -> bytes:
    real = DATA / "squad" / "dev-v1.1.first24.json"
    if real.is_file():
        article = json.loads(real.read_text(encoding="utf-8"))["data"][0]
        article["paragraphs"] = article["paragraphs"][:2]
        return json.dumps({"version": "1.1", "data": [article]}, ensure_ascii=False).encode()
    ctx = "Super Bowl 50 was an American football game. The Denver Broncos defeated the Carolina Panthers."
    qa = {"id": "q1", "question": "Who won Super Bowl 50?", "answers": [{"text": "Denver Broncos", "answer_start": 51}]}
    return json.dumps({"version": "1.1", "data": [{"title": "Super_Bowl_50", "paragraphs": [{"context": ctx, "qas": [qa]}]}]}).encode()


def _wiki_xml() -> bytes:
    try:
        from hiera.corpus.readers.wikipedia_xml import gensim_dump_path

        with bz2.open(gensim_dump_path(), "rb") as fh:
            head = fh.read(400_000)
        end = head.find(b"</page>", head.find(b"</page>") + 1)  # siteinfo and the first two pages
        if end > 0:
            return head[: end + len(b"</page>")] + b"\n</mediawiki>\n"
    except HieraError:
        pass
    return (
        b'<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/"><siteinfo><namespaces>'
        b'<namespace key="0" /><namespace key="14">Category</namespace></namespaces></siteinfo>'
        b"<page><title>Anarchism</title><ns>0</ns><id>12</id><revision><text>"
        b"'''Anarchism''' is a [[political philosophy]].{{Infobox|a=b}}&lt;ref&gt;x&lt;/ref&gt;\n\n"
        b"== History ==\nThe term comes from Greek.\n=== Early ===\n* a list\n[[Category:Politics]]"
        b"</text></revision></page>"
        b"<page><title>AA</title><ns>0</ns><id>13</id><redirect title=\"Anarchism\" /><revision><text>#REDIRECT [[Anarchism]]"
        b"</text></revision></page></mediawiki>\n"
    )


def _markdown() -> bytes:
    return (
        b"---\ntitle: notes\n---\n# Setup guide\n\nInstall the **package** with `pip`, see [docs](http://x).\n\n"
        b"## Configure\n\nEdit the _config_ file.\n\n```python\nprint('code')\n```\n\n### Deep\n\n> quoted text\n"
        b"- item one\n- item two\n\nSetext\n======\n\nMore text <!-- comment -->.\n"
    )


def _wikitext() -> bytes:
    real = DATA / "wikitext2" / "wiki.test.raw"
    if real.is_file():
        return real.read_bytes()[:6000]
    return (b" \n = Robert Boulter = \n \n Robert Boulter is an English film , television and theatre actor . \n"
            b" \n = = Career = = \n \n In 2000 Boulter had a guest @-@ starring role . \n \n = = = 2000 = = = \n"
            b" \n He appeared in 24 @,@ 000 films . \n")


def _docs(n: int = 2) -> list[dict]:
    return [d.to_dict() for d in helpers.make_docs()[:n]]


def reader_seeds() -> dict[str, tuple[str, bytes]]:
    """format -> (file name, bytes)."""
    plain = [{"id": d["id"], "title": d["title"], "text": "\n\n".join(d["lead"])} for d in _docs(3)]
    return {
        "jsonl": ("docs.jsonl", _head_lines(DATA / "hotpotqa" / "paragraph_pool.500q.jsonl", 4) or _jsonl(plain)),
        "hotpotqa-pool": ("pool.jsonl", _jsonl(plain)),
        "beir": ("corpus.jsonl", _head_lines(DATA / "beir" / "scifact" / "corpus.jsonl", 3)
                 or _jsonl([{"_id": p["id"], "title": "", "text": p["text"]} for p in plain])),
        "hiera-jsonl": ("docs.jsonl", _jsonl(_docs(2))),
        "quest-documents": ("documents.jsonl", _jsonl([{"title": p["title"], "text": p["text"]} for p in plain])),
        "squad": ("squad.json", _squad()),
        "ovos-summaries": ("summaries_en-us.json", json.dumps(
            {p["title"]: {"title": p["title"], "extract": p["text"], "description": "d", "topic": "t"} for p in plain}
        ).encode()),
        "markdown": ("notes.md", _markdown()),
        "wikitext": ("wiki.test.raw", _wikitext()),
        "wikipedia-xml": ("dump.xml", _wiki_xml()),
        "wikipedia-xml.bz2": ("dump.xml.bz2", bz2.compress(_wiki_xml())),
    }


SEEDS = reader_seeds()
READER_FORMATS = sorted(SEEDS)


def test_every_reader_format_is_fuzzed() -> None:
    assert set(FORMATS) <= {f.split(".")[0] for f in SEEDS}


def _reader(fmt: str) -> Callable:
    return get_reader(fmt.split(".")[0])


def _one_line(e: BaseException) -> str:
    text = str(e)
    assert text and "\n" not in text, repr(text[:300])
    return text


def _consume(fmt: str, path: Path, skip_bad: bool) -> int:
    """Records read; raises only HieraError (checked by the caller)."""
    bad: list[BadRecordError] = []
    on_bad = bad.append if skip_bad else fuzz_raise
    n = 0
    for _ in _reader(fmt)(path, on_bad):
        n += 1
    for err in bad:
        assert isinstance(err, BadRecordError)
        _one_line(err)
    return n


def fuzz_raise(err: BadRecordError) -> None:
    raise err


def _write(tmp: Path, fmt: str, data: bytes) -> Path:
    name = SEEDS[fmt][0]
    path = tmp / name
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("fmt", READER_FORMATS)
def test_seeds_read_cleanly(fmt: str, tmp_path: Path) -> None:
    """The unmutated seeds are valid: the mutations, not the seeds, make the bad input."""
    assert _consume(fmt, _write(tmp_path, fmt, SEEDS[fmt][1]), skip_bad=False) >= 1


@pytest.mark.parametrize("fmt", READER_FORMATS)
def test_reader_survives_mutations(fmt: str) -> None:
    @fuzz.fuzz_settings(30)
    @given(muts=fuzz.mutations)
    def run(muts: list) -> None:
        fuzz.count(f"test_reader_survives_mutations[{fmt}]")
        data = fuzz.mutate(SEEDS[fmt][1], muts)
        with tempfile.TemporaryDirectory() as tmp:
            path = _write(Path(tmp), fmt, data)
            for skip_bad in (False, True):
                try:
                    with fuzz.time_bound(READ_LIMIT_S, muts):
                        _consume(fmt, path, skip_bad)
                except HieraError as e:
                    _one_line(e)

    run()


# -- ingest: a failure changes nothing --------------------------------------------------------------
@pytest.fixture(scope="module")
def store_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fuzz-store") / "col"
    CorpusStore(root, create=True).ingest(helpers.make_docs())
    return root


@pytest.mark.parametrize("fmt", READER_FORMATS)
def test_failed_ingest_changes_nothing(fmt: str, store_template: Path) -> None:
    from hiera.corpus.ingest import ingest

    before = helpers.export_digest(store_template)

    @fuzz.fuzz_settings(10)
    @given(muts=fuzz.mutations, skip_bad=fuzz.st.booleans())
    def run(muts: list, skip_bad: bool) -> None:
        fuzz.count(f"test_failed_ingest_changes_nothing[{fmt}]")
        data = fuzz.mutate(SEEDS[fmt][1], muts)
        with tempfile.TemporaryDirectory() as tmp:
            root = shutil.copytree(store_template, Path(tmp) / "col")
            src = _write(Path(tmp), fmt, data)
            try:
                with fuzz.time_bound(READ_LIMIT_S * 2, muts):
                    ingest([src], fmt.split(".")[0], root, skip_bad=skip_bad, progress=False)
            except HieraError as e:
                _one_line(e)
                assert helpers.export_digest(root) == before
                assert CorpusStore(root).version == 1

    run()


# -- question loaders ---------------------------------------------------------------------------------
def question_seeds() -> dict[str, dict[str, bytes]]:
    """format -> {relative file name: bytes}; the first file is the one mutated (the others are kept valid)."""
    odqa = DATA / "odqa-questions"
    nq = _head_lines(odqa / "NQ-open.dev.jsonl", 3) or _jsonl([{"question": "who wrote hamlet", "answer": ["Shakespeare"]}])
    tsv = _head_lines(odqa / "topics.dpr.nq.test.txt", 3) or b"who wrote hamlet\t['Shakespeare']\n"
    curated = _head_lines(odqa / "topics.dpr.curated.test.txt", 3) or _jsonl(
        [{"question": "who wrote hamlet", "answer": ["Shake.*"]}])
    hot = DATA / "hotpotqa"
    pool = _jsonl([{"id": "hp0", "title": "Hamlet", "text": "Hamlet is a tragedy by Shakespeare."}])
    hq = _jsonl([{"question_id": "h1", "question_text": "Who wrote Hamlet?",
                  "answers_objects": [{"spans": ["Shakespeare"], "number": ""}],
                  "contexts": [{"title": "Hamlet", "paragraph_text": "Hamlet is a tragedy by Shakespeare.", "is_supporting": True}]}])
    quest = _head_lines(DATA / "quest-vital" / "dev.jsonl", 3) or _jsonl(
        [{"query": "birds of Kenya", "docs": ["Kori bustard"], "metadata": {"template": "_", "domain": "birds"}}])
    beir_q = _head_lines(DATA / "beir" / "scifact" / "queries.jsonl", 200)
    beir_qrels = (DATA / "beir" / "scifact" / "qrels" / "test.tsv")
    if beir_q and beir_qrels.is_file():
        lines = beir_qrels.read_bytes().splitlines(keepends=True)
        qids = {json.loads(x)["_id"] for x in beir_q.splitlines() if x.strip()}
        qrels = lines[0] + b"".join(ln for ln in lines[1:] if ln.split(b"\t")[0].decode() in qids)[:400]
        qrels = qrels[: qrels.rfind(b"\n") + 1]
    else:
        beir_q = _jsonl([{"_id": "1", "text": "what is a volcano"}])
        qrels = b"query-id\tcorpus-id\tscore\n1\tvolcanoes\t1\n"
    del hot
    return {
        "squad": {"q.json": _squad()},
        "nq-open": {"q.jsonl": nq},
        "dpr-jsonl": {"q.jsonl": nq},
        "curated": {"q.jsonl": curated},
        "dpr-tsv": {"q.tsv": tsv},
        "hotpotqa": {"q.jsonl": hq, "paragraph_pool.500q.jsonl": pool},
        "hotpotqa-pool": {"paragraph_pool.500q.jsonl": pool, "q.jsonl": hq},  # the pool mutated
        "quest": {"q.jsonl": quest},
        "beir": {"queries.jsonl": beir_q, "qrels/test.tsv": qrels},
        "beir-qrels": {"qrels/test.tsv": qrels, "queries.jsonl": beir_q},
    }


QSEEDS = question_seeds()


def _load_questions(fmt: str, files: dict[str, bytes], tmp: Path) -> list:
    from hiera.eval.questions import load_questions

    for name, data in files.items():
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_bytes(data)
    real = fmt.split("-")[0] if fmt in ("hotpotqa-pool", "beir-qrels") else fmt
    if real == "beir":
        return load_questions(tmp, "beir")
    return load_questions(tmp / "q.json" if real == "squad" else tmp / next(n for n in files if n.startswith("q.")), real)


def test_every_question_format_is_fuzzed() -> None:
    from hiera.eval.questions import QUESTION_FORMATS

    assert set(QUESTION_FORMATS) <= set(QSEEDS)


@pytest.mark.parametrize("fmt", sorted(QSEEDS))
def test_question_seeds_load(fmt: str, tmp_path: Path) -> None:
    assert len(_load_questions(fmt, QSEEDS[fmt], tmp_path)) >= 1


@pytest.mark.parametrize("fmt", sorted(QSEEDS))
def test_question_loader_survives_mutations(fmt: str) -> None:
    first = next(iter(QSEEDS[fmt]))

    @fuzz.fuzz_settings(30)
    @given(muts=fuzz.mutations)
    def run(muts: list) -> None:
        fuzz.count(f"test_question_loader_survives_mutations[{fmt}]")
        files = {**QSEEDS[fmt], first: fuzz.mutate(QSEEDS[fmt][first], muts)}
        with tempfile.TemporaryDirectory() as tmp:
            try:
                with fuzz.time_bound(READ_LIMIT_S, muts):
                    _load_questions(fmt, files, Path(tmp))
            except HieraError as e:
                _one_line(e)

    run()


# -- the CLI's query surface ----------------------------------------------------------------------------
_cli_text = fuzz.st.text(fuzz.st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=300)
_cli_value = fuzz.st.one_of(
    _cli_text, fuzz.st.integers(-(10**20), 10**20).map(str), fuzz.st.floats(allow_nan=True).map(str),
    fuzz.st.sampled_from(["", "nan", "inf", "-1", "0", "1e309", "true", "summary", "hybrid-max", "1_000"]),
)


def test_cli_search_arguments(bm25_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``hiera search`` with random queries, --k, --level, --set NAME=VALUE: results or a one-line error (exit 2)."""
    from hiera.cli import main
    from hiera.spec import all_params

    names = sorted({n for p in all_params().values() for n in (p.name, *p.aliases)}) + ["nope", "bm25.lam", ""]

    @fuzz.fuzz_settings(40)
    @given(
        query=_cli_text, k=_cli_value, level=fuzz.st.sampled_from(["passage", "doc"]),
        retriever=fuzz.st.sampled_from(["bm25", "bm25-doc", "bm25-dhr"]),
        sets=fuzz.st.lists(fuzz.st.tuples(fuzz.st.sampled_from(names), _cli_value), max_size=3),
    )
    def run(query: str, k: str, level: str, retriever: str, sets: list) -> None:
        fuzz.count("test_cli_search_arguments")
        argv = ["search", str(bm25_root), query, "-r", retriever, "--k", k, "--level", level, "--json"]
        for name, value in sets:
            argv += ["--set", f"{name}={value}"]
        try:
            with fuzz.time_bound(READ_LIMIT_S, argv):
                rc = main(argv)
        except SystemExit as e:  # argparse: a malformed option value (its usage line, then the error)
            assert e.code == 2
            capsys.readouterr()
            return
        out, err = capsys.readouterr()
        assert rc in (0, 2), (rc, err)
        if rc == 0:
            assert json.loads(out)["retriever"] == retriever
        else:
            lines = err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("hiera: error: "), err

    run()


# -- hostile inputs found by (or written after) the fuzzing: regression cases ---------------------------
_LAUGHS = ('<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol0 "lol">' + "".join(
    f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, 10)) + "]>"
    "<mediawiki><page><title>T</title><ns>0</ns><id>1</id><revision><text>&lol9;</text></revision></page></mediawiki>")
_XXE = ('<?xml version="1.0"?><!DOCTYPE m [<!ENTITY x SYSTEM "file:///etc/passwd">]><mediawiki><page><title>T'
        "</title><ns>0</ns><id>1</id><revision><text>a &x; b</text></revision></page></mediawiki>")
HOSTILE = [
    ("jsonl", b"[" * 100_000 + b"]" * 100_000 + b"\n"),  # json.loads raised RecursionError (fixed: hiera.io.loads_json)
    ("hiera-jsonl", b'{"a":' * 50_000 + b"1" + b"}" * 50_000 + b"\n"),
    ("beir", b'{"_id": "1", "text": ' + b"[" * 5000 + b"]" * 5000 + b"}\n"),
    ("squad", b'{"data": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
    ("ovos-summaries", b"[" * 100_000 + b"]" * 100_000),
    ("quest-documents", b"[" * 100_000 + b"\n"),
    # markdown regexes backtracked quadratically on these (fixed: linear patterns)
    ("markdown", b"# T\n\n" + b"[" * 200_000 + b"x" + b"]" * 10),
    ("markdown", b"# T\n\n" + b"*a " * 200_000),
    ("markdown", b"# T\n\n" + b"<a" * 200_000),
    ("markdown", b"# T\n\n" + b"<!--" * 200_000),
    ("markdown", b"# T\n\n" + b"`" * 200_000 + b"x"),
    ("markdown", b"# " + b" " * 500_000 + b"x\n\ntext\n"),
    ("markdown", b"# T\n\n" + b"![" * 200_000),
    ("markdown", b"# T\n\n" + b"<http:" * 200_000),
    ("markdown", b"# T\n\n" + b"_a " * 200_000),
    ("wikipedia-xml", _LAUGHS.encode()),  # entity expansion: refused by expat
    ("wikipedia-xml", _XXE.encode()),  # external entities are never fetched
    ("wikitext", b" = T = \n" + b" = = " * 200_000 + b"\n"),
]


@pytest.mark.parametrize(("fmt", "data"), HOSTILE, ids=[f"{f}-{i}" for i, (f, _) in enumerate(HOSTILE)])
def test_hostile_inputs(fmt: str, data: bytes, tmp_path: Path) -> None:
    path = _write(tmp_path, fmt, data)
    for skip_bad in (False, True):
        try:
            with fuzz.time_bound(10, fmt):
                _consume(fmt, path, skip_bad)
        except HieraError as e:
            assert "passwd" not in str(e) or "undefined entity" in str(e)
            _one_line(e)
