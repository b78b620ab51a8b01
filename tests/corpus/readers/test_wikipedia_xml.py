from __future__ import annotations

import bz2
from pathlib import Path

import pytest

from hiera.corpus.readers import get_reader
from hiera.corpus.readers.base import Redirect
from hiera.corpus.readers.wikipedia_xml import read_wikipedia_xml
from hiera.corpus.split import split_document
from hiera.corpus.tree import Document
from hiera.errors import BadInputError, BadRecordError

LEFTOVERS = ("{{", "}}", "[[", "]]", "<ref", "{|", "|}", "'''", "''")


def texts(doc: Document) -> list[str]:
    return [doc.title, *(t for _, t in doc.toc()), *(p for _, paras in doc.leaves() for p in paras)]


# --- the real dump excerpt shipped in the gensim wheel ----------------------


def test_gensim_dump_yields_articles_and_redirects(gensim_docs, gensim_redirects):
    assert len(gensim_docs) >= 90
    assert len(gensim_redirects) >= 90  # 100 redirect pages, one of them outside ns 0
    assert len({d.id for d in gensim_docs}) == len(gensim_docs)
    assert all(d.id.isdigit() and d.metadata == {"source": "wikipedia-xml"} for d in gensim_docs)
    assert Redirect(alias="AccessibleComputing", target="Computer accessibility") in gensim_redirects


def test_gensim_dump_skips_redirects_disambiguation_and_other_namespaces(gensim_docs, gensim_redirects):
    titles = {d.title for d in gensim_docs}
    redirect_aliases = {r.alias for r in gensim_redirects}
    assert not titles & redirect_aliases
    assert not any(t.endswith("(disambiguation)") for t in titles)
    # {{disambiguation}}, {{Disambiguation|geo|hndis}} and {{geodis}} pages
    assert not titles & {"Alien", "Ada", "Aa River"}
    assert not any(":" in t and t.split(":")[0] == "Wikipedia" for t in titles | redirect_aliases)
    for doc in gensim_docs:
        assert not any("#REDIRECT" in p.upper() for p in doc.lead)


def test_gensim_dump_keeps_section_structure(gensim_docs):
    with_sections = [d for d in gensim_docs if d.sections]
    assert len(with_sections) >= 0.8 * len(gensim_docs)
    nested = [d for d in gensim_docs if any(s.children for s in d.sections)]
    assert len(nested) >= 30
    for doc in gensim_docs:
        for _, title in doc.toc():
            assert title.strip() and not title.startswith("=") and not title.endswith("=")
        # levels are tree depths, whatever heading levels the source skipped
        stack = [(0, s) for s in doc.sections]
        while stack:
            parent_level, s = stack.pop()
            assert s.level == parent_level + 1
            stack.extend((s.level, c) for c in s.children)


def test_anarchism_sections_in_source_order(gensim_docs):
    doc = next(d for d in gensim_docs if d.title == "Anarchism")
    assert doc.id == "12"
    top = [s.title for s in doc.sections]
    expected = [
        "Etymology and terminology",
        "History",
        "Anarchist schools of thought",
        "Internal issues and debates",
        "Topics of interest",
        "Criticisms",
    ]
    assert top == expected  # References / Further reading / External links are only lists
    history = doc.sections[1]
    assert [c.title for c in history.children][:3] == [
        "Origins",
        "First International and the Paris Commune",
        "Organised labour",
    ]
    schools = doc.sections[2]
    assert (
        "Anarchist schools of thought",
        "Classical anarchist schools of thought",
        "Social anarchism",
        "Anarcho-communism",
    ) in {p for p, _ in doc.leaves()}
    assert schools.children[0].children[0].title == "Mutualism"
    assert doc.lead[0].startswith(
        "Anarchism is a political philosophy that advocates self-governed societies"
    )


