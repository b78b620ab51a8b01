"""Answers, not only passages (issue 14): the trained reader on the pooled Wikipedia corpus.

    python -m bench.reader [--train] [--questions 300] [--retrievers bm25,dense,dhr,hybrid]

* **training** (``--train``, skipped when ``--reader`` already holds a reader):
  ``hiera train-reader`` on ``train-du2017-44articles.json`` only, a seeded
  sample of ``--train-examples`` questions;
* **reading comprehension**: the gold paragraph given (every passage of it),
  EM/F1 of the reader's best answer: its ceiling;
* **open domain**: each retriever's top passages read at read-k 1, 5, 20, 50
  (EM/F1, SQuAD v1.1 normalization), beside the retriever's top-k answer
  accuracy; plus the best retriever reranked by the cross-encoder of
  ``--rerank`` when it exists; for each list, the fraction of questions
  whose right answer at read-k 1 was lost by reading more (``lost@K``) or
  won (``gained@K``), and EM@K − EM@1 with its paired bootstrap interval;
* **paired intervals for every comparison claimed**: dhr against dense,
  tuned decoding against the reader's own, and with ``--baseline READER``
  (repeatable) this reader against each other one read on the same passages
  (the GPU recipe against the CPU one, against itself continued by distant
  supervision), and each baseline's own EM@K − EM@1: each a difference of
  EM with its 95% paired bootstrap interval (:mod:`hiera.eval.paired`);
* **FetchHR, the paper's Table 2** (``--fetchhr HEADS``): reader EM/F1 reading
  all L×k passages FetchHR fetches (at its defaults, and in the paper's
  setting: even split, a head on every layer) against dense's top-(L×k),
  same budget (``--budget``, Flat index); and the first 1 and 5 of each
  list read alone (EM@1, EM@5: fetchhr's list is ranked, issue 37);
* **decoding tuned on train questions** (``--tune-questions``, never dev):
  the reader's ``passage_weight``, ``rank_weight`` and ``merge`` (their
  grids in the registry), chosen by :mod:`hiera.read.calibrate` (best mean
  EM over the read-ks among settings that never lose by reading more) on
  *train* questions the reader did not train on (every train question when
  it trained on all of them: then the tuning saw its training data, and the
  JSON says so), read from ``dhr-tuned``'s passages; dev is then decoded
  with the reader's own decoding and with the tuned values;
  ``--save-decoding`` writes the tuned values into the reader, ``--tune-only``
  stops there (no dev question read); a ``bench.reader_grid`` reader tunes on
  its held-back articles;
* **cost**: training wall time and peak RSS (from the reader's metadata),
  retrieval and reading latency per question (reading timed on each
  retriever's own top-20, one question at a time).

Questions: a spread-out, seeded sample of ``dev-v1.1.first24.json``
(``--questions``; all 5,696 would take hours of CPU reading). Each question's
passages from all retrievers are read once, as a union, and every list is
decoded from that reading (a passage's logits do not depend on its company),
which gives the same answers as reading each list alone (tested) at a third
of the cost. Writes ``bench/out/reader.json``.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import PINNED, WORK, Report, data_dir
from bench.pooled import ensure_pooled

READER = WORK / "reader" / "minilm"
RERANKER = WORK / "reranker-squad"
# the DHR configuration bench/wiki_qa.py --hybrid-passages tuned for top-1 on train questions
DHR_TUNED = {"doc_stage": "hybrid-max", "lam": 0.85, "top_docs": 10, "passage_alpha": 0.3}


class PassageUnion:
    """The distinct passages of one question's lists, in first-seen order (read once, decoded per list)."""

    def __init__(self) -> None:
        self.order: dict[str, int] = {}
        self.pairs: list[tuple[str, str]] = []

    def add(self, pid: str, title: str, text: str) -> int:
        if pid not in self.order:
            self.order[pid] = len(self.pairs)
            self.pairs.append((title, text))
        return self.order[pid]


