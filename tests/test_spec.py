"""The method registry: its invariants, parameter parsing, ``--set`` assignments and the JSON it publishes."""

from __future__ import annotations

import pytest

from hiera.errors import BadInputError
from hiera.score.docstage import stage
from hiera.spec import (
    DOC_STAGE_NEEDS,
    DOC_STAGES,
    METHODS,
    READERS,
    Param,
    all_params,
    method,
    methods_json,
    parse_assignments,
    resolve_doc_stage,
)


def test_every_method_loads_and_declares_what_its_class_serves() -> None:
    from hiera.retrieve.base import BaseRetriever

    for name, spec in METHODS.items():
        cls = spec.load()
        assert issubclass(cls, BaseRetriever) and cls.name == name
        assert spec.levels and set(spec.levels) <= {"passage", "doc"}
        assert set(spec.requires) <= {"bm25", "dense"}
        names = [p.name for p in spec.params]
        assert len(names) == len(set(names)), f"{name} declares a parameter twice"
        for p in spec.params:
            # a default of None means "unset" (sets' classifier and threshold): nothing to parse
            assert p.help and (p.default is None or p.parse(p.default) == p.default)


def test_set_parser_choices_are_the_parsers() -> None:
    from hiera.sets.parser import PARSERS
    from hiera.spec import SET_PARSERS

    assert set(SET_PARSERS) == set(PARSERS) and method("sets").param("parser").choices == SET_PARSERS


def test_one_name_means_one_type_and_bounds_everywhere() -> None:
    seen: dict[str, Param] = {}
    for spec in METHODS.values():
        for p in spec.params:
            first = seen.setdefault(p.name, p)
            assert (p.type, p.min, p.max, p.choices, p.aliases) == (first.type, first.min, first.max, first.choices, first.aliases), p.name
    aliases = [a for p in all_params().values() for a in p.aliases]
    assert len(aliases) == len(set(aliases)) and not set(aliases) & set(all_params())
    # the paper's "k1" is only an alias of DHR's document count, never BM25's saturation
    assert method("dhr").param("k1").name == "top_docs" and "k1" not in all_params()


def test_every_document_stage_has_one_class() -> None:
    """Each registered stage loads (``module:Class``) to a class of that name; the scorers module holds all but ``linked``."""
    for name in DOC_STAGE_NEEDS:
        s = stage(name)
        assert s.name == name and s.needs == DOC_STAGE_NEEDS[name]
        assert type(s).__module__ == ("hiera.retrieve.linking" if name == "linked" else "hiera.score.docstage")
        # the one table says where each runs: only a stage that is one dense index search runs on a torch device
        assert DOC_STAGES[name].backends == (("numpy", "torch") if name in ("summary", "mean") else ("numpy",))
        assert s.vectors <= {"qp", "qd"}
    assert type(stage("linked")).__module__ == "hiera.retrieve.linking"


@pytest.mark.parametrize(
    ("bm25", "dense", "expected"), [(True, True, "hybrid-max"), (True, False, "bm25-passage-max"), (False, True, "passage-max")]
)
def test_auto_document_stage_follows_the_build(bm25: bool, dense: bool, expected: str) -> None:
    assert resolve_doc_stage("auto", bm25, dense) == expected
    assert resolve_doc_stage(expected, bm25, dense) == expected


def test_a_stage_the_build_cannot_serve_is_refused() -> None:
    with pytest.raises(BadInputError, match="needs the dense index"):
        resolve_doc_stage("summary", True, False)
    with pytest.raises(BadInputError, match="unknown document stage"):
        resolve_doc_stage("abstracts", True, True)


@pytest.mark.parametrize(
    ("param", "raw", "value"),
    [
        ("lam", "1.5", 1.5),
        ("lam", 2, 2.0),
        ("top_docs", "20", 20),
        ("top_docs", 20.0, 20),
        ("doc_stage", " summary ", "summary"),
        ("doc_alpha", "0", 0.0),
    ],
)
def test_parse_converts_strings_and_numbers(param: str, raw: object, value: object) -> None:
    p = method("dhr").param(param)
    got = p.parse(raw)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize(
    ("param", "raw", "words"),
    [
        ("lam", "-0.1", "must be >= 0"),
        ("lam", "heavy", "must be a number in [0, 100]"),
        ("lam", "nan", "finite"),
        ("lam", True, "must be a number"),
        ("top_docs", "2.5", "must be an integer"),
        ("top_docs", 0, "must be >= 1"),
        ("doc_alpha", 1.01, "must be <= 1"),
        ("doc_stage", "nope", "must be one of auto, summary"),
    ],
)
def test_parse_refuses_with_one_line_naming_the_parameter(param: str, raw: object, words: str) -> None:
    with pytest.raises(BadInputError) as exc:
        method("dhr").param(param).parse(raw, "dhr")
    msg = str(exc.value)
    assert "\n" not in msg and f"parameter {param}=" in msg and words in msg


def test_bool_and_path_types() -> None:
    flag = Param("exact", "bool", False, "h")
    assert flag.parse("yes") is True and flag.parse("0") is False and flag.parse(True) is True
    with pytest.raises(BadInputError, match="true or false"):
        flag.parse("maybe")
    with pytest.raises(BadInputError, match="must not be empty"):
        Param("model", "path", "m", "h").parse("  ")
    with pytest.raises(BadInputError, match="finite"):
        Param("x", "float", 0.0, "h").parse("inf")


