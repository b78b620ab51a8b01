"""A reader trained on real SQuAD paragraphs: it answers, its files are checked, bad input is refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from readdata import RULES

from hiera.builds import open_collection
from hiera.errors import BadInputError, HieraError
from hiera.eval.questions import load_squad
from hiera.read.model import META_FILE
from hiera.read.pipeline import answer
from hiera.read.reader import Reader
from hiera.retrieve import get_retriever
from hiera.text import exact_match


@pytest.fixture(scope="module")
def reader(tiny_reader: Path) -> Reader:
    return Reader(tiny_reader)


def test_the_reader_answers_its_training_questions(reader: Reader, squad_tiny):
    root, qfile = squad_tiny
    col = open_collection(root)
    store = col.store
    questions = load_squad(qfile, rules=RULES)
    right = 0
    for q in questions:
        pid = sorted(q.gold_passages)[0]
        p = next(p for _, p in store.iter_passages([q.metadata["title"]]) if p.id == pid)
        answers = reader.read(q.text, [(p.title(), p.text)])
        assert answers, q.text
        best = answers[0]
        assert p.text[best.start : best.end] == best.text  # offsets point at the answer in the passage
        right += exact_match(best.text, q.answers)
    assert right >= len(questions) // 2, f"{right} of {len(questions)} exact"


def test_answer_reads_retrieved_passages_and_explains_itself(reader: Reader, squad_tiny):
    root, qfile = squad_tiny
    col = open_collection(root)
    q = load_squad(qfile, rules=RULES)[0]
    out = answer(get_retriever("bm25", col), reader, q.text, k=3, read_params={"answers": 3})
    d = out.to_dict()
    assert d["question"] == q.text and len(d["passages"]) == 3
    assert 1 <= len(d["answers"]) <= 3
    texts = {h["passage_id"]: h["text"] for h in d["passages"]}
    for a in d["answers"]:
        assert texts[a["passage_id"]][a["start"] : a["end"]] == a["text"]
        assert a["evidence"][0]["passage_id"] == a["passage_id"]
        assert a["breadcrumb"].startswith(a["doc_id"].split("#")[0][:3])
    assert [s["name"] for s in d["trace"]][-3:] == ["read", "decode", "answered-by"]
    assert d["trace"][-3]["detail"]["passages"] == 3
    json.dumps(d)  # the API returns it as is
    scores = [a["score"] for a in d["answers"]]
    assert scores == sorted(scores, reverse=True)
    # a stricter span limit changes what can be returned, through the registry's parameter
    short = answer(get_retriever("bm25", col), reader, q.text, k=3, read_params={"max_answer_tokens": 1})
    assert all(len(reader.tokenizer.tokenize(a["text"])) <= 2 for a in short.answers)


def test_bad_input_is_one_clear_error(reader: Reader, squad_tiny, tmp_path: Path):
    root, _ = squad_tiny
    col = open_collection(root)
    with pytest.raises(BadInputError, match="empty"):
        reader.read("   ", [("T", "text")])
    with pytest.raises(BadInputError, match="max_answer_tokens"):
        reader.read("q?", [("T", "some text")], max_answer_tokens=0)
    with pytest.raises(BadInputError, match="documents only"):
        answer(get_retriever("bm25-doc", col), reader, "who?", k=3)
    assert reader.read("q?", []) == []
    with pytest.raises(HieraError, match="not a reader directory"):
        Reader(tmp_path)
    with pytest.raises(HieraError, match="no such reader directory"):
        Reader(tmp_path / "missing")


@pytest.mark.parametrize("damaged", ["model.safetensors", "reader-heads.safetensors"])
def test_a_reader_with_truncated_weights_is_one_line(tiny_reader: Path, tmp_path: Path, damaged: str):
    from hiera.read.model import HEADS_FILE

    assert damaged in ("model.safetensors", HEADS_FILE)
    bad = tmp_path / "bad"
    shutil.copytree(tiny_reader, bad)
    with open(bad / damaged, "r+b") as fh:
        fh.truncate(100)
    with pytest.raises(HieraError, match="cannot (load|read) the reader's") as e:
        Reader(bad)
    assert "\n" not in str(e.value)


def test_a_reader_whose_parts_disagree_is_refused(tiny_reader: Path, tmp_path: Path):
    bad = tmp_path / "rd"
    shutil.copytree(tiny_reader, bad)
    meta = json.loads((bad / META_FILE).read_text())
    (bad / META_FILE).write_text(json.dumps({**meta, "tokenizer_size": meta["tokenizer_size"] + 7}))
    with pytest.raises(HieraError, match="tokenizer has .* tokens but the reader was trained with"):
        Reader(bad)
    (bad / META_FILE).write_text(json.dumps({**meta, "hidden_size": 768}))
    with pytest.raises(HieraError, match="does not match the reader's metadata"):
        Reader(bad)
    (bad / META_FILE).write_text(json.dumps({**meta, "format": "something-else"}))
    with pytest.raises(HieraError, match="not a hiera-reader/1 reader"):
        Reader(bad)


def test_training_metadata_records_the_run(tiny_reader: Path):
    meta = json.loads((tiny_reader / META_FILE).read_text())
    assert meta["train"]["steps"] == 30  # the fixture's max_steps
    assert meta["examples"]["groups"] > 0 and meta["examples"]["positives_gold"] > 0
    assert meta["args"]["seed"] == 3 and meta["peak_rss_mb"] > 0 and meta["seconds_total"] > 0
    # where it trained and how fast (on a GPU: "cuda", its mixed precision and the GPU's peak memory)
    assert meta["train"]["device"] == "cpu" and meta["train"]["mixed_precision"] == "none"
    assert meta["train"]["steps_per_second"] > 0 and meta["train"]["peak_rss_mb"] > 0
    assert "peak_gpu_mb" not in meta["train"]
    assert (tiny_reader / "model.safetensors").is_file() and not list(tiny_reader.glob("*.bin"))


def test_a_subset_of_a_reading_decodes_like_reading_it_alone(reader: Reader, squad_tiny):
    root, qfile = squad_tiny
    col = open_collection(root)
    q = load_squad(qfile, rules=RULES)[1]
    hits = get_retriever("bm25", col).search(q.text, k=5).hits
    pairs = [(h.title, h.text) for h in hits]
    union = reader.logits(q.text, pairs)
    for chosen in ([3, 0], [4], [1, 2, 0]):
        alone = reader.read(q.text, [pairs[i] for i in chosen])
        from_union = reader.decode(union.subset(chosen))
        assert [(a.text, a.passage, a.start) for a in from_union] == [(a.text, a.passage, a.start) for a in alone]
        assert [a.score for a in from_union] == pytest.approx([a.score for a in alone], abs=1e-4)


def test_many_questions_read_in_shared_batches_as_one_at_a_time(reader: Reader, squad_tiny):
    root, qfile = squad_tiny
    store = open_collection(root).store
    questions = load_squad(qfile, rules=RULES)[:3]
    passages = [(p.title(), p.text) for _, p in store.iter_passages()]
    items = [(q.text, passages[i : i + 3]) for i, q in enumerate(questions)] + [("who?", [])]
    many = reader.logits_many(items)
    assert len(many) == len(items) and len(many[-1].windows) == 0
    for (q, ps), lg in zip(items, many, strict=True):
        one = reader.logits(q, ps)
        assert lg.texts == one.texts
        assert np.array_equal(lg.windows.passage, one.windows.passage)
        real = one.windows.attention_mask.astype(bool)  # padding logits depend on the batch's longest window
        assert np.allclose(lg.start[real], one.start[real], atol=1e-3) and np.allclose(lg.select, one.select, atol=1e-3)
        assert [a.text for a in reader.decode(lg)] == [a.text for a in reader.decode(one)]
    # windows made once can be handed back (a benchmark judging several readers tokenizes once)
    again = reader.logits_many(items, [reader.windows(q, ps) for q, ps in items])
    assert all(np.array_equal(a.start, b.start) for a, b in zip(many, again, strict=True))
    with pytest.raises(BadInputError, match="windows for"):
        reader.logits_many(items, [])


def test_a_model_in_memory_reads_as_its_saved_directory(tiny_reader: Path):
    from hiera.read.model import load_reader_model

    model, tok, meta = load_reader_model(tiny_reader)
    mem = Reader.from_model(model, tok, {"max_length": meta["max_length"], "stride": meta["stride"]}, device="cpu")
    disk = Reader(tiny_reader, device="cpu")
    q, ps = "Where is it?", [("Notre Dame", "The university is in Notre Dame, Indiana, near South Bend.")]
    assert np.allclose(mem.logits(q, ps).start, disk.logits(q, ps).start, atol=1e-5)
    assert mem.name == "in-memory" and mem.params()["reader"] == "in-memory"


def test_reading_a_long_passage_gives_the_answers_of_reading_its_parts(reader: Reader):
    from hiera.read.features import passage_parts

    text = " ".join(f"In {1800 + i} the town of Place{i} built a bridge over the river." for i in range(30))
    extents = passage_parts(text, reader.params()["part_words"])
    assert len(extents) > 2
    q = "When did Place12 build a bridge?"
    whole = reader.read(q, [("Bridges", text)], answers=10)
    parts = reader.read(q, [("Bridges", text[s:e]) for s, e in extents], answers=10)
    assert [a.text for a in whole] == [a.text for a in parts]
    for a, b in zip(whole, parts, strict=True):
        assert a.score == pytest.approx(b.score, abs=1e-4)
        assert text[a.start : a.end] == a.text and a.start == b.start + extents[b.passage][0]
    # read whole in token windows instead, the passage is still read to its end
    windowed = reader.read(q, [("Bridges", text)], answers=10, part_words=0)
    assert windowed and all(text[a.start : a.end] == a.text for a in windowed)


def test_weights_interpolate_only_between_readers_of_one_network(tiny_reader: Path):
    """A reader mixed with one of another shape, or with a weight outside (0, 1], is refused in one line."""
    import torch

    from hiera.read.model import interpolate_weights, load_reader_model

    model, _, _ = load_reader_model(tiny_reader)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    interpolate_weights(model, tiny_reader, 0.5)  # with itself: every weight stays
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    for weight in (0.0, 1.5):
        with pytest.raises(HieraError, match=r"\(0, 1\]"):
            interpolate_weights(model, tiny_reader, weight)
    model.qa = torch.nn.Linear(model.qa.in_features, 3)
    with pytest.raises(HieraError, match="not the network"):
        interpolate_weights(model, tiny_reader, 0.5)


def test_a_question_longer_than_half_a_window_is_read_by_its_beginning(reader: Reader, squad_tiny):
    """A pasted paragraph as the question (under the 2,000-character query limit) used to panic the tokenizer
    ('stride' must be strictly less than max_len); the reader now reads its first tokens, up to half a window."""
    from hiera.read.features import fit_question, make_windows

    root, qfile = squad_tiny
    q = load_squad(qfile, rules=RULES)[0]
    store = open_collection(root).store
    p = next(p for _, p in store.iter_passages([q.metadata["title"]]) if p.id == sorted(q.gold_passages)[0])
    max_length, stride = reader.meta["max_length"], reader.meta["stride"]
    long_q = (q.text + " ") * 25
    assert len(long_q) < 2000 and len(reader.tokenizer.tokenize(long_q)) > max_length
    answers = reader.read(long_q, [(p.title(), p.text)])
    assert answers and p.text[answers[0].start : answers[0].end] == answers[0].text
    cut = fit_question(reader.tokenizer, long_q, max_length, stride)
    assert long_q.startswith(cut) and len(reader.tokenizer.tokenize(cut)) == min(max_length // 2, max_length - stride - 4)
    assert fit_question(reader.tokenizer, q.text, max_length, stride) == q.text  # short: unchanged
    windows = make_windows(reader.tokenizer, long_q, [(p.title(), p.text)], 40, 15)  # a tight window, as training
    assert windows.context.any(axis=1).all()  # every window reads some of the passage