def test_anarchism_categories_and_links(gensim_docs):
    doc = next(d for d in gensim_docs if d.title == "Anarchism")
    assert doc.categories[:3] == ["Anarchism", "Political culture", "Political ideologies"]
    assert "Anti-capitalism" in doc.categories
    assert doc.links[:3] == ["Political philosophy", "Self-governance", "Stateless society"]
    assert len(doc.links) == len(set(doc.links)) > 300
    assert not any(link.startswith(("Category:", "File:", "Image:")) for link in doc.links)
    # display text, not targets, in the prose: [[self-governance|self-governed]]
    assert "self-governed societies" in doc.lead[0]
    assert "Category:" not in doc.text()


def test_gensim_dump_text_is_clean(gensim_docs):
    for doc in gensim_docs:
        for text in texts(doc):
            assert not any(s in text for s in LEFTOVERS), (doc.title, text[:200])
            assert "thumb|" not in text and "&nbsp;" not in text
            assert text == " ".join(text.split())


def test_gensim_passages_fit_the_word_limit(gensim_docs):
    passages = [p for d in gensim_docs for p in split_document(d)]
    assert len(passages) > 3000
    assert max(len(p.text.split()) for p in passages) <= 100
    assert sum(1 for p in passages if p.section_path) > 0.8 * len(passages)


def test_registry_finds_the_reader():
    assert get_reader("wikipedia-xml") is read_wikipedia_xml


# --- synthetic pages: the cleaning rules one by one -------------------------

PAGES = """<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" version="0.11">
  <siteinfo>
    <namespaces>
      <namespace key="0" />
      <namespace key="6">File</namespace>
      <namespace key="14">Category</namespace>
    </namespaces>
  </siteinfo>
  <page><title>Alpha</title><ns>0</ns><id>1</id><revision><id>9</id><text>{{Infobox thing|name=Alpha}}
'''Alpha''' is the ''first'' [[Greek alphabet|letter]] of the [[greek alphabet]].&lt;ref&gt;{{cite book|title=X}}&lt;/ref&gt; See [http://example.org the site] or http://bare.example.org.
&lt;!-- hidden comment --&gt;
[[File:Alpha.svg|thumb|A caption with [[Beta]]]]

Second paragraph.

== History ==
{| class="wikitable"
| cell || cell
|}
Early use.

=== Ancient ===
Very early use.

=== Empty ===
{{main|Somewhere}}

== See also ==
* [[Beta]]
* [[Gamma]]

== References ==
{{reflist}}

[[Category:Letters]]
[[Category:Greek|Alpha]]
[[de:Alpha]]</text></revision></page>
  <page><title>Talk:Alpha</title><ns>1</ns><id>2</id><revision><text>Talk page prose.</text></revision></page>
  <page><title>Alfa</title><ns>0</ns><id>3</id><revision><text>#REDIRECT [[Alpha#History]]</text></revision></page>
  <page><title>Alpha (disambiguation)</title><ns>0</ns><id>4</id><revision><text>'''Alpha''' may be: [[Alpha]]</text></revision></page>
  <page><title>Alphas</title><ns>0</ns><id>5</id><revision><text>'''Alphas''' may be:
* [[Alpha]]
{{Dab}}</text></revision></page>
  <page><title>Omega</title><ns>0</ns><id>6</id><redirect title="Alpha" /><revision><text>#REDIRECT [[Alpha]]</text></revision></page>
  <page><title>Beta</title><ns>0</ns><id>7</id><revision><text>'''Beta''' is a letter.{{disambiguation needed}}</text></revision></page>
</mediawiki>
"""


@pytest.fixture
def pages(tmp_path: Path) -> Path:
    path = tmp_path / "pages.xml"
    path.write_text(PAGES, encoding="utf-8")
    return path


def test_synthetic_pages(pages: Path):
    records = list(read_wikipedia_xml(pages))
    docs = [r for r in records if isinstance(r, Document)]
    assert [r for r in records if isinstance(r, Redirect)] == [
        Redirect(alias="Alfa", target="Alpha"),
        Redirect(alias="Omega", target="Alpha"),
    ]
    assert [d.title for d in docs] == ["Alpha", "Beta"]  # talk page and both disambiguation pages skipped
    alpha = docs[0]
    assert alpha.id == "1"
    assert alpha.lead == [
        "Alpha is the first letter of the greek alphabet. See the site or.",
        "Second paragraph.",
    ]
    assert [(p, paras) for p, paras in alpha.leaves()][1:] == [
        (("History",), ["Early use."]),
        (("History", "Ancient"), ["Very early use."]),
    ]
    assert alpha.categories == ["Letters", "Greek"]
    # deduplicated, file captions ignored; See also lists leave the text but still count as links
    assert alpha.links == ["Greek alphabet", "Beta", "Gamma"]
    assert docs[1].lead == ["Beta is a letter."]


