"""Answers to questions as people ask them: the reader on NQ-open and TriviaQA over the demo collection.

    python -m bench.reader_open --reader DIR [--reader DIR ...] [--train OUT --init DIR] [--trivia 2000]
        [--sets nq-open,trivia,squad-dev] [--rerank DIR | --train-reranker OUT]

**Splits** (seeded, disjoint by normalized question text; counts printed and in the JSON):

* evaluation: NQ-open dev, all 3,610 questions (the same questions as DPR's NQ test), and TriviaQA:
  the second half of a seeded shuffle of DPR's TriviaQA test set (``--trivia N``: a seeded sample of it);
* the control, ``squad-dev``: a seeded, spread-out sample of ``--squad`` SQuAD dev questions (of the
  first 24 articles) over the pooled corpus, retrieved by bench.reader's ``dhr`` (λ 1, dense passage
  scores): what training on other phrasings must not cost, and the recipes compared paired;
* distant-supervision training: EfficientQA's test questions (1,769, NQ-style, none of them in NQ-open dev),
  WebQuestions' test set (2,032) and the first half of the TriviaQA shuffle; a question whose normalized
  text is also in an evaluation set is dropped from training.

**Training** (``--train OUT``): ``hiera train-reader``'s loop on the demo collection, continuing the reader
``--init`` (trained on SQuAD), the CPU recipe unless ``--lr`` / ``--epochs`` / ``--max-minutes`` say otherwise;
``--replay N`` trains N of the SQuAD questions ``--init`` learnt from again beside the new ones (each read in its
own collection), so the reader does not forget SQuAD's phrasing.
A question's positive is the first BM25 passage that contains one of its answer strings (DPR's reader
positives), read in the window holding the answer; a question with none is skipped.

**Evaluation**: DHR (its defaults, what ``hiera answer`` runs) retrieves each question's top 20. EM
(SQuAD normalization against any answer string) is reported over all questions and over the *answerable*
subset (an answer string in the top 20, DPR's ``has_answer``). Every question is read at read-k 1 (its
first passage only: the answer at read-k 1 depends on nothing else); a seeded sample of ``--deep``
questions per set is read to read-k 5 and 20 (reading 20 passages costs 20 times one, about a second a
question on two cores), with ``lost@20``. For every reader after the first: its paired EM difference
from the first, with a 95% bootstrap interval. Each (reader, question set)
reading is kept in ``bench/work/reader-open/read-*.json`` and reused, so an interrupted run resumes and
readers can be added later. Writes ``bench/out/reader-open.json``.

**Reranking** (``--rerank DIR``, or ``--train-reranker OUT`` to train that cross-encoder first by distant
supervision on the training questions, DHR's top passages its hard negatives): every reader also reads the same
top 20 in the cross-encoder's order, as ``hiera answer --rerank DIR`` does, and is compared paired with itself
reading DHR's order. The passages are DHR's, so the answerable subset is the same; what moves is which of them
read-k 1 reads.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import REPO, WORK, Report, data_dir

WORK_DIR = WORK / "reader-open"
# bench.reader_grid's split: the 36 SQuAD train articles its readers trained on, and their collection
REPLAY = WORK / "reader-grid" / "train-du2017-44articles-seed0-held8"
DEMO = REPO / "collections" / "demo"
READ_KS = (1, 5, 20)
SEED = 0


def _norm(text: str) -> str:
    return " ".join(text.lower().replace("?", " ").split())


def splits(trivia_eval: int | None = None) -> dict[str, Any]:
    """The evaluation sets and the distant-supervision training questions, disjoint by normalized text."""
    from hiera.eval.questions import load_questions

    odqa = data_dir() / "odqa-questions"
    nq = load_questions(odqa / "NQ-open.dev.jsonl", "nq-open")
    trivia = load_questions(odqa / "topics.dpr.trivia.test.txt", "dpr-tsv")
    order = list(range(len(trivia)))
    random.Random(SEED).shuffle(order)
    half = len(order) // 2
    trivia_train = [trivia[i] for i in order[:half]]
    held = sorted(order[half:])
    if trivia_eval is not None and trivia_eval < len(held):
        held = sorted(random.Random(SEED + 1).sample(held, trivia_eval))
    evaluated = {"nq-open": nq, "trivia": [trivia[i] for i in held]}
    # never train on an evaluated question, nor on one of the held-back TriviaQA half left out of the sample
    seen = {_norm(q.text) for q in nq} | {_norm(trivia[i].text) for i in order[half:]}
    sources = {
        "efficientqa": load_questions(odqa / "NQ-open.efficientqa.test.1.1.jsonl", "nq-open"),
        "webquestions": load_questions(odqa / "topics.dpr.wq.test.txt", "dpr-jsonl"),
        "trivia-train-half": trivia_train,
    }
    train, dropped = [], {}
    for name, qs in sources.items():
        keep = [q for q in qs if _norm(q.text) not in seen and q.answers]
        dropped[name] = len(qs) - len(keep)
        train += keep
    return {"eval": evaluated, "train": train, "train_sources": {k: len(v) for k, v in sources.items()},
            "dropped_as_evaluated": dropped}


def ensure_demo(root: Path) -> Path:
    from hiera.demo import ensure_demo_collection

    ensure_demo_collection(root)
    return root


def train(root: Path, questions: list[Any], out: Path, args: argparse.Namespace) -> dict[str, Any]:
    from hiera.builds import open_collection
    from hiera.train.args import ReaderArgs
    from hiera.train.reader import train_reader

    given: dict[str, Any] = {"init": str(args.init), "max_minutes": args.max_minutes, "seed": 42}
    for name, value in (("learning_rate", args.lr), ("epochs", args.epochs), ("negatives", args.negatives),
                        ("interpolate", args.interpolate)):
        if value is not None:
            given[name] = value
    rargs = ReaderArgs.for_device("cpu", **given)
    replay = []
    if args.replay:  # SQuAD questions the --init reader trained on, read again from their own collection
        from hiera.eval.questions import load_questions
        from hiera.train.common import sample_questions

        squad = load_questions(REPLAY / "train.json", "squad", rules=open_collection(REPLAY / "train").store.rules)
        replay.append((REPLAY / "train", sample_questions(squad, args.replay, 42)))
    return train_reader(root, questions, out, rargs, replay=replay)


def reader_key(path: Path) -> str:
    """What a cached reading belongs to: the reader's metadata and heads (a retrained reader reads again)."""
    from hiera.read.model import HEADS_FILE, META_FILE

    h = hashlib.sha256((path / META_FILE).read_bytes())
    h.update((path / HEADS_FILE).read_bytes())
    return h.hexdigest()[:16]


