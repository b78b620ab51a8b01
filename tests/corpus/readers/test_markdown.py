from __future__ import annotations

from pathlib import Path

import pytest

from hiera.corpus.readers import get_reader
from hiera.corpus.readers.markdown import read_markdown
from hiera.errors import BadInputError, BadRecordError

GUIDE = """---
title: Ignored front matter
tags: [a, b]
---

# Setup Guide

Welcome to the **guide**. See [the docs](https://example.org/docs)
for more, or `hiera --help`.

## Install

- run `pip install hiera`
- check the version

```bash
# this is code, not a heading
pip install hiera
```

### From source

Clone it ![logo](logo.png) first.

#### Tests

Run them.

## Configure

~~~
## not a section
~~~

Edit the file.

## Empty section
"""


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    (root / "guides").mkdir(parents=True)
    (root / ".hidden").mkdir()
    (root / "guides" / "setup.md").write_text(GUIDE, encoding="utf-8")
    (root / "b-plain.md").write_text("No heading here.\n\nSecond block.\n", encoding="utf-8")
    (root / "a-empty.md").write_text("# Only a title\n", encoding="utf-8")
    (root / ".hidden" / "skip.md").write_text("# Hidden\n\ntext\n", encoding="utf-8")
    (root / "notes.txt").write_text("not markdown", encoding="utf-8")
    return root


def test_folder(notes: Path):
    docs = list(read_markdown(notes))
    assert [d.id for d in docs] == ["b-plain", "guides/setup"]  # sorted; empty and hidden files skipped
    plain, guide = docs
    assert plain.title == "b-plain"
    assert plain.lead == ["No heading here.", "Second block."]
    assert guide.title == "Setup Guide"
    assert guide.lead == ["Welcome to the guide. See the docs for more, or hiera --help."]
    assert [(p, paras) for p, paras in guide.leaves()][1:] == [
        (("Install",), ["run pip install hiera check the version"]),
        (("Install", "From source"), ["Clone it first."]),
        (("Install", "From source", "Tests"), ["Run them."]),
        (("Configure",), ["Edit the file."]),
    ]
    assert [s.level for s in guide.sections] == [1, 1]
    assert guide.sections[0].children[0].children[0].level == 3
    assert guide.metadata == {"source": "markdown", "path": "guides/setup.md"}
    assert "Ignored" not in guide.text() and "code" not in guide.text()
    assert get_reader("markdown") is read_markdown


def test_single_file(notes: Path):
    (doc,) = read_markdown(notes / "guides" / "setup.md")
    assert doc.id == "setup" and doc.title == "Setup Guide"


def test_title_only_when_h1_opens_the_file(tmp_path: Path):
    path = tmp_path / "late.md"
    path.write_text("Intro text.\n\n# Late H1\n\nBody.\n\nSetext\n======\n\nMore.\n", encoding="utf-8")
    (doc,) = read_markdown(path)
    assert doc.title == "late"
    assert [(p, paras) for p, paras in doc.leaves()] == [
        ((), ["Intro text."]),
        (("Late H1",), ["Body."]),
        (("Setext",), ["More."]),
    ]


@pytest.mark.parametrize(("text", "title", "leaves"), [
    ("Setext Title\n============\n\nBody.\n\nSection Two\n-----------\n\nMore.\n", "Setext Title",
     [((), ["Body."]), (("Section Two",), ["More."])]),
    ("---\ntitle: \"From: front matter\"\ndate: 2020-01-01\n---\n\nBody.\n\n## Part\n\nMore.\n",
     "From: front matter", [((), ["Body."]), (("Part",), ["More."])]),
    ("---\ntitle: Same\n---\n# Same\n\nBody.\n", "Same", [((), ["Body."])]),  # the H1 repeats it
    ("---\ntitle: Front\n---\n# Other\n\nBody.\n", "Other", [((), ["Body."])]),  # the visible title wins
])
def test_a_setext_h1_or_front_matter_title_is_the_title(tmp_path: Path, text: str, title: str, leaves: list) -> None:
    path = tmp_path / "b.md"
    path.write_text(text, encoding="utf-8")
    (doc,) = read_markdown(path)
    assert doc.title == title and list(doc.leaves()) == leaves


def test_non_utf8_file_goes_to_on_bad(notes: Path, collect):
    bad = notes / "guides" / "latin.md"
    bad.write_bytes(b"# Caf\xe9\n\ntext\n")
    with pytest.raises(BadRecordError) as err:
        list(read_markdown(notes))
    assert err.value.path == str(bad) and err.value.location == "file"
    docs = list(read_markdown(notes, on_bad=collect))
    assert [d.id for d in docs] == ["b-plain", "guides/setup"]
    assert [(e.path, e.location) for e in collect.errors] == [(str(bad), "file")]
    with pytest.raises(BadInputError):  # a BadRecordError is a BadInputError
        list(read_markdown(bad))


def test_bad_input(tmp_path: Path):
    with pytest.raises(BadInputError, match="no such file"):
        list(read_markdown(tmp_path / "missing"))
    empty = tmp_path / "empty.md"
    empty.write_bytes(b"")
    with pytest.raises(BadInputError, match="empty"):
        list(read_markdown(empty))
    folder = tmp_path / "nothing"
    folder.mkdir()
    (folder / "x.txt").write_text("x")
    with pytest.raises(BadInputError, match=r"no \.md files"):
        list(read_markdown(folder))
