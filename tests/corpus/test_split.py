"""Properties of the passage splitter and of the document tree's derived texts."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from hiera.corpus.split import split_document, split_words
from hiera.corpus.tree import Document, Passage, PassageRules, Section

# Written independently of hiera.corpus.split: a token ends a sentence when it
# ends in . ! or ? possibly followed by closing quotes or brackets.
SENT_END = re.compile(r"[.!?][\"'”’)\]]*$")

settings.register_profile("hiera", deadline=None, max_examples=150)
settings.load_profile("hiera")

words = st.builds(
    lambda stem, end: stem + end,
    st.text(alphabet="abcdefghijklmnopqrstuvwxyzÄé", min_size=1, max_size=7),
    st.sampled_from(["", "", "", "", ",", ".", "!", "?", '."', ".)", "?’"]),
)
separators = st.sampled_from([" ", " ", " ", "  ", "\n", "\t", " \n\n ", "\u00a0"])


@st.composite
def texts(draw, max_tokens: int = 300) -> str:
    toks = draw(st.lists(words, max_size=max_tokens))
    seps = draw(st.lists(separators, min_size=len(toks) + 1, max_size=len(toks) + 1))
    return seps[0] + "".join(t + s for t, s in zip(toks, seps[1:], strict=True))


def first_sentence_len(tokens: list[str], start: int) -> int:
    """Length of the sentence beginning at ``tokens[start]``."""
    for i in range(start, len(tokens)):
        if SENT_END.search(tokens[i]):
            return i - start + 1
    return len(tokens) - start


# -- split_words ----------------------------------------------------------
@given(text=texts(), limit=st.integers(1, 150))
def test_split_words_properties(text: str, limit: int) -> None:
    blocks = split_words(text, limit)
    tokens = text.split()
    # nothing lost, nothing added, order kept (modulo whitespace)
    assert " ".join(blocks).split() == tokens
    assert (blocks == []) == (tokens == [])
    pos = 0
    for i, b in enumerate(blocks):
        bt = b.split()
        assert 1 <= len(bt) <= limit
        assert b == " ".join(bt)  # single spaces inside a block
        pos += len(bt)
        if i == len(blocks) - 1:
            continue
        # a block that is not full ends at a sentence end ...
        if len(bt) < limit:
            assert SENT_END.search(bt[-1]), (b, limit)
            # ... and only because the next whole sentence would not fit (greedy packing)
            assert len(bt) + first_sentence_len(tokens, pos) > limit, (b, limit)
        else:
            assert len(bt) == limit


@given(text=texts(max_tokens=60), limit=st.integers(1, 150))
def test_split_words_reads_only_the_words(text: str, limit: int) -> None:
    """Line breaks, tabs and runs of spaces are not boundaries: only words and sentence ends place a cut."""
    blocks = split_words(text, limit)
    assert split_words(" ".join(text.split()), limit) == blocks
    assert split_words("\n\n".join(text.split()), limit) == blocks
    # every block is already a packing of its own words: splitting it again changes nothing
    assert all(split_words(b, limit) == [b] for b in blocks)


def test_split_words_rejects_non_positive_limit() -> None:
    import pytest

    for bad in (0, -3):
        with pytest.raises(ValueError):
            split_words("a b c", bad)


def test_short_blocks_are_kept() -> None:
    assert split_words("Yes.", 100) == ["Yes."]
    assert split_words("  one  ", 100) == ["one"]
    assert split_words("", 100) == []
    assert split_words(" \n\t ", 100) == []


def test_single_long_sentence_is_cut_at_the_limit() -> None:
    tokens = [f"w{i}" for i in range(250)]
    blocks = split_words(" ".join(tokens) + ".", 100)
    assert [len(b.split()) for b in blocks] == [100, 100, 50]
    assert blocks[0] == " ".join(tokens[:100])
    assert blocks[1] == " ".join(tokens[100:200])
    assert blocks[2] == " ".join(tokens[200:]) + "."


def test_long_sentence_tail_is_packed_with_the_next_sentence() -> None:
    # 7-word sentence with limit 5: 5 + tail of 2, the tail takes the 2-word sentence after it
    text = "a b c d e f g. h i. j k l m n."
    assert split_words(text, 5) == ["a b c d e", "f g. h i.", "j k l m n."]


def test_sentence_end_breaks_are_preferred() -> None:
    text = "One two three four. Five six seven eight nine ten."
    # a cut at the limit would give "One two three four. Five six seven eight"
    assert split_words(text, 8) == ["One two three four.", "Five six seven eight nine ten."]
    # closing quotes and brackets still end the sentence
    quoted = 'He said "stop." Then (they left.) And the car turned around the corner slowly.'
    assert split_words(quoted, 5) == ['He said "stop."', "Then (they left.)", "And the car turned around", "the corner slowly."]
    assert split_words(quoted, 6) == ['He said "stop." Then (they left.)', "And the car turned around the", "corner slowly."]
    # two sentences that fit together stay together
    assert split_words("A b. C d. E f g h i j k.", 4) == ["A b. C d.", "E f g h", "i j k."]


# -- split_document -------------------------------------------------------
paragraphs = st.lists(st.one_of(texts(max_tokens=40), st.sampled_from(["", "   ", "\n"])), max_size=3)


@st.composite
def documents(draw) -> Document:
    counter = iter(range(10_000))

    def sections(depth: int) -> list[Section]:
        if depth > 3:
            return []
        out = []
        for _ in range(draw(st.integers(0, 3 if depth == 1 else 2))):
            out.append(
                Section(
                    title=f"S{next(counter)}",
                    level=depth,
                    paragraphs=draw(paragraphs),
                    children=sections(depth + 1),
                )
            )
        return out

    return Document(
        id=draw(st.sampled_from(["d1", "Doc 7", "x#y", "12"])),
        title=draw(st.sampled_from(["Title", "Mount Fuji", "Ä b"])),
        lead=draw(paragraphs),
        sections=sections(1),
        keep_paragraphs=draw(st.booleans()),
    )


def _boundaries(lengths: list[int]) -> set[int]:
    out, acc = set(), 0
    for n in lengths:
        acc += n
        out.add(acc)
    return out


@given(doc=documents(), limit=st.integers(1, 150))
def test_split_document_properties(doc: Document, limit: int) -> None:
    rules = PassageRules(max_words=limit)
    passages = split_document(doc, rules)

    # ids are {doc}#{order}, orders 0..n-1, provenance filled
    assert [p.id for p in passages] == [f"{doc.id}#{i}" for i in range(len(passages))]
    assert [p.order for p in passages] == list(range(len(passages)))
    assert all(p.doc_id == doc.id and p.doc_title == doc.title for p in passages)
    assert all(1 <= len(p.text.split()) <= limit for p in passages)

    # passages follow the leaves in pre-order, never spanning two of them
    leaves = [(path, paras) for path, paras in doc.leaves() if any(p.strip() for p in paras)]
    runs: list[tuple[str, ...]] = []
    for p in passages:
        if not runs or runs[-1] != p.section_path:
            runs.append(p.section_path)
    assert runs == [path for path, _ in leaves]
    for path, paras in leaves:
        mine = [p for p in passages if p.section_path == path]
        leaf_tokens = " ".join(paras).split()
        assert " ".join(p.text for p in mine).split() == leaf_tokens
        if doc.keep_paragraphs:
            # no passage crosses a paragraph boundary either
            para_bounds = _boundaries([len(x.split()) for x in paras]) - {0}
            assert para_bounds <= _boundaries([len(p.text.split()) for p in mine])

    # stable across runs and across a to_dict/from_dict round trip
    assert split_document(doc, rules) == passages
    assert split_document(Document.from_dict(doc.to_dict()), rules) == passages


def test_split_document_keeps_short_sections_and_skips_empty_ones() -> None:
    doc = Document(
        id="d",
        title="T",
        lead=["Tiny."],
        sections=[
            Section("Empty", paragraphs=["   "], children=[Section("Child", level=2, paragraphs=["Ok."])]),
            Section("Two", paragraphs=["a b", "c"]),
        ],
    )
    passages = split_document(doc)
    assert [(p.section_path, p.text) for p in passages] == [
        ((), "Tiny."),
        (("Empty", "Child"), "Ok."),
        (("Two",), "a b c"),
    ]
    assert [p.id for p in passages] == ["d#0", "d#1", "d#2"]


def test_keep_paragraphs_splits_each_paragraph_on_its_own() -> None:
    doc = Document(id="q", title="T", lead=["a b.", "c d."], keep_paragraphs=True)
    assert [p.text for p in split_document(doc)] == ["a b.", "c d."]
    doc.keep_paragraphs = False
    assert [p.text for p in split_document(doc)] == ["a b. c d."]


# -- summary / titled text ------------------------------------------------
def _tree_doc() -> Document:
    return Document(
        id="v",
        title="Volcano",
        lead=["A volcano is a rupture", "in the crust."],
        sections=[
            Section(
                "Types",
                children=[
                    Section("Shield", level=2, children=[Section("Hawaiian", level=3, paragraphs=["x"])]),
                    Section("Strato", level=2),
                ],
            ),
            Section("Eruptions", paragraphs=["y"]),
        ],
    )


def test_summary_is_title_lead_and_preorder_toc() -> None:
    doc = _tree_doc()
    assert doc.toc() == [(1, "Types"), (2, "Shield"), (3, "Hawaiian"), (2, "Strato"), (1, "Eruptions")]
    assert doc.section_count() == 5
    assert doc.summary() == "Volcano\nA volcano is a rupture in the crust.\nTypes; Shield; Hawaiian; Strato; Eruptions"
    # the lead is cut to lead_words words; the toc separator is configurable
    assert doc.summary(lead_words=3, toc_sep=" | ") == "Volcano\nA volcano is\nTypes | Shield | Hawaiian | Strato | Eruptions"
    assert Document(id="a", title="Only").summary() == "Only"
    assert Document(id="a", title="T", lead=["l"]).summary() == "T\nl"
    assert Document(id="a", title="T", sections=[Section("S")]).summary() == "T\nS"


def test_titled_text_puts_the_title_first() -> None:
    p = Passage(id="v#1", doc_id="v", order=1, section_path=("Types", "Shield"), text="Broad slopes.", doc_title="Volcano")
    assert p.title() == "Volcano, Types, Shield"
    assert p.titled_text() == "Volcano, Types, Shield\nBroad slopes."
    assert p.titled_text(" / ") == "Volcano / Types / Shield\nBroad slopes."
    assert p.breadcrumb() == "Volcano › Types › Shield"
    lead = Passage(id="v#0", doc_id="v", order=0, section_path=(), text="Lead.", doc_title="Volcano")
    assert lead.titled_text() == "Volcano\nLead."
    for q in split_document(_tree_doc()):
        assert q.titled_text().startswith(q.doc_title)
        assert q.titled_text().endswith("\n" + q.text)