def test_bz2_and_plain_give_the_same_records(pages: Path, tmp_path: Path):
    packed = tmp_path / "pages.xml.bz2"
    packed.write_bytes(bz2.compress(pages.read_bytes()))
    assert list(read_wikipedia_xml(packed)) == list(read_wikipedia_xml(pages))


# --- bad input ---------------------------------------------------------------


def test_missing_and_empty_files(tmp_path: Path):
    with pytest.raises(BadInputError, match="no such file"):
        list(read_wikipedia_xml(tmp_path / "nope.xml"))
    empty = tmp_path / "empty.xml"
    empty.write_bytes(b"")
    with pytest.raises(BadInputError, match="empty"):
        list(read_wikipedia_xml(empty))


def test_non_utf8_file(tmp_path: Path):
    path = tmp_path / "latin1.xml"
    path.write_bytes(PAGES.replace("Early use.", "Caf\u00e9").encode("latin-1"))
    with pytest.raises(BadInputError, match="corrupt") as err:
        list(read_wikipedia_xml(path))
    assert "\n" not in str(err.value)


def test_truncated_bz2_is_not_skippable(gensim_dump: Path, tmp_path: Path, collect):
    data = gensim_dump.read_bytes()
    cut = tmp_path / "cut.xml.bz2"
    cut.write_bytes(data[: int(len(data) * 0.4)])
    seen = 0
    with pytest.raises(BadInputError, match=r"truncated or corrupt .*\(after \d+ pages\)") as err:
        for _ in read_wikipedia_xml(cut, on_bad=collect):
            seen += 1
    assert str(err.value).startswith(str(cut))
    assert "\n" not in str(err.value)
    assert 0 < seen < 206
    assert not isinstance(err.value, BadRecordError)


def test_broken_xml(pages: Path, tmp_path: Path):
    broken = tmp_path / "broken.xml"
    broken.write_text(PAGES[: PAGES.index("<page><title>Omega")] + "<page><title>Om", encoding="utf-8")
    records = []
    with pytest.raises(BadInputError, match=r"after 5 pages"):
        for r in read_wikipedia_xml(broken):
            records.append(r)
    assert len(records) == 2  # Alpha and the Alfa redirect came out before the break


def test_unparsable_page_goes_to_on_bad(pages: Path, monkeypatch, collect):
    import hiera.corpus.readers.wikipedia_xml as wx

    real = wx.mwparserfromhell.parse

    def parse(text, **kw):
        if "Beta" in text and "letter." in text:
            raise RuntimeError("tokenizer exploded")
        return real(text, **kw)

    monkeypatch.setattr(wx.mwparserfromhell, "parse", parse)
    with pytest.raises(BadRecordError) as err:
        list(read_wikipedia_xml(pages))
    assert err.value.path == str(pages)
    assert err.value.location == "page 'Beta'"
    assert "tokenizer exploded" in str(err.value)

    docs = [r for r in read_wikipedia_xml(pages, on_bad=collect) if isinstance(r, Document)]
    assert [d.title for d in docs] == ["Alpha"]
    assert [e.location for e in collect.errors] == ["page 'Beta'"]


def test_page_without_id_goes_to_on_bad(tmp_path: Path, collect):
    path = tmp_path / "noid.xml"
    path.write_text(PAGES.replace("<id>7</id>", ""), encoding="utf-8")
    with pytest.raises(BadRecordError, match="page 7"):
        list(read_wikipedia_xml(path))
    assert [d.title for d in read_wikipedia_xml(path, on_bad=collect) if isinstance(d, Document)] == ["Alpha"]
    assert len(collect.errors) == 1
