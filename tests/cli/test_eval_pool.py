"""``hiera eval --format hotpotqa --pool PATH``: a paragraph pool that is not beside the question file."""

from __future__ import annotations

import json
from pathlib import Path

from hiera.cli import main

POOL = [
    {"id": "hp0", "title": "Mauna Loa", "text": "Mauna Loa is a shield volcano on the island of Hawaii."},
    {"id": "hp1", "title": "Kilauea", "text": "Kilauea is the most active volcano of Hawaii, south of Mauna Loa."},
    {"id": "hp2", "title": "Deep Blue", "text": "Deep Blue was the IBM chess computer that beat Garry Kasparov."},
]
QUESTION = {
    "question_id": "h1",
    "question_text": "Which chess computer beat Kasparov?",
    "answers_objects": [{"spans": ["Deep Blue"]}],
    "contexts": [
        {"id": "0", "title": "Deep Blue", "paragraph_text": POOL[2]["text"], "is_supporting": True},
        {"id": "1", "title": "Kilauea", "paragraph_text": POOL[1]["text"], "is_supporting": False},
    ],
}


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_eval_hotpotqa_takes_the_pool_from_the_command_line(tmp_path: Path, capsys) -> None:
    pool = _jsonl(tmp_path / "data" / "pool.jsonl", POOL)
    questions = _jsonl(tmp_path / "questions" / "dev.jsonl", [QUESTION])  # no pool beside it
    col = tmp_path / "col"
    assert main(["ingest", str(pool), "--format", "hotpotqa-pool", "--index", str(col), "-q"]) == 0
    assert main(["build", str(col), "--no-dense", "-q"]) == 0
    capsys.readouterr()
    base = ["eval", str(col), "--questions", str(questions), "--format", "hotpotqa", "--retrievers", "bm25",
            "--ks", "1,2", "--json", "-q", "--latency-sample", "0"]

    assert main(base) == 2
    err = capsys.readouterr().err.strip()
    assert "no paragraph pool" in err and "--pool PATH" in err and len(err.splitlines()) == 1

    out = tmp_path / "out"
    assert main([*base, "--pool", str(pool), "--out", str(out)]) == 0
    metrics = json.loads(capsys.readouterr().out)["bm25"]
    assert metrics["doc_top1"] == 1.0 and metrics["top1"] == 1.0  # gold = pool id hp2, ranked first by BM25
    assert json.loads((out / "run.json").read_text())["questions"]["pool"] == str(pool)  # rerunnable from it

    squad = [a if a != "hotpotqa" else "squad" for a in base]
    assert main([*squad, "--pool", str(pool)]) == 2
    assert "--pool applies to --format hotpotqa" in capsys.readouterr().err