def retrieve(col: Any, questions: list[Any], k: int, params: dict[str, Any] | None = None,
             rerank: Path | None = None) -> list[list[Any]]:
    """Each question's DHR top ``k`` passages; with ``rerank``, the same passages in the cross-encoder's order
    (``hiera answer --rerank DIR --rerank-depth k``: the set, hence the answerable subset, is DHR's)."""
    from hiera.retrieve import get_retriever

    retriever = get_retriever("dhr", col, **(params or {}))
    if rerank is not None:
        from hiera.crossencoder import Reranker
        from hiera.retrieve.rerank import RerankRetriever

        retriever = RerankRetriever(retriever, Reranker(rerank, device="cpu"), depth=k)
    out: list[list[Any]] = []
    t = time.perf_counter()
    for i in range(0, len(questions), 256):
        for res in retriever.batch_search([q.text for q in questions[i : i + 256]], k=k, level="passage"):
            out.append([h for h in res.hits if h.passage_id][:k])
    print(f"  retrieved {len(questions)} questions with {retriever.name} in {time.perf_counter() - t:.0f}s", flush=True)
    return out


def train_reranker(root: Path, questions: list[Any], out: Path, args: argparse.Namespace) -> None:
    """A cross-encoder by distant supervision on the training questions: ``hiera train-reranker``'s recipe with DHR's
    top passages as the hard negatives (what it will rerank); its threshold and weight calibrated on a held part."""
    from hiera.train.args import RerankerArgs
    from hiera.train.reranker import train_reranker as fit

    fit(root, questions, out, RerankerArgs(negatives_from="dhr", max_minutes=args.max_minutes, seed=42))


