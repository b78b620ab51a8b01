"""``linking`` on a small real HotpotQA sample: the full pipeline, its trace, its ablations and failures.

The collection is every context paragraph (supporting and distractor) of the
first public dev questions that are not yes/no questions, plus one redirect.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import helpers
import numpy as np
import pytest

from hiera.builds import open_collection
from hiera.cli import main
from hiera.collection import Collection
from hiera.corpus.readers.base import Redirect
from hiera.corpus.tree import Document
from hiera.errors import BadInputError
from hiera.link.pipeline import linker_for
from hiera.retrieve import get_retriever

N_QUESTIONS = 6
STEPS = ["encode-query", "mentions", "entity-linking", "event-linking", "decomposition", "decomposition-linking",
         "linked-documents", "coarse-filter", "rerank", "coverage", "answered-by"]
ALIAS = "Shirley Jane Temple"  # a redirect the sample does not contain


@pytest.fixture(scope="module")
def sample(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    questions, pool, seen = [], [], set()
    with (data_dir / "hotpotqa" / "dev_subsampled.public250.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            if {a.lower() for o in rec["answers_objects"] for a in o["spans"]} <= {"yes", "no"}:
                continue
            questions.append({"text": rec["question_text"],
                              "supporting": [c["title"] for c in rec["contexts"] if c["is_supporting"]]})
            for c in rec["contexts"]:
                if (c["title"], c["paragraph_text"]) not in seen:
                    seen.add((c["title"], c["paragraph_text"]))
                    pool.append({"id": f"p{len(pool)}", "title": c["title"], "text": c["paragraph_text"]})
            if len(questions) == N_QUESTIONS:
                break
    tmp = tmp_path_factory.mktemp("linking")
    src = tmp / "pool.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in pool), encoding="utf-8")
    root = helpers.build_collection(tmp / "col", [Redirect(ALIAS, pool[0]["title"])], files=[src], fmt="hotpotqa-pool")
    return root, questions


@pytest.fixture(scope="module")
def hotpot_col(sample: tuple[Path, list[dict]]) -> Collection:
    return open_collection(sample[0])


def step(res, name: str) -> dict:
    [s] = [s for s in res.trace if s.name == name]
    return s.detail


def test_full_pipeline_returns_a_complete_trace(hotpot_col: Collection, sample: tuple[Path, list[dict]]) -> None:
    questions = sample[1]
    results = get_retriever("linking", hotpot_col).batch_search([q["text"] for q in questions], k=10)
    both = 0
    for q, res in zip(questions, results, strict=True):
        assert [s.name for s in res.trace] == STEPS
        for m in step(res, "mentions")["mentions"]:
            a, b = m["span"]
            assert q["text"][a:b] == m["text"]
        linked = step(res, "linked-documents")
        assert linked["documents"] == len(linked["linked"]) > 0
        for entry in linked["linked"]:
            assert entry["sources"] and {s["source"] for s in entry["sources"]} <= {"entity", "event", "decomposition", "bridge"}
        titles = {e["title"] for e in linked["linked"]}
        both += set(q["supporting"]) <= titles
        bridged = {e["title"] for e in linked["linked"] if any(s["source"] == "bridge" for s in e["sources"])}
        named = {e["title"] for e in step(res, "decomposition-linking")["named_in_first_hop"]}
        assert named <= titles and bridged >= named  # documents named in the first hop are linked as bridges
        coarse = step(res, "coarse-filter")
        assert coarse["documents"] == linked["documents"] and coarse["kept"] == min(coarse["passages"], 200)
        assert step(res, "rerank")["model"] is None and "no reranker" in step(res, "rerank")["note"]
        # hits come from linked documents only, in the coarse order but for the coverage moves, each saying why
        assert res.hits and all(h.title in titles for h in res)
        cov = step(res, "coverage")
        ids = [h.passage_id for h in res]
        moved = [m["passage_id"] for m in cov["moves"]]
        for i, m in enumerate(cov["moves"]):
            assert m["from_rank"] > m["to_rank"] and m["why"] in ("bridge hop", "sub-question")
            if m["why"] == "bridge hop":
                assert m["title"] in bridged and m["to_rank"] == 2
            else:
                assert m["text"] in step(res, "decomposition-linking")["per_text"]
            if m["passage_id"] in ids:  # later moves insert above it, one rank each at most
                assert ids.index(m["passage_id"]) + 1 <= m["to_rank"] + len(cov["moves"]) - i - 1
        ranks = [h.stages["coarse"].rank for h in res if h.passage_id not in moved]
        assert ranks == sorted(ranks)
        assert len(cov["moves"]) + len(cov["notes"]) >= 1  # every slot says what it did
        assert [h.score for h in res] == sorted((h.score for h in res), reverse=True)
        assert all(h.stages["link"].rank >= 1 for h in res)
    assert both >= N_QUESTIONS - 2, both


def test_link_weight_and_coverage(hotpot_col: Collection, sample: tuple[Path, list[dict]]) -> None:
    r = get_retriever("linking", hotpot_col)
    position = {p.id: i for i, p in enumerate(hotpot_col.passages_at(np.arange(hotpot_col.n_passages)))}
    hops = subs = 0
    for q in sample[1]:
        plain = r.search(q["text"], k=30, link_weight=0.0, hop_slot=0, subquestion_slots=0)
        assert [h.stages["bm25"].rank for h in plain] == list(range(1, len(plain) + 1))  # the paper's BM25 order
        assert step(plain, "coverage")["moves"] == [] and "hop slot off (hop_slot=0)" in step(plain, "coverage")["notes"]
        fused = r.search(q["text"], k=30, hop_slot=0, subquestion_slots=0)
        # the same passages; where two differ in BM25, the one with the better link score may pass it
        assert sorted(h.passage_id for h in fused) == sorted(h.passage_id for h in plain)
        for a, b in zip(fused.hits, fused.hits[1:], strict=False):
            assert a.stages["bm25"].score >= b.stages["bm25"].score or a.stages["link"].score > b.stages["link"].score
        slotted = r.search(q["text"], k=30, hop_slot=3, subquestion_slots=0)
        moves = step(slotted, "coverage")["moves"]
        if moves:
            hops += 1
            [m] = moves
            assert m["to_rank"] == 3 and slotted.hits[2].passage_id == m["passage_id"]
            assert [h.passage_id for h in slotted.hits[:2]] == [h.passage_id for h in fused.hits[:2]]
            assert fused.hits[m["from_rank"] - 1].passage_id == m["passage_id"]
        else:
            assert [h.passage_id for h in slotted] == [h.passage_id for h in fused]
        seated = r.search(q["text"], k=30, hop_slot=0, subquestion_slots=2)
        seats = list(step(seated, "decomposition-linking")["per_text"])[:2]
        moves = step(seated, "coverage")["moves"]
        assert all(m["why"] == "sub-question" and m["text"] in seats for m in moves)
        # the seats, checked whether or not anything moved: every kept passage in the coarse order, each of the
        # first two sub-questions' best one (BM25 of the sub-question, the first of equals) raised to rank 2, 3
        coarse = [h.passage_id for h in r.search(q["text"], k=1000, hop_slot=0, subquestion_slots=0)]
        assert len(coarse) == step(seated, "coarse-filter")["kept"]
        kept, order = np.array([position[pid] for pid in coarse]), list(coarse)
        expected_moves, best = 0, {}
        for seat, text in enumerate(seats, start=1):
            bm25 = hotpot_col.bm25_passages.scores(text)[kept]
            if bm25.max() <= 0:  # nothing shares a word with it: no seat to give
                continue
            best[seat] = coarse[int(np.argmax(bm25))]
            if order.index(best[seat]) > seat:
                order.insert(seat, order.pop(order.index(best[seat])))
                expected_moves += 1
        got = [h.passage_id for h in seated]
        assert all(got.index(pid) <= seat for seat, pid in best.items())  # at its seat (rank 2, 3) or above
        assert got == order[:30]  # seats taken, everything else in the coarse order
        assert len(moves) == expected_moves
        subs += len(moves)
    assert hops >= 1 and subs >= 1  # on these questions both kinds of part are buried somewhere


def test_coverage_rule() -> None:
    from types import SimpleNamespace

    from hiera.retrieve.linking import coverage, hop_slot

    src = {1: [SimpleNamespace(source="entity")], 2: [SimpleNamespace(source="event"), SimpleNamespace(source="bridge")]}
    docs = np.array([1, 1, 1, 2, 2])
    assert hop_slot(docs, src, 2)[0] == (3, 1)
    assert hop_slot(docs, src, 4)[0] is None and "already at rank 4" in hop_slot(docs, src, 4)[1]
    assert hop_slot(docs, src, 0)[0] is None
    assert hop_slot(np.array([1, 1]), src, 1) == (None, "no passage of a bridge-linked document to move")
    # the hop moves 3 to rank 2; the first sub-question's best (2) then takes rank 2, the second's (0) stays first
    order, moves, notes = coverage(docs, src, 2, [("a?", 2), ("b?", 0), ("c?", None)])
    assert order == [0, 2, 3, 1, 4]
    assert [(m["why"], m["from_rank"], m["to_rank"]) for m in moves] == [("bridge hop", 4, 2), ("sub-question", 4, 2)]
    assert notes[0] == "sub-question 'b?': its best passage is already at rank 1" and "no kept passage" in notes[1]
    assert coverage(docs, src, 0, [])[0] == [0, 1, 2, 3, 4]


def test_reranker_orders_the_coarse_passages(hotpot_col: Collection, sample: tuple[Path, list[dict]]) -> None:
    q = sample[1][0]["text"]
    r = get_retriever("linking", hotpot_col, reranker=str(helpers.tiny_classifier()))
    res = r.search(q, k=5, coarse_depth=8, hop_slot=0, subquestion_slots=0)  # the reranker's order alone
    rerank = step(res, "rerank")
    assert rerank["model"] == "clf" and rerank["scored"] == step(res, "coarse-filter")["kept"] <= 8
    scores = [h.stages["rerank"].score for h in res]
    assert scores == sorted(scores, reverse=True) and [h.stages["rerank"].rank for h in res] == [1, 2, 3, 4, 5]
    assert all(h.score == h.stages["rerank"].score for h in res)
    with pytest.raises(Exception, match="not a directory"):
        r.search(q, reranker="/nonexistent/reranker")


def test_a_question_without_mentions_still_gets_event_linking(hotpot_col: Collection) -> None:
    res = get_retriever("linking", hotpot_col).search("what is it about?", k=5)
    assert step(res, "mentions")["mentions"] == [] and "event linking still runs" in step(res, "mentions")["note"]
    assert step(res, "event-linking")["linked"] and res.hits


def test_sources_can_be_switched_off(hotpot_col: Collection, sample: tuple[Path, list[dict]]) -> None:
    q = sample[1][1]["text"]
    r = get_retriever("linking", hotpot_col)
    only_entity = r.search(q, k=5, event_titles=0, decomposition_titles=0)
    assert set(step(only_entity, "linked-documents")["by_source"]) == {"entity"}
    only_event = r.search(q, k=5, entity_titles=0, decomposition_titles=0)
    assert set(step(only_event, "linked-documents")["by_source"]) == {"event"}
    nothing = r.search(q, k=5, entity_titles=0, event_titles=0, decomposition_titles=0)
    assert nothing.hits == []
    assert "nothing linked" in step(nothing, "linked-documents")["notes"][0]
    assert "no linked documents" in step(nothing, "coarse-filter")["note"]
    none = r.search("Who directed Jaws and produced Jurassic Park?", k=5, decomposer="none")
    assert step(none, "decomposition")["shape"] == "none"


def test_decomposer_endpoint_down_degrades_with_a_warning(hotpot_col: Collection, sample: tuple[Path, list[dict]]) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    r = get_retriever("linking", hotpot_col, decomposer="endpoint", decomposer_url=f"http://127.0.0.1:{port}/v1")
    res = r.search(sample[1][0]["text"], k=5)
    d = step(res, "decomposition")
    assert d["decomposer"] == "rules" and "used the rules decomposer" in d["warnings"][0]
    assert res.hits


def test_bad_decomposer_settings_are_one_line_errors(hotpot_col: Collection) -> None:
    r = get_retriever("linking", hotpot_col)
    with pytest.raises(BadInputError, match="decomposer=gpt must be one of rules, none, endpoint"):
        r.search("Who is Ed Wood?", decomposer="gpt")
    with pytest.raises(BadInputError, match="needs decomposer_url"):
        r.search("Who is Ed Wood?", decomposer="endpoint")


def test_redirects_reach_the_alias_index(hotpot_col: Collection) -> None:
    first = next(hotpot_col.store.iter_docs())
    [m] = linker_for(hotpot_col).titles.exact(ALIAS.lower())
    assert m.kind == "alias" and linker_for(hotpot_col).titles.titles[m.doc] == first.title


def test_doc_level_and_dhr_over_linked_documents(hotpot_col: Collection, sample: tuple[Path, list[dict]]) -> None:
    q = sample[1][2]["text"]
    res = get_retriever("linking", hotpot_col).search(q, k=5, level="doc")
    linked = {e["title"] for e in step(res, "linked-documents")["linked"]}
    assert len({h.doc_id for h in res}) == len(res) and all(h.title in linked for h in res)
    dhr = get_retriever("dhr", hotpot_col).search(q, k=5, doc_stage="linked", top_docs=100)
    assert dhr.hits and all(h.title in linked for h in dhr)
    assert max(h.stages["doc"].score for h in dhr) <= 1.0


def test_search_explain_prints_the_trace_as_a_tree(sample: tuple[Path, list[dict]], capsys: pytest.CaptureFixture[str]) -> None:
    q = sample[1][0]["text"]
    assert main(["search", str(sample[0]), q, "-r", "linking", "-k", "3", "--explain"]) == 0
    out = capsys.readouterr().out
    tree = out[out.index("how this was found"):]
    lines = tree.splitlines()
    for name in STEPS[1:]:
        assert any(line.startswith(f"  {name}  (") for line in lines), name
    assert any(line.startswith("      - text: ") for line in lines)  # a mention, nested under its step
    assert any("source: " in line for line in lines)


def test_the_api_returns_the_trace_and_refuses_a_decomposer_url(sample: tuple[Path, list[dict]]) -> None:
    from fastapi.testclient import TestClient

    from hiera.serve import create_app

    q = sample[1][0]["text"]
    with TestClient(create_app(sample[0], warmup=False)) as client:
        r = client.get("/search", params={"q": q, "retriever": "linking", "k": 3, "decomposer": "none"})
        assert r.status_code == 200, r.text
        body = r.json()
        assert [s["name"] for s in body["trace"]] == STEPS
        linked = next(s for s in body["trace"] if s["name"] == "linked-documents")["detail"]["linked"]
        assert linked and all(e["doc_id"] and e["sources"] for e in linked)
        # a URL the server would call is a server-side setting, never a request parameter
        r = client.get("/search", params={"q": q, "retriever": "linking", "decomposer_url": "http://127.0.0.1:1/v1"})
        assert r.status_code == 422 and "server-side setting (a URL)" in r.json()["detail"]


def test_search_decomposer_url_flag(sample: tuple[Path, list[dict]], capsys: pytest.CaptureFixture[str]) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    q = sample[1][0]["text"]
    assert main(["search", str(sample[0]), q, "-r", "linking", "--json", "--decomposer-url", f"http://127.0.0.1:{port}/v1"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["params"]["decomposer"] == "endpoint"
    decomposition = next(s for s in body["trace"] if s["name"] == "decomposition")["detail"]
    assert "used the rules decomposer" in decomposition["warnings"][0]
    # another method has no decomposer: a one-line error
    assert main(["search", str(sample[0]), q, "-r", "bm25", "--decomposer-url", "http://127.0.0.1:9/v1"]) == 2  # bad input
    assert "decomposer" in capsys.readouterr().err


def test_a_filter_drops_linked_documents_before_the_coarse_filter(hotpot_col: Collection,
                                                                  sample: tuple[Path, list[dict]]) -> None:
    q = sample[1][2]["text"]
    r = get_retriever("linking", hotpot_col)
    plain = r.search(q, k=10)
    first = plain.hits[0].doc_id
    assert [h.passage_id for h in r.search(q, k=10, filter="not id = nothing")] == [h.passage_id for h in plain]
    res = r.search(q, k=10, filter=f"not id = '{first}'")
    assert res.hits and first not in {h.doc_id for h in res}
    links = step(res, "filter-links")
    assert links["allowed"] == links["linked"] - 1 == step(res, "coarse-filter")["documents"]
    dhr = get_retriever("dhr", hotpot_col).search(q, k=5, doc_stage="linked", top_docs=100, filter=f"not id = '{first}'")
    assert dhr.hits and first not in {h.doc_id for h in dhr}
    assert max(h.stages["doc"].score for h in dhr) == pytest.approx(1.0)  # divided by the best allowed link


def test_implicit_bridge_hop_is_one_ranked_list(tmp_path: Path) -> None:
    """The documents named in the first hop are one source list, most similar to the question first: their ranks are
    1, 2, 3 … in the order of ``expansion`` (as one-item lists each would fuse as a rank-1 source, level with the
    best entity link), and the fused order of the documents only the hop linked follows their similarity."""
    hub = ("The Harbor Bridge was designed by Alma Reyes and built by Castor Works near Dunmore Bay and the Pell River, "
           "opposite Oster Hall, in 1931.")
    docs = [Document("hub", "Harbor Bridge", [hub]),
            Document("a", "Alma Reyes", ["Alma Reyes was an architect who designed bridges and towers."]),
            Document("c", "Castor Works", ["Castor Works is a steel company that built bridges, ships and railways."]),
            Document("d", "Dunmore Bay", ["Dunmore Bay is a bay on the northern coast with a fishing harbor."]),
            Document("p", "Pell River", ["The Pell River flows into Dunmore Bay past old mills."]),
            Document("o", "Oster Hall", ["Oster Hall is a concert venue built in the 1920s."]),
            # close to the question, so that event linking's first hop is not the named documents themselves
            Document("e1", "Bridge building company", ["A bridge building company is a company which built bridges."]),
            Document("e2", "Company that built a bridge", ["Which company built the bridge is a common question."]),
            Document("e3", "Harbor bridge construction", ["Harbor bridges are built by construction companies."])]
    col = open_collection(helpers.build_collection(tmp_path / "col", docs))
    res = linker_for(col).link("Which company built the Harbor Bridge?")
    titles = [e["title"] for e in res.expansion]
    assert len(titles) >= 3 and all(e["named_in"] == "Harbor Bridge" for e in res.expansion)
    implicit = {res.titles[d]: s for d, srcs in res.sources.items() for s in srcs if s.source == "bridge"}
    assert [implicit[t].rank for t in titles] == list(range(1, len(titles) + 1))
    assert all(implicit[t].via == "named in Harbor Bridge" for t in titles)  # each says which document named it
    only_bridge = [t for t in titles if [s.source for s in res.sources[_doc(res, t)]] == ["bridge"]]
    assert len(only_bridge) >= 2
    fused = [res.titles[int(d)] for d in res.docs]
    assert [t for t in fused if t in only_bridge] == only_bridge
    top = float(res.scores[0])
    assert all(float(res.scores[fused.index(t)]) < top for t in only_bridge[1:])


def _doc(res, title: str) -> int:
    return next(d for d, t in res.titles.items() if t == title)