def spread_sample(items: list[Any], n: int, seed: int = 0) -> list[Any]:
    if n >= len(items):
        return items
    keep = sorted(random.Random(seed).sample(range(len(items)), n))
    return [items[i] for i in keep]


def train(args: argparse.Namespace, col_root: Path) -> None:
    from hiera.eval.questions import load_questions
    from hiera.train.args import ReaderArgs
    from hiera.train.reader import train_reader

    qs = load_questions(data_dir() / "squad" / "train-du2017-44articles.json", "squad")
    rargs = ReaderArgs(max_examples=args.train_examples, batch_size=12, save_steps=40, max_minutes=args.train_minutes)
    train_reader(col_root, qs, args.reader, rargs)


def tune_decoding(reader: Any, col: Any, retriever: Any, n: int, read_ks: list[int], sep: str,
                  tune_file: Path | None = None) -> dict[str, Any]:
    """Decoding weights calibrated (:mod:`hiera.read.calibrate`) on train questions, never dev: those of
    ``tune_file`` (SQuAD train articles the reader never trained on), else the reader's unseen ones."""
    from hiera.eval.questions import load_questions
    from hiera.eval.tune_reader import tune_reader
    from hiera.train.common import sample_questions

    train = load_questions(data_dir() / "squad" / "train-du2017-44articles.json", "squad", rules=col.store.rules)
    a = reader.meta.get("args", {})
    held = set(reader.meta.get("chosen_on", {}).get("held_out_articles", []))  # bench.reader_grid's readers
    if tune_file is not None:
        unseen = load_questions(tune_file, "squad", rules=col.store.rules)
    elif held:
        unseen = [q for q in train if q.metadata.get("title") in held]
    else:
        seen = {q.id for q in sample_questions(train, a.get("max_examples"), a.get("seed", 42))}
        unseen = [q for q in train if q.id not in seen]
    qs = spread_sample(unseen or train, n, seed=1)
    out = tune_reader(reader, retriever, qs, read_ks, sep)  # the reading and the grid of `hiera tune-reader`
    out["questions_seen_in_training"] = not unseen
    return out


def more_evidence(sc: dict[str, list[float]], read_ks: list[int]) -> dict[str, Any]:
    """What reading more did to one list's answers: lost@K / gained@K against the first read-k, and EM@K − EM@1."""
    from hiera.eval.paired import lost_and_gained, paired_ci

    first = read_ks[0]
    out: dict[str, Any] = {}
    for k in read_ks[1:]:
        out[f"lost@{k}"], out[f"gained@{k}"] = lost_and_gained(sc[f"em@{first}"], sc[f"em@{k}"])
        out[f"em@{k}-em@{first}"] = [round(x, 2) for x in paired_ci(sc[f"em@{k}"], sc[f"em@{first}"])]
    return out


def compare(scores: dict[str, dict[str, list[float]]], read_plan: dict[str, Any], read_ks: list[int],
            runs: dict[str, Any], tuned: bool, baselines: list[str]) -> list[dict[str, Any]]:
    """Every comparison the report claims, as a paired difference of EM with its 95% bootstrap interval."""
    from hiera.eval.paired import paired_ci

    out = []

    def add(name: str, a: list[float], b: list[float]) -> None:
        d, lo, hi = paired_ci(a, b)
        out.append({"comparison": name, "difference": d, "lo": lo, "hi": hi})

    first = read_ks[0]
    for label, plan in read_plan.items():
        if plan[1] is read_ks:
            for k in read_ks[1:]:
                add(f"{label}: EM@{k} - EM@{first}", scores[label][f"em@{k}"], scores[label][f"em@{first}"])
    suffixes = ["", "+tuned decoding"] if tuned else [""]
    for suffix in suffixes:
        if "dhr" + suffix in scores and "dense" + suffix in scores:
            for k in read_ks:
                add(f"dhr{suffix} - dense{suffix}: EM@{k}", scores["dhr" + suffix][f"em@{k}"],
                    scores["dense" + suffix][f"em@{k}"])
    if tuned:
        for label in runs:
            for k in read_ks:
                add(f"{label}: tuned - own decoding, EM@{k}", scores[label + "+tuned decoding"][f"em@{k}"],
                    scores[label][f"em@{k}"])
    for name in baselines:
        for label in runs:
            b = scores[f"baseline:{name}:{label}"]
            for k in read_ks:
                add(f"{label}: reader - {name}, EM@{k}", scores[label][f"em@{k}"], b[f"em@{k}"])
            for k in read_ks[1:]:  # reading more, for the baseline too
                add(f"{label}: {name} EM@{k} - EM@{first}", b[f"em@{k}"], b[f"em@{first}"])
    return out