def rerank_key(path: Path | None) -> str:
    """The part of a reading's cache name that says which passages were read (DHR's order, or a reranker's)."""
    if path is None:
        return ""
    from hiera.encode import model_fingerprint

    return "-rr" + model_fingerprint(path)[:12]  # already a sha256 of the weights and configs


def label(path: Path, rerank: Path | None) -> str:
    """A reading's name in the tables and the JSON: the reader, and the reranker whose order it read."""
    return str(path) if rerank is None else f"{path} + rerank {rerank}"


def read(reader: Any, questions: list[Any], hits: list[list[Any]], sep: str, cache: Path,
         deep: set[int]) -> dict[str, Any]:
    """Each question's answer at read-k 1, and at every read-k for the questions at positions ``deep``
    (resumed from ``cache``, saved every 100 questions)."""
    from hiera.eval.read import score_answer
    from hiera.io import write_json_atomic
    from hiera.read.pipeline import title_line

    done: dict[str, Any] = json.loads(cache.read_text()) if cache.exists() else {}
    t, fresh = time.perf_counter(), 0
    for i, (q, top) in enumerate(zip(questions, hits, strict=True)):
        key = f"{q.id}\t{q.text}"
        ks = READ_KS if i in deep else READ_KS[:1]
        if key in done and all(str(k) in done[key] for k in ks):
            continue
        lg = reader.logits(q.text, [(title_line(h, sep), h.text) for h in top[: max(ks)]])
        row = {}
        for k in ks:
            ans = reader.decode(lg, upto=k)
            pred = ans[0].text if ans else ""
            row[str(k)] = [pred, score_answer(pred, q)[0]]
        done[key] = row
        fresh += 1
        if fresh % 100 == 0:
            write_json_atomic(cache, done)
            print(f"    {reader.name}: {len(done)}/{len(questions)} read ({time.perf_counter() - t:.0f}s)", flush=True)
    write_json_atomic(cache, done)
    return {"rows": [done[f"{q.id}\t{q.text}"] for q in questions], "seconds": time.perf_counter() - t, "fresh": fresh}