def test_endpoint_urls_are_urls_and_never_request_parameters() -> None:
    for name, param in (("sets", "parser_url"), ("linking", "decomposer_url")):
        p = method(name).param(param)
        assert p.type == "url" and not p.http
        assert p.parse(" https://host/v1 ") == "https://host/v1"
        assert p.parse("HTTP://Host:9/v1") == "HTTP://Host:9/v1"  # the scheme in any case, as urllib takes it
        for bad in ("/srv/parser", "http://", "ftp://host/v1"):
            with pytest.raises(BadInputError, match="must be an http"):
                p.parse(bad)


def test_assignments_apply_to_every_listed_method_that_has_the_parameter() -> None:
    out = parse_assignments(["lambda=0.5", "fusion=interp", "bm25-dhr.top_docs=7"], ["dhr", "hybrid", "bm25-dhr"])
    assert out == {"dhr": {"lam": 0.5}, "hybrid": {"fusion": "interp"}, "bm25-dhr": {"lam": 0.5, "top_docs": 7}}
    assert parse_assignments([], ["bm25"]) == {"bm25": {}}


@pytest.mark.parametrize(
    ("items", "names", "words"),
    [
        (["lam=1"], ["bm25", "dense"], "no parameter 'lam' in bm25, dense"),
        (["lam"], ["dhr"], "NAME=VALUE"),
        (["=1"], ["dhr"], "NAME=VALUE"),
        (["dense.lam=1"], ["dhr"], "'dense' is not one of the listed retrievers"),
        (["dhr.fusion=rrf"], ["dhr", "hybrid"], "--set dhr.fusion: no parameter 'fusion' in dhr (parameters: doc_alpha,"),
        (["bm25.lam=3"], ["bm25", "dhr"], "--set bm25.lam: no parameter 'lam' in bm25 (parameters: doc_depth)"),
        (["top_docs=0"], ["dhr"], "top_docs=0 must be >= 1"),
        (["lam=1"], ["colbert"], "unknown retriever 'colbert'"),
        (["lam=1", "lambda=2"], ["dhr"], "--set lam and --set lambda are the same parameter of dhr (lam)"),
        (["dhr.k1=5", "top_docs=7"], ["dhr", "bm25-dhr"], "--set k1 and --set top_docs are the same parameter of dhr"),
    ],
)
def test_bad_assignments_are_one_line_errors(items: list[str], names: list[str], words: str) -> None:
    with pytest.raises(BadInputError) as exc:
        parse_assignments(items, names)
    assert words in str(exc.value) and "\n" not in str(exc.value)


def test_methods_json_has_the_published_shape() -> None:
    data = methods_json({"dhr": {"lam": 0.25}})
    assert [m["name"] for m in data] == [*METHODS, *READERS]
    assert [m["kind"] for m in data] == ["retriever"] * len(METHODS) + ["reader"] * len(READERS)
    for m in data:
        assert {"name", "kind", "levels", "params", "requires"} <= set(m)
        for p in m["params"]:
            assert {"name", "type", "default", "help"} <= set(p)
    dhr = next(m for m in data if m["name"] == "dhr")
    params = {p["name"]: p for p in dhr["params"]}
    assert params["lam"]["default"] == 0.25 and params["lam"]["aliases"] == ["lambda"]
    assert params["doc_stage"]["choice_requires"]["hybrid-max"] == ["bm25", "dense"]


def test_reader_parameters_are_routed_to_the_reader() -> None:
    from hiera.spec import parse_reader_assignments

    retr, read = parse_reader_assignments(["lam=0.5", "max_answer_tokens=12", "reader.merge=sum"], ["dhr"])
    assert retr == {"dhr": {"lam": 0.5}}
    assert read == {"max_answer_tokens": 12, "merge": "sum"}
    with pytest.raises(BadInputError, match="max_answer_tokens"):
        parse_reader_assignments(["max_answer_tokens=0"], ["dhr"])
    with pytest.raises(BadInputError, match="--reader"):
        parse_reader_assignments(["reader=/tmp/x"], ["dhr"])
    with pytest.raises(BadInputError, match="no parameter 'nope'"):
        parse_reader_assignments(["nope=1"], ["dhr"])


def test_reader_and_method_parameters_never_share_a_name() -> None:
    method_names = set(all_params())
    for spec in READERS.values():
        assert spec.kind == "reader"
        assert not {p.name for p in spec.params} & method_names


def test_a_path_parameter_takes_a_pathlib_path_from_python() -> None:
    from pathlib import Path

    from hiera.spec import reader_spec

    assert reader_spec().check({"reader": Path("/models/rd")}) == {"reader": "/models/rd"}
    with pytest.raises(BadInputError, match="directory path"):
        reader_spec().check({"reader": 3})


def test_one_parameter_under_two_names_is_refused_and_one_name_twice_is_the_last() -> None:
    with pytest.raises(BadInputError, match="'lam' and 'lambda' are the same parameter of dhr"):
        method("dhr").check({"lam": 1, "lambda": 2})
    assert parse_assignments(["lam=1", "lam=2"], ["dhr"])["dhr"] == {"lam": 2.0}
    assert parse_assignments(["dhr.lam=1", "lam=3"], ["dhr"])["dhr"] == {"lam": 3.0}


def test_only_the_parameters_hiera_tune_fits_are_labelled_tunable() -> None:
    """`hiera methods` says "tunable" where `hiera tune` fits the value: dhr's (a shared λ elsewhere is not)."""
    labelled = {s.name: sorted(p.name for p in s.params if p.tunable) for s in METHODS.values()}
    assert {n: v for n, v in labelled.items() if v} == {"dhr": ["doc_alpha", "lam", "passage_alpha", "top_docs"]}