def tune_and_save(args: argparse.Namespace, reader: Any, col: Any, retriever: Any, read_ks: list[int],
                  sep: str) -> dict[str, Any]:
    """:func:`tune_decoding`, printed, and with ``--save-decoding`` written into the reader."""
    t = time.perf_counter()
    tuned = tune_decoding(reader, col, retriever, args.tune_questions, read_ks, sep, args.tune_file)
    print(f"decoding tuned on {tuned['questions']} train questions in {time.perf_counter() - t:.0f}s: "
          f"{tuned['chosen']} ({tuned['chosen_em']})")
    if args.save_decoding:
        from hiera.read.calibrate import save_decoding

        save_decoding(args.reader, tuned["chosen"], tuned)
        print(f"saved into {args.reader}: its decoding from now on")
    return tuned


def gold_paragraph(col: Any, q: Any, cache: dict[str, list[list[Any]]]) -> list[Any]:
    """The passages of the question's whole SQuAD paragraph (what reading comprehension is given)."""
    from hiera.eval.questions import squad_passage_spans

    title = q.metadata["title"]
    if title not in cache:
        doc = col.store.get_document(title)
        stored = {p.id: p for _, p in col.store.iter_passages([title])}
        cache[title] = [[stored[pid] for _, _, pid in para] for para in squad_passage_spans(doc, col.store.rules)]
    return cache[title][q.metadata["paragraph"]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reader", type=Path, default=READER)
    ap.add_argument("--train", action="store_true", help="train the reader first if --reader holds none")
    ap.add_argument("--train-examples", type=int, default=4000)
    ap.add_argument("--train-minutes", type=float, default=100.0)
    ap.add_argument("--questions", type=int, default=300, help="dev questions (a seeded spread-out sample)")
    ap.add_argument("--retrievers", default="bm25,dense,dhr,hybrid")
    ap.add_argument("--read-ks", default="1,5,20,50")
    ap.add_argument("--baseline", type=Path, action="append", default=[],
                    help="another reader read on the same passages: every EM compared with it, paired (repeatable; "
                         "the first is the one the reader must beat by 3 points)")
    ap.add_argument("--tune-file", type=Path, default=None,
                    help="SQuAD train questions the reader never trained on, to tune its decoding on (default: the "
                         "44 train articles' questions outside the reader's training sample)")
    ap.add_argument("--save-decoding", action="store_true",
                    help="write the decoding tuned on train questions into --reader (its defaults from then on)")
    ap.add_argument("--tune-only", action="store_true", help="stop after tuning (and saving) the decoding")
    ap.add_argument("--rerank", type=Path, default=None,
                    help=f"cross-encoder for a reranked row of the best retriever (e.g. {RERANKER.relative_to(WORK.parent.parent)})")
    ap.add_argument("--latency-sample", type=int, default=30)
    ap.add_argument("--tune-questions", type=int, default=150,
                    help="train questions that choose passage_weight, rank_weight and merge (0: the reader's own only)")
    ap.add_argument("--fetchhr", type=Path, default=WORK / "fetchhr" / "heads",
                    help="FetchHR heads (hiera train-fetchhr) for Table 2 (skipped if absent)")
    ap.add_argument("--budget", type=int, default=30, help="Table 2: passages read, L×k for FetchHR, top-(L×k) for dense")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--name", default="reader", help="the report's name: bench/out/NAME.json")
    args = ap.parse_args()

    from hiera.builds import open_collection
    from hiera.eval.questions import load_questions
    from hiera.eval.read import score_answer
    from hiera.eval.run import evaluate_retriever
    from hiera.read.model import META_FILE
    from hiera.read.pipeline import title_line
    from hiera.read.reader import Reader
    from hiera.retrieve import get_retriever

    root = ensure_pooled()
    if not (args.reader / META_FILE).exists():
        if not args.train:
            raise SystemExit(f"no reader at {args.reader}: pass --train (or train one with hiera train-reader)")
        train(args, root)
    col = open_collection(root)
    sep = col.store.title_sep
    reader = Reader(args.reader)
    baselines = {str(p): Reader(p) for p in args.baseline}
    read_ks = sorted({int(x) for x in args.read_ks.split(",")})
    kmax = max(read_ks)
    dev = load_questions(data_dir() / "squad" / "dev-v1.1.first24.json", "squad", rules=col.store.rules)
    qs = spread_sample(dev, args.questions, args.seed)
    print(f"{len(qs)} of {len(dev)} SQuAD dev questions; reader {args.reader} ({reader.meta['train']['steps']} steps)")

    if args.tune_only:  # calibrate (and save) the decoding on train questions; no dev question is read
        tune_and_save(args, reader, col, get_retriever("dhr", col, **DHR_TUNED), read_ks, sep)
        return

    # 1. retrieve: each method's top passages (and its own top-k accuracy, latency)
    methods: dict[str, Any] = {}
    for name in [n.strip() for n in args.retrievers.split(",") if n.strip()]:
        methods[name] = get_retriever(name, col, **PINNED.get(name, {}))
    methods["dhr-tuned"] = get_retriever("dhr", col, **DHR_TUNED)
    runs: dict[str, Any] = {}
    for label, r in methods.items():
        t = time.perf_counter()
        runs[label] = evaluate_retriever(col, label, qs, (1, 5, kmax), retriever=r, progress=False,
                                         latency_sample=args.latency_sample)
        print(f"retrieved {label}: top1 {100 * runs[label].metrics['top1']:.1f} in {time.perf_counter() - t:.0f}s")
    best = max(runs, key=lambda n: runs[n].metrics["top1"])
    if args.rerank is not None:
        from hiera.crossencoder import Reranker
        from hiera.retrieve.rerank import RerankRetriever

        rr = RerankRetriever(methods[best], Reranker(args.rerank), depth=kmax)
        label = f"{best}+rerank"
        runs[label] = evaluate_retriever(col, label, qs, (1, 5, kmax), retriever=rr, progress=False,
                                         latency_sample=min(10, args.latency_sample))
        print(f"retrieved {label}: top1 {100 * runs[label].metrics['top1']:.1f}")

    tuned: dict[str, Any] = {}
    if args.tune_questions:
        tuned = tune_and_save(args, reader, col, methods["dhr-tuned"], read_ks, sep)
    decodings = {"": {}, **({"+tuned decoding": tuned["chosen"]} if tuned.get("chosen") else {})}

    # FetchHR's Table 2: every passage of the budget is read (L×k from the layers vs dense's top L×k)
    budget_runs: dict[str, Any] = {}
    if args.fetchhr.is_dir():
        for label, r in ((f"fetchhr@{args.budget}", get_retriever("fetchhr", col, model=args.fetchhr)),
                         (f"fetchhr-paper@{args.budget}",  # even split, a head on every layer (the paper's setting)
                          get_retriever("fetchhr", col, model=args.fetchhr, last_share=0.0, last_layer="head")),
                         (f"dense@{args.budget}", methods["dense"] if "dense" in methods else get_retriever("dense", col))):
            budget_runs[label] = evaluate_retriever(col, label, qs, sorted({1, 5, args.budget}), retriever=r,
                                                    progress=False, latency_sample=0)
            print(f"retrieved {label}: top{args.budget} {100 * budget_runs[label].metrics[f'top{args.budget}']:.1f}")
    # Table 2 reads the whole budget (the paper's); its first 1 and 5 read too, now that fetchhr's list is a ranking
    budget_ks = sorted({k for k in (1, 5) if k < args.budget} | {args.budget})
    read_plan = {**{lbl + suffix: (run, read_ks, dec) for lbl, run in runs.items() for suffix, dec in decodings.items()},
                 **{lbl: (run, budget_ks, {}) for lbl, run in budget_runs.items()}}

    # 2. read each question's union of passages once; decode every list (and the gold paragraph) from it
    para_cache: dict[str, list[list[Any]]] = {}
    scores: dict[str, dict[str, list[float]]] = {lbl: {} for lbl in [*read_plan, "reading-comprehension"]}
    t_read = time.perf_counter()
    for i, q in enumerate(qs):
        union = PassageUnion()
        lists: dict[str, list[int]] = {}
        for label, (run, ks, _) in read_plan.items():
            hits = [h for h in run.passage_runs[i].hits if h.passage_id][: max(ks)]
            lists[label] = [union.add(h.passage_id, title_line(h, sep), h.text) for h in hits]
        gold = [union.add(p.id, p.title(sep), p.text) for p in gold_paragraph(col, q, para_cache)]
        lg = reader.logits(q.text, union.pairs)
        blgs = {name: b.logits(q.text, union.pairs) for name, b in baselines.items()}
        for label, idx in lists.items():
            sub = lg.subset(idx)
            for k in read_plan[label][1]:
                ans = reader.decode(sub, upto=k, **read_plan[label][2])
                em, f1 = score_answer(ans[0].text if ans else "", q)
                scores[label].setdefault(f"em@{k}", []).append(em)
                scores[label].setdefault(f"f1@{k}", []).append(f1 or 0.0)
            for name, blg in blgs.items():  # each baseline with its own decoding, on the same passages
                if label not in runs:
                    continue
                bsub = blg.subset(idx)
                for k in read_ks:
                    ans = baselines[name].decode(bsub, upto=k)
                    em, f1 = score_answer(ans[0].text if ans else "", q)
                    scores.setdefault(f"baseline:{name}:{label}", {}).setdefault(f"em@{k}", []).append(em)
        # a paragraph's parts are not a retrieval ranking: no rank prior when reading the gold paragraph
        ans = reader.decode(lg.subset(gold), rank_weight=0.0)
        em, f1 = score_answer(ans[0].text if ans else "", q)
        scores["reading-comprehension"].setdefault("em", []).append(em)
        scores["reading-comprehension"].setdefault("f1", []).append(f1 or 0.0)
        if (i + 1) % 25 == 0:
            rc = 100 * np.mean(scores["reading-comprehension"]["em"])
            print(f"  read {i + 1}/{len(qs)} questions ({time.perf_counter() - t_read:.0f}s); RC EM so far {rc:.1f}")
    read_seconds = time.perf_counter() - t_read

    # 3. reading latency, honestly: one question at a time, each retriever's own top-k, no shared reading
    lat: dict[str, float] = {}
    for label, run in runs.items():
        ms = []
        for i, q in enumerate(qs[: args.latency_sample]):
            hits = [h for h in run.passage_runs[i].hits if h.passage_id][:kmax]
            t = time.perf_counter()
            reader.decode(reader.logits(q.text, [(title_line(h, sep), h.text) for h in hits]))
            ms.append((time.perf_counter() - t) * 1000.0)
        lat[label] = float(np.median(ms)) if ms else float("nan")

    rep = Report(args.name, columns=["method", *[f"EM@{k}" for k in read_ks], *[f"F1@{k}" for k in read_ks],
                                    f"lost@{kmax}", "top1", f"top{kmax}", "retrieve ms p50", "read ms p50"])
    rc = {k: 100 * float(np.mean(v)) for k, v in scores["reading-comprehension"].items()}
    rep.add({"method": "gold paragraph (reading comprehension)", f"EM@{read_ks[0]}": round(rc["em"], 1),
             f"F1@{read_ks[0]}": round(rc["f1"], 1)}, {"em": rc["em"] / 100, "f1": rc["f1"] / 100},
            key="reading-comprehension", echo=False)
    for label, (run, ks, dec) in read_plan.items():
        if ks is not read_ks:
            continue  # Table 2's budget rows, below
        base = label.split("+tuned")[0]
        m = {k: 100 * float(np.mean(v)) for k, v in scores[label].items()}
        more = more_evidence(scores[label], read_ks)
        row = {"method": label, **{f"EM@{k}": round(m[f"em@{k}"], 1) for k in read_ks},
               **{f"F1@{k}": round(m[f"f1@{k}"], 1) for k in read_ks},
               f"lost@{kmax}": round(100 * more[f"lost@{kmax}"], 1),
               "top1": round(100 * run.metrics["top1"], 1), f"top{kmax}": round(100 * run.metrics[f"top{kmax}"], 1),
               "retrieve ms p50": round(run.metrics.get("latency_ms_p50", float("nan")), 1),
               "read ms p50": round(lat[base], 1)}
        rep.add(row, {**{k: v / 100 for k, v in m.items()}, "top1": run.metrics["top1"], f"top{kmax}": run.metrics[f"top{kmax}"],
                      "retrieve_ms_p50": run.metrics.get("latency_ms_p50"), "read_ms_p50": lat[base],
                      "params": {k: str(v) for k, v in run.params.items()}, "decoding": dec, "more_evidence": more},
                key=label, echo=False)
    rep.print(f"Reader on {len(qs)} SQuAD dev questions (pooled corpus). EM/F1 in %, SQuAD v1.1 normalization; "
              f"lost@{kmax}: % of questions right at read-k {read_ks[0]} and wrong at {kmax}.")
    comparisons = compare(scores, read_plan, read_ks, runs, "+tuned decoding" in decodings, list(baselines))
    cmp_rep = Report(f"{args.name}-paired", columns=["comparison", "difference", "95% interval"])
    for c in comparisons:
        cmp_rep.add({"comparison": c["comparison"], "difference": round(c["difference"], 1),
                     "95% interval": f"[{c['lo']:+.1f}, {c['hi']:+.1f}]"}, echo=False)
    cmp_rep.print(f"Paired differences of EM in points over the same {len(qs)} questions (bootstrap, 2,000 rounds)")
    if budget_runs:
        fh, fp, dn = f"fetchhr@{args.budget}", f"fetchhr-paper@{args.budget}", f"dense@{args.budget}"
        first = [k for k in budget_ks if k < args.budget]
        t2 = Report("reader-fetchhr", columns=["method", "passages read", "EM", "F1", f"top{args.budget}",
                                               *[f"EM@{k}" for k in first], *[f"top{k}" for k in first]])
        for label in (dn, fh, fp):
            m = {k: 100 * float(np.mean(v)) for k, v in scores[label].items()}
            met = budget_runs[label].metrics
            t2.add({"method": label, "passages read": args.budget, "EM": round(m[f"em@{args.budget}"], 1),
                    "F1": round(m[f"f1@{args.budget}"], 1), f"top{args.budget}": round(100 * met[f"top{args.budget}"], 1),
                    **{f"EM@{k}": round(m[f"em@{k}"], 1) for k in first},
                    **{f"top{k}": round(100 * met[f"top{k}"], 1) for k in first}},
                   {"em": m[f"em@{args.budget}"] / 100, "f1": m[f"f1@{args.budget}"] / 100,
                    f"top{args.budget}": met[f"top{args.budget}"],
                    **{f"em@{k}": m[f"em@{k}"] / 100 for k in first}, **{f"top{k}": met[f"top{k}"] for k in first}},
                   key=label, echo=False)
            rep.results[label] = t2.results[label]
        t2.print(f"FetchHR Table 2: the reader over {args.budget} passages (paper: EM +1.9 NQ, +2.1 WebQuestions "
                 "over DPR at the same budget, BERT-base reader)")
    open_best = max((lbl for lbl, plan in read_plan.items() if plan[1] is read_ks), key=lambda n: np.mean(scores[n][f"em@{read_ks[0]}"]))
    best_em = max(100 * float(np.mean(scores[open_best][f"em@{k}"])) for k in read_ks)
    suffix = "+tuned decoding" if "+tuned decoding" in decodings else ""  # compare dhr and dense decoded alike
    dense_em = max(100 * float(np.mean(scores["dense" + suffix][f"em@{k}"])) for k in read_ks) if "dense" in methods else None
    dhr_em = max(100 * float(np.mean(scores["dhr" + suffix][f"em@{k}"])) for k in read_ks) if "dhr" in methods else None
    targets = {
        "reading_comprehension_em>=55": {"value": rc["em"], "met": rc["em"] >= 55},
        "open_domain_best_em>=40": {"value": best_em, "method": open_best, "met": best_em >= 40},
        "dhr_em>=dense_em+2": {"dhr": dhr_em, "dense": dense_em,
                               "met": None if dhr_em is None or dense_em is None else dhr_em >= dense_em + 2},
        # reading more never loses on average: EM at the deepest read-k at least EM at the first, every list
        f"em@{kmax}>=em@{read_ks[0]}": {
            label: {"difference_ci95": rep.results[label]["more_evidence"][f"em@{kmax}-em@{read_ks[0]}"],
                    "met": rep.results[label]["more_evidence"][f"em@{kmax}-em@{read_ks[0]}"][0] >= 0}
            for label, plan in read_plan.items() if plan[1] is read_ks},
    }
    for j, name in enumerate(baselines):
        if "dhr" in runs:
            c = next(c for c in comparisons if c["comparison"] == f"dhr: reader - {name}, EM@{read_ks[0]}")
            more = next(c for c in comparisons if c["comparison"] == f"dhr: {name} EM@{kmax} - EM@{read_ks[0]}")
            targets[f"dhr_em@{read_ks[0]} - {name}"] = {
                "difference": c["difference"], "ci95": [c["lo"], c["hi"]],
                **({"target": ">= +3", "met": c["difference"] >= 3} if j == 0 else {}),
                f"baseline em@{kmax}>=em@{read_ks[0]}": {"difference_ci95": [more["difference"], more["lo"], more["hi"]],
                                                         "met": more["difference"] >= 0}}
    print("targets:", targets)
    rep.write(questions=len(qs), sample_seed=args.seed, reader=str(args.reader), reader_meta=reader.meta,
              training={"seconds": reader.meta["train"]["seconds"], "steps": reader.meta["train"]["steps"],
                        "peak_rss_mb": reader.meta.get("peak_rss_mb"), "examples": reader.meta["examples"]},
              read_seconds=round(read_seconds, 1), targets=targets, dhr_tuned=DHR_TUNED,
              comparisons=comparisons, baselines=list(baselines),
              baseline_results={k: {m: float(np.mean(v)) for m, v in sc.items()}
                                for k, sc in scores.items() if k.startswith("baseline:")},
              fetchhr={"heads": str(args.fetchhr), "budget": args.budget} if budget_runs else None,
              decoding_tuning=tuned)


if __name__ == "__main__":
    main()
