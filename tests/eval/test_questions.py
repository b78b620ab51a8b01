"""Question loaders on the real benchmark files and on small hand-written ones."""

from __future__ import annotations

import json
from pathlib import Path

import helpers
import pytest

from hiera.corpus.ingest import ingest
from hiera.corpus.readers.squad import read_squad
from hiera.corpus.split import split_document
from hiera.corpus.store import CorpusStore
from hiera.corpus.tree import Document, PassageRules
from hiera.errors import BadInputError, BadRecordError, UnknownFormatError
from hiera.eval.match import has_answer
from hiera.eval.questions import QUESTION_FORMATS, load_questions


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _jsonl(path: Path, rows: list[dict]) -> Path:
    return _write(path, "".join(json.dumps(r) + "\n" for r in rows))


# --- real files -------------------------------------------------------------------


class TestRealFiles:
    def test_squad_first24(self, data_dir: Path) -> None:
        path = data_dir / "squad" / "dev-v1.1.first24.json"
        qs = load_questions(path, "squad")
        raw = json.loads(path.read_text(encoding="utf-8"))["data"]
        assert len(qs) == len({q.id for q in qs}) == sum(len(p["qas"]) for a in raw for p in a["paragraphs"])
        q0 = qs[0]
        assert q0.id == "56be4db0acb8001400a502ec"
        assert q0.answers == ["Denver Broncos"]  # three identical annotations, deduplicated
        assert q0.gold_docs == {"Super_Bowl_50"}
        assert q0.gold_passages == {"Super_Bowl_50#0"}

        # gold passages are real corpus passage ids and (nearly always) hold the answer
        text: dict[str, str] = {}
        for doc in read_squad(path):
            assert isinstance(doc, Document)
            text.update((p.id, p.text) for p in split_document(doc))
        assert len(text) > sum(len(a["paragraphs"]) for a in raw)  # long paragraphs are split
        assert all(q.gold_passages and q.gold_passages <= set(text) for q in qs)
        missing = [q.id for q in qs if not any(has_answer(q.answers, text[p]) for p in q.gold_passages)]
        # Known, inherent: "four" is annotated inside "fourth" (token match fails), and one
        # answer is cut by a passage boundary after "Y." (abbreviation read as sentence end).
        assert sorted(missing) == ["56dfa1d34a1a83140091ebd4", "57264c42dd62a815002e80c9"]

    def test_nq_open(self, data_dir: Path) -> None:
        path = data_dir / "odqa-questions" / "NQ-open.dev.jsonl"
        qs = load_questions(path, "nq-open")
        assert len(qs) == helpers.nonblank_lines(path)
        assert qs[0].text == "when was the last time anyone was on the moon"
        assert qs[0].answers == ["14 December 1972 UTC", "December 1972"]
        assert [q.id for q in qs] == [str(i) for i in range(len(qs))]  # no ids in the file: line order
        eqa = data_dir / "odqa-questions" / "NQ-open.efficientqa.test.1.1.jsonl"
        assert len(load_questions(eqa, "nq-open")) == helpers.nonblank_lines(eqa)

    def test_dpr_tsv(self, data_dir: Path) -> None:
        path = data_dir / "odqa-questions" / "topics.dpr.nq.test.txt"
        qs = load_questions(path, "dpr-tsv")
        assert len(qs) == helpers.nonblank_lines(path)
        assert qs[0].text == "who got the first nobel prize in physics"
        assert qs[0].answers == ["Wilhelm Conrad Röntgen"]
        trivia = load_questions(
            data_dir / "odqa-questions" / "topics.dpr.trivia.test.txt", "dpr-tsv", limit=20
        )
        assert len(trivia) == 20
        # CSV quoting is undone once, as DPR's csv reader and Anserini's CSVParser do
        assert trivia[17].text.startswith('"How many different animal shapes')
        assert '""Animal Crackers""' in trivia[17].text

    def test_dpr_jsonl_and_curated(self, data_dir: Path) -> None:
        wq_path = data_dir / "odqa-questions" / "topics.dpr.wq.test.txt"
        wq = load_questions(wq_path, "dpr-jsonl")
        assert len(wq) == helpers.nonblank_lines(wq_path) and all(q.answer_mode == "string" for q in wq)
        cur_path = data_dir / "odqa-questions" / "topics.dpr.curated.test.txt"
        cur = load_questions(cur_path, "curated")
        assert len(cur) == helpers.nonblank_lines(cur_path)
        assert all(q.answer_mode == "regex" for q in cur)
        assert has_answer(cur[0].answers, "Denali rises 20,320 feet.", cur[0].answer_mode)

    def test_beir_scifact(self, data_dir: Path) -> None:
        qs = load_questions(data_dir / "beir" / "scifact", "beir")
        # one question per query the test qrels judge, with every judgement of it
        rows = [ln.split("\t") for ln in (data_dir / "beir" / "scifact" / "qrels" / "test.tsv").read_text().splitlines()[1:]]
        rows = [r for r in rows if len(r) == 3]
        assert sorted(q.id for q in qs) == sorted({r[0] for r in rows})
        assert sum(len(q.qrels) for q in qs) == len(rows)
        assert all(q.gold_docs == {d for d, r in q.qrels.items() if r > 0} and q.gold_docs for q in qs)
        assert qs[0].id == "1" and qs[0].qrels == {"31715818": 1}
        assert len(load_questions(data_dir / "beir" / "scifact", "beir", limit=5)) == 5
        with pytest.raises(BadInputError):
            load_questions(data_dir / "beir" / "scifact", "beir", split="train")  # no such qrels here

    def test_a_repeated_beir_query_id_is_refused(self, tmp_path: Path) -> None:
        (tmp_path / "qrels").mkdir()
        (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n1\td1\t1\n", encoding="utf-8")
        (tmp_path / "queries.jsonl").write_text('{"_id": "1", "text": "a"}\n{"_id": "1", "text": "b"}\n',
                                               encoding="utf-8")
        with pytest.raises(BadInputError, match="query id '1' is repeated"):
            load_questions(tmp_path, "beir")

    def test_a_beir_judgement_given_twice_must_agree(self, tmp_path: Path) -> None:
        (tmp_path / "qrels").mkdir()
        qrels = tmp_path / "qrels" / "test.tsv"
        (tmp_path / "queries.jsonl").write_text('{"_id": "1", "text": "a"}\n', encoding="utf-8")
        qrels.write_text("query-id\tcorpus-id\tscore\n1\td1\t1\n1\td2\t0\n1\td1\t1\n", encoding="utf-8")
        (q,) = load_questions(tmp_path, "beir")  # a repeated row that agrees changes nothing
        assert q.qrels == {"d1": 1, "d2": 0} and q.gold_docs == {"d1"}
        qrels.write_text("query-id\tcorpus-id\tscore\n1\td1\t1\n1\td2\t0\n1\td1\t0\n", encoding="utf-8")
        with pytest.raises(BadRecordError, match=r"line 4: query '1' judges 'd1' again, 0 after 1"):
            load_questions(tmp_path, "beir")

    def test_hotpotqa_gold_docs_are_pool_ids(self, data_dir: Path) -> None:
        qs = load_questions(data_dir / "hotpotqa" / "dev_subsampled.public250.jsonl", "hotpotqa")
        assert all(len(q.gold_docs) == 2 for q in qs)  # (one question per record: the zip below is strict)
        pool = {}
        with open(data_dir / "hotpotqa" / "paragraph_pool.500q.jsonl", encoding="utf-8") as fh:
            for line in fh:
                rec = json.loads(line)
                pool[rec["id"]] = (rec["title"], rec["text"])
        # every supporting paragraph maps to the pool record with the same title and text
        with open(data_dir / "hotpotqa" / "dev_subsampled.public250.jsonl", encoding="utf-8") as fh:
            raw = [json.loads(line) for line in fh]
        for q, rec in zip(qs, raw, strict=True):
            want = {(c["title"], c["paragraph_text"]) for c in rec["contexts"] if c["is_supporting"]}
            assert {pool[d] for d in q.gold_docs} == want
        assert qs[0].answers == ["Animorphs"]
        assert set(qs[0].metadata["supporting_titles"]) == {"Animorphs", "The Hork-Bajir Chronicles"}


# --- small files ------------------------------------------------------------------


def _squad_file(tmp_path: Path) -> Path:
    # 150 one-word sentences -> 2 passages (100 + 50); irregular whitespace must not shift offsets
    long_para = "".join(f"w{i}." + ("\n  " if i % 7 == 0 else " ") for i in range(150))
    answer_start = long_para.index("w120.")
    data = {
        "version": "1.1",
        "data": [
            {
                "title": "Test_Article",
                "paragraphs": [
                    {"context": "Short first paragraph about cats.", "qas": []},
                    {"context": "Second   paragraph,\n short.", "qas": []},
                    {
                        "context": long_para,
                        "qas": [
                            {
                                "id": "qa1",
                                "question": "Where is w120?",
                                "answers": [
                                    {"text": "w120.", "answer_start": answer_start},
                                    {"text": "w120.", "answer_start": answer_start},
                                ],
                            },
                            {
                                "id": "qa2",
                                "question": "What straddles?",
                                "answers": [{"text": "w99. w100.", "answer_start": long_para.index("w99.")}],
                            },
                            {"id": "qa3", "question": "Impossible?", "answers": [], "is_impossible": True},
                        ],
                    },
                ],
            }
        ],
    }
    return _write(tmp_path / "squad.json", json.dumps(data))


class TestSmallFiles:
    def test_squad_answer_offset_maps_to_split_passage(self, tmp_path: Path) -> None:
        qs = load_questions(_squad_file(tmp_path), "squad")
        assert [q.id for q in qs] == ["qa1", "qa2"]  # the SQuAD 2.0 impossible question is skipped
        # passages: #0, #1 the short paragraphs, #2 = w0..w99, #3 = w100..w149
        assert qs[0].gold_docs == {"Test_Article"}
        assert qs[0].gold_passages == {"Test_Article#3"}
        assert qs[0].answers == ["w120."]
        assert qs[0].metadata == {"title": "Test_Article", "paragraph": 2}
        assert qs[1].gold_passages == {"Test_Article#2", "Test_Article#3"}  # span crosses a boundary

    def test_squad_gold_passages_follow_the_collection_rules(self, tmp_path: Path) -> None:
        path = _squad_file(tmp_path)
        root = tmp_path / "col"
        ingest([path], "squad", root, rules=PassageRules(max_words=30), progress=False)
        store = CorpusStore(root)
        text = {p.id: p.text for _, p in store.iter_passages()}
        qs = load_questions(path, "squad", rules=store.rules)
        assert [sorted(q.gold_passages) for q in qs] == [["Test_Article#6"], ["Test_Article#5"]]
        for q in qs:
            assert q.gold_passages <= set(text)
            assert all(has_answer(q.answers, text[p]) for p in q.gold_passages)
        # the default 100-word split names passages of this collection that miss the answer
        stale = load_questions(path, "squad")
        assert not any(has_answer(stale[0].answers, text[p]) for p in stale[0].gold_passages)
        # rules belong to the collection: formats without passage ids accept and ignore them
        nq = _jsonl(tmp_path / "nq.jsonl", [{"question": "q?", "answer": ["a"]}])
        assert load_questions(nq, "nq-open", rules=store.rules)[0].answers == ["a"]

    def test_dpr_tsv_literal_eval_and_csv(self, tmp_path: Path) -> None:
        path = _write(
            tmp_path / "q.tsv",
            'who?\t[\'A\', \'B\', \'A\']\r\n"say ""hi"""\t"[\'x ""y""\']"\r\n\n',
        )
        qs = load_questions(path, "dpr-tsv")
        assert [(q.id, q.text, q.answers) for q in qs] == [
            ("0", "who?", ["A", "B"]),
            ("1", 'say "hi"', ['x "y"']),
        ]
        evil = _write(tmp_path / "evil.tsv", "q\t__import__('os').getcwd()\n")
        with pytest.raises(BadRecordError, match="line 1"):
            load_questions(evil, "dpr-tsv")
        one_field = _write(tmp_path / "one.tsv", "q\t['a']\nno tab here\n")
        with pytest.raises(BadRecordError, match="line 2: expected 2"):
            load_questions(one_field, "dpr-tsv")

    def test_quest(self, tmp_path: Path) -> None:
        path = _jsonl(
            tmp_path / "quest.jsonl",
            [
                {
                    "query": "Birds of Fiji that are not also birds of Samoa",
                    "docs": ["Fiji goshawk", "Fiji shrikebill"],
                    "original_query": "<mark>Birds of Fiji</mark> that are not <mark>Birds of Samoa</mark>",
                    "scores": None,
                    "metadata": {"template": "_ that are not _", "domain": "animals", "fluency": [1]},
                },
                {
                    "query": "1990s comedy films",
                    "docs": ["Clerks"],
                    "metadata": {"template": "_", "domain": "films"},
                },
            ],
        )
        qs = load_questions(path, "quest")
        assert [q.id for q in qs] == ["0", "1"]
        assert qs[0].gold_docs == {"Fiji goshawk", "Fiji shrikebill"}
        assert qs[0].metadata["template"] == "_ that are not _"
        assert qs[0].metadata["domain"] == "animals"
        assert qs[0].metadata["original_query"].startswith("<mark>")
        assert qs[1].metadata["original_query"] is None
        bad = _jsonl(tmp_path / "bad.jsonl", [{"query": "x", "docs": []}])
        with pytest.raises(BadRecordError, match="line 1"):
            load_questions(bad, "quest")

    def test_hotpotqa_paragraph_missing_from_pool(self, tmp_path: Path) -> None:
        ctx = [
            {"id": "0", "title": "A", "paragraph_text": "a text", "is_supporting": True},
            {"id": "1", "title": "B", "paragraph_text": "b  text", "is_supporting": True},
            {"id": "2", "title": "C", "paragraph_text": "c text", "is_supporting": False},
        ]
        q = {
            "question_id": "h1",
            "question_text": "?",
            "answers_objects": [{"spans": ["a"]}],
            "contexts": ctx,
        }
        path = _jsonl(tmp_path / "dev.jsonl", [q])
        pool = _jsonl(
            tmp_path / "pool.jsonl",
            [{"id": "hp0", "title": "A", "text": "a text"}, {"id": "hp1", "title": "B", "text": "b text"}],
        )
        qs = load_questions(path, "hotpotqa", pool=pool)
        assert qs[0].gold_docs == {"hp0", "hp1"}  # "b  text" found by normalized whitespace
        _jsonl(pool, [{"id": "hp0", "title": "A", "text": "a text"}])
        with pytest.raises(BadRecordError, match="'B' is not in the pool"):
            load_questions(path, "hotpotqa", pool=pool)
        with pytest.raises(BadInputError, match="paragraph pool"):
            load_questions(path, "hotpotqa")  # no default pool beside the file


class TestErrors:
    def test_unknown_format_lists_known(self, tmp_path: Path) -> None:
        with pytest.raises(UnknownFormatError) as exc:
            load_questions(tmp_path / "x", "trec-covid")
        for name in QUESTION_FORMATS:
            assert name in str(exc.value)

    @pytest.mark.parametrize("fmt", ["nq-open", "dpr-tsv", "curated", "squad", "quest", "hotpotqa"])
    def test_missing_empty_and_non_utf8(self, tmp_path: Path, fmt: str) -> None:
        with pytest.raises(BadInputError, match="no such file"):
            load_questions(tmp_path / "missing.jsonl", fmt)
        with pytest.raises(BadInputError, match="empty"):
            load_questions(_write(tmp_path / "empty.jsonl", ""), fmt)
        latin1 = tmp_path / "latin1.jsonl"
        latin1.write_bytes('{"question": "caf\xe9", "answer": ["x"]}\n'.encode("latin-1"))
        with pytest.raises(BadInputError, match="UTF-8"):
            load_questions(latin1, fmt, pool=latin1) if fmt == "hotpotqa" else load_questions(latin1, fmt)

    def test_malformed_json_line(self, tmp_path: Path) -> None:
        path = _write(tmp_path / "q.jsonl", '{"question": "q", "answer": ["a"]}\n{"question": \n')
        with pytest.raises(BadRecordError) as exc:
            load_questions(path, "nq-open")
        assert exc.value.location == "line 2" and exc.value.path == str(path)
        path2 = _jsonl(tmp_path / "q2.jsonl", [{"question": "q", "answer": "not a list"}, {"question": ""}])
        with pytest.raises(BadRecordError, match="line 2"):
            load_questions(path2, "dpr-jsonl")

    def test_squad_bad_json_and_bad_record(self, tmp_path: Path) -> None:
        with pytest.raises(BadInputError, match="not valid JSON"):
            load_questions(_write(tmp_path / "s.json", "{"), "squad")
        bad = {
            "data": [{"title": "T", "paragraphs": [{"context": "c", "qas": [{"id": "1", "question": "q"}]}]}]
        }
        empty_ctx = {"data": [{"title": "T", "paragraphs": [{"context": " ", "qas": []}]}]}
        with pytest.raises(BadRecordError, match="article 0"):  # as the squad corpus reader
            load_questions(_write(tmp_path / "s3.json", json.dumps(empty_ctx)), "squad")
        with pytest.raises(BadRecordError, match="article 0 paragraph 0 question 0"):
            load_questions(_write(tmp_path / "s2.json", json.dumps(bad)), "squad")

    def test_limit_and_options(self, tmp_path: Path) -> None:
        path = _jsonl(tmp_path / "q.jsonl", [{"question": f"q{i}", "answer": ["a"]} for i in range(5)])
        assert [q.id for q in load_questions(path, "nq-open", limit=2)] == ["0", "1"]
        with pytest.raises(BadInputError, match="limit"):
            load_questions(path, "nq-open", limit=0)
        with pytest.raises(BadInputError, match="does not take"):
            load_questions(path, "nq-open", split="dev")