def summarize(name: str, rows: list[dict[str, Any]], answerable: np.ndarray,
              deep: np.ndarray | None = None) -> dict[str, Any]:
    """EM at read-k 1 over every question; at every read-k over the ``deep`` ones (default: every question read
    that deep) (``deep_*``)."""
    kmin, kmax = READ_KS[0], READ_KS[-1]
    em1 = np.array([r[str(kmin)][1] for r in rows])
    out: dict[str, Any] = {"reader": name, "questions": len(rows), "answerable": int(answerable.sum()),
                           "answerable_share": float(answerable.mean()) if len(rows) else 0.0,
                           f"em@{kmin}": float(em1.mean()),
                           f"em@{kmin}_answerable": float(em1[answerable].mean()) if answerable.any() else 0.0}
    if deep is None:
        deep = np.array([str(kmax) in r for r in rows])
    out["deep_questions"], out["deep_answerable"] = int(deep.sum()), int((deep & answerable).sum())
    if deep.any():
        em = {k: np.array([r[str(k)][1] for r, d in zip(rows, deep, strict=True) if d]) for k in READ_KS}
        ans = answerable[deep]
        for k in READ_KS:
            out[f"deep_em@{k}"] = float(em[k].mean())
            out[f"deep_em@{k}_answerable"] = float(em[k][ans].mean()) if ans.any() else 0.0
        out[f"deep_lost@{kmax}"] = float(((em[kmin] > 0) & (em[kmax] == 0)).mean())
        out[f"deep_gained@{kmax}"] = float(((em[kmax] > 0) & (em[kmin] == 0)).mean())
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=DEMO, help="the demo collection (built by hiera demo when missing)")
    ap.add_argument("--reader", type=Path, action="append", default=[],
                    help="a reader to evaluate (repeatable; the first is the one the others are compared with)")
    ap.add_argument("--train", type=Path, default=None, help="train a reader here by distant supervision first "
                    "(continuing --init) and evaluate it after the --reader ones")
    ap.add_argument("--init", type=Path, default=None, help="the reader --train continues")
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--epochs", type=float, default=None)
    ap.add_argument("--negatives", type=int, default=None)
    ap.add_argument("--max-minutes", type=float, default=30.0)
    ap.add_argument("--interpolate", type=float, default=None, metavar="W",
                    help="--train: save --init + W·(trained − init) (hiera train-reader --interpolate)")
    ap.add_argument("--replay", type=int, default=0, help="--train: this many of the SQuAD train questions the "
                    "--init reader trained on (bench.reader_grid's split) trained on again with the new ones")
    ap.add_argument("--rerank", type=Path, default=None, help="a cross-encoder: every reader also reads DHR's top 20 "
                    "in its order (hiera answer --rerank), compared paired with the same reader without it")
    ap.add_argument("--train-reranker", type=Path, default=None, metavar="OUT",
                    help="train that cross-encoder here first, by distant supervision on the training questions")
    ap.add_argument("--sets", default="nq-open,trivia,squad-dev", help="question sets to evaluate")
    ap.add_argument("--nq", type=int, default=None, help="only the first N NQ-open questions (default: all 3,610)")
    ap.add_argument("--trivia", type=int, default=2000, help="a seeded sample of the held-back TriviaQA half")
    ap.add_argument("--squad", type=int, default=1000, help="SQuAD dev questions of the squad-dev control")
    ap.add_argument("--deep", type=int, default=500, help="questions per set (a seeded sample) read to read-k 20")
    ap.add_argument("--shallow", type=Path, action="append", default=[],
                    help="a --reader read at read-k 1 only (its EM@1 figures and comparisons, no deep ones)")
    ap.add_argument("--latency", type=int, default=30,
                    help="questions each reader answers one at a time from its top 10 (hiera answer's default k), "
                         "for its p50 reading latency")
    ap.add_argument("--name", default="reader-open")
    args = ap.parse_args(argv)

    from hiera.builds import open_collection
    from hiera.eval.match import passage_has_answer
    from hiera.eval.paired import paired_ci
    from hiera.read.pipeline import title_line
    from hiera.read.reader import Reader

    sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    # the demo collection is built (minutes, on a fresh machine) only when a run reads or trains on it
    training_run = args.train is not None or args.train_reranker is not None
    root = ensure_demo(args.root) if training_run or set(sets) - {"squad-dev"} else args.root
    sp = splits(args.trivia)
    if args.nq is not None:
        sp["eval"]["nq-open"] = sp["eval"]["nq-open"][: args.nq]
    print(f"splits: evaluate {', '.join(f'{k} {len(v)}' for k, v in sp['eval'].items())}; "
          f"distant supervision {len(sp['train'])} questions from {sp['train_sources']} "
          f"(dropped as evaluated: {sp['dropped_as_evaluated']})", flush=True)
    readers = list(args.reader)
    training = None
    if args.train is not None:
        if args.init is None:
            raise SystemExit("--train needs --init (the SQuAD reader it continues)")
        from hiera.read.model import META_FILE

        if not (args.train / META_FILE).exists():
            train(root, sp["train"], args.train, args)
        training = json.loads((args.train / META_FILE).read_text())
        readers.append(args.train)
    if not readers:
        raise SystemExit("nothing to evaluate: give --reader DIR (or --train OUT --init DIR)")
    rerank = args.rerank
    if args.train_reranker is not None:
        from hiera.train.reranker import META_FILE as RERANKER_META

        if rerank is not None:
            raise SystemExit("give --rerank DIR or --train-reranker OUT, not both")
        if not (args.train_reranker / RERANKER_META).exists():
            train_reranker(root, sp["train"], args.train_reranker, args)
        rerank = args.train_reranker
    configs = [(p, None) for p in readers] + [(p, rerank) for p in readers if rerank is not None]

    cols: dict[Path, Any] = {}

    def collection(path: Path) -> Any:
        if path not in cols:
            cols[path] = open_collection(path)
        return cols[path]

    WORK_DIR.mkdir(parents=True, exist_ok=True)
    rep = Report(args.name, columns=["set", "reader", "questions", "answerable@20", "answer in 1st", "EM@1",
                                     "EM@1 answerable",
                                     "deep questions", *[f"deep EM@{k}" for k in READ_KS],
                                     *[f"deep EM@{k} answerable" for k in READ_KS], "deep lost@20",
                                     "read ms p50 (k 10)", "read s"])
    paired = Report(f"{args.name}-paired", columns=["set", "comparison", "subset", "difference", "95% interval"])
    results: dict[str, Any] = {}
    for set_name in sets:
        if set_name == "squad-dev":
            from bench.common import PINNED
            from bench.pooled import ensure_pooled
            from bench.reader import spread_sample
            from hiera.eval.questions import load_questions

            col = collection(ensure_pooled())
            dev = load_questions(data_dir() / "squad" / "dev-v1.1.first24.json", "squad", rules=col.store.rules)
            qs, params = spread_sample(dev, args.squad, SEED), PINNED["dhr"]
        else:
            col, qs, params = collection(root), sp["eval"][set_name], {}
        sep = col.store.title_sep
        print(f"{set_name}: {len(qs)} questions", flush=True)
        hits = retrieve(col, qs, max(READ_KS), params)
        answerable = np.array([any(passage_has_answer(h, q.answers, q.answer_mode) for h in top)
                               for q, top in zip(qs, hits, strict=True)])
        ordered = {None: hits}
        if rerank is not None:  # the same passages in the cross-encoder's order: the answerable subset is unchanged
            ordered[rerank] = retrieve(col, qs, max(READ_KS), params, rerank=rerank)
        deep = set(random.Random(SEED + 2).sample(range(len(qs)), min(args.deep, len(qs))))
        is_deep = np.array([i in deep for i in range(len(qs))])
        ems: dict[str, dict[int, np.ndarray]] = {}
        for path, rr in configs:
            top_of, name = ordered[rr], label(path, rr)
            # what read-k 1 can answer at most: the first passage holds an answer string
            first_has = np.array([bool(top) and passage_has_answer(top[0], q.answers, q.answer_mode)
                                  for q, top in zip(qs, top_of, strict=True)])
            reader = Reader(path, device="cpu")
            shallow = path in args.shallow  # read at read-k 1 only: no deep figures
            has_deep = not shallow and bool(is_deep.any())
            got = read(reader, qs, top_of, sep,
                       WORK_DIR / f"read-{reader_key(path)}{rerank_key(rr)}-{set_name}.json",
                       set() if shallow else deep)
            s = summarize(name, got["rows"], answerable, np.zeros(len(qs), bool) if shallow else is_deep)
            ems[name] = {k: np.array([r.get(str(k), ["", np.nan])[1] for r in got["rows"]], dtype=float)
                          for k in READ_KS}
            e = ems[name]
            ms = []
            for q, top in list(zip(qs, top_of, strict=True))[: args.latency]:  # hiera answer's reading, k = 10
                t = time.perf_counter()
                reader.read(q.text, [(title_line(h, sep), h.text) for h in top[:10]])
                ms.append((time.perf_counter() - t) * 1000)
            s["read_ms_p50_k10"] = float(np.median(ms)) if ms else None
            results[f"{set_name} | {name}"] = {**s, "read_seconds": round(got["seconds"], 1),
                                                "answer_in_first_passage": float(first_has.mean()),
                                                "deep_em@20-em@1": None if not has_deep else
                                                list(paired_ci(e[20][is_deep], e[1][is_deep]))}
            rep.add({"set": set_name, "reader": name, "questions": s["questions"],
                     "answerable@20": round(100 * s["answerable"] / max(1, s["questions"]), 1),
                     "answer in 1st": round(100 * float(first_has.mean()), 1),
                     "EM@1": round(100 * s["em@1"], 1), "EM@1 answerable": round(100 * s["em@1_answerable"], 1),
                     "deep questions": s["deep_questions"],
                     **{f"deep EM@{k}": round(100 * s[f"deep_em@{k}"], 1) for k in READ_KS if has_deep},
                     **{f"deep EM@{k} answerable": round(100 * s[f"deep_em@{k}_answerable"], 1)
                        for k in READ_KS if has_deep},
                     **({"deep lost@20": round(100 * s["deep_lost@20"], 1)} if has_deep else {}),
                     "read ms p50 (k 10)": round(s["read_ms_p50_k10"] or 0, 1), "read s": round(got["seconds"])})
        # every reader against the first (DHR's order); a reranked reading against the same reader without it
        pairs = [(path, label(path, None), label(readers[0], None)) for path in readers[1:]]
        if rerank is not None:
            pairs += [(path, label(path, rerank), label(path, None)) for path in readers]
        for path, this, base in pairs:
            for subset, rows in (("all", np.ones(len(qs), bool)), ("answerable", answerable)):
                for k in READ_KS:
                    sel = rows if k == READ_KS[0] else rows & is_deep
                    if k != READ_KS[0] and (path in args.shallow or readers[0] in args.shallow or not is_deep.any()):
                        continue
                    d, lo, hi = paired_ci(ems[this][k][sel], ems[base][k][sel])
                    key = f"{set_name} | {this} - {base} | {subset} | EM@{k}"
                    results[key] = {"difference": d, "lo": lo, "hi": hi}
                    paired.add({"set": set_name, "comparison": f"{this} - {base}", "subset": f"{subset} EM@{k}",
                                "difference": round(d, 1), "95% interval": f"[{lo:+.1f}, {hi:+.1f}]"}, echo=False)
    rep.print(f"The reader over the demo collection (squad-dev: the pooled corpus; dhr top {max(READ_KS)}). EM in %; answerable: an answer string "
              "in the top 20 (DPR's has_answer); EM@1 over every question; deep: a seeded sample read to read-k 20; "
              "lost@20: % right at read-k 1 and wrong at 20")
    if paired.rows:
        paired.print("Paired differences of EM in points (bootstrap, 2,000 rounds)")
    if not sets:  # a training-only run (--sets ''): no figures, and another run's JSON under the same name is kept
        return rep.to_dict()
    rep.results.update(results)
    rep.write(splits={"eval": {k: len(v) for k, v in sp["eval"].items()}, "train": len(sp["train"]),
                      "train_sources": sp["train_sources"], "dropped_as_evaluated": sp["dropped_as_evaluated"],
                      "seed": SEED},
              readers=[str(p) for p in readers], root=str(root), rerank=rerank and str(rerank),
              training=training and {
                  "examples": training.get("examples"), "train": training.get("train"), "args": training.get("args"),
                  "init": (training.get("init") or {}).get("reader")},
              comparisons=paired.rows)
    return rep.to_dict()


if __name__ == "__main__":
    main()
