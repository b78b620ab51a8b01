"""Choose the reader's training recipe on held-back *train* articles, and bring the chosen reader home.

    # on a lent GPU, one command (about 4 minutes on an H100; see bench/README):
    python -m bench.reader_grid --device cuda
    # the same end to end on a CPU at toy scale (minutes, figures meaningless):
    python -m bench.reader_grid --grid tiny --device cpu --max-examples 64 --eval-questions 40
    # back here: the returned parts into a reader directory, then the open-domain evaluation
    python -m bench.reader_parts unpack PARTS_DIR bench/work/reader/grid
    python -m bench.reader --reader bench/work/reader/grid ...

The 44 articles of ``train-du2017-44articles.json`` are split by article
(seeded): ``--held-out`` articles (8: 1,789 questions) are held back, the
rest (10,088 questions) train. SQuAD dev is never read here. Each recipe of
the grid trains a fresh reader from all-MiniLM-L6-v2 on the training
articles (the Trainer loop of ``hiera train-reader``:
:func:`hiera.train.reader.fit_reader`) and is judged on the held-back
articles, no big index needed:

* reading comprehension: every held-back question's gold SQuAD paragraph
  given as its ≤100-word passages (``bench.reader``'s reading-comprehension
  row): the span head;
* open domain in small: ``--open-questions`` of them read over their BM25
  top 20 among the held-back articles' passages (EM@1, EM@5, EM@20): the
  selection head must pick the right passage among same-article look-alikes.

A recipe's score is the mean of its reading-comprehension EM and its EM@5;
the best score is the chosen recipe, and every other recipe gets a paired
bootstrap interval of its difference to the chosen one. The chosen reader
also reads each question's whole paragraph as one passage, both as the
reader reads a long passage (cut into the parts the corpus would make) and
in token windows alone, against its ≤100-word parts (paired intervals), and
its decoding weights (selection, retrieval-rank prior, merge) are
calibrated on its open-domain readings so that EM@20 and EM@5 are at least
EM@1 there (:mod:`hiera.read.calibrate`), and written into the reader.
With ``--refit`` and time left it is trained again on all 44 articles (and
decodes with the weights calibrated for the grid's winner).

The chosen reader is written under ``$OUT`` (else ``bench/out/reader-grid``)
as float16 parts (:mod:`bench.reader_parts`: at most 8 files of 16 MiB)
beside ``reader-grid.json`` (every recipe's figures, the split, timings),
rewritten whenever the best changes, so a run cut short still brings home
the best reader so far. ``--budget-minutes`` is the command's wall clock: a
recipe predicted to overrun it is skipped (and listed so), one overrunning
it is stopped early.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import REPO, WORK, data_dir, ensure_collection
from hiera.eval.paired import paired_ci

# Batches of 64 on a GPU: four times the CPU's batch of 16 at 1e-4 wants a higher rate than the 5e-5 the first
# GPU recipe used; a plain span head on this model did best with 2e-4 for 4 epochs. On an H100 an epoch of the
# ~10,000 training-article questions with one negative is ~12 s (the first GPU recipe: 372 steps of 64 in 29 s),
# so each recipe is ~25-40 s. The learning rate is chosen first; "best" is the rate of the best recipe so far, so
# the later recipes (more epochs, more negatives, longer windows) spend the budget around it. In this order a
# budget cut drops the long shots.
GPU_BASE = {"batch_size": 64, "warmup_ratio": 0.1, "stride": 64, "max_length": 256, "freeze_embeddings": False,
            "negatives": 1}
GPU_GRID: list[dict[str, Any]] = [
    {"name": "lr2e-4-ep2", "learning_rate": 2e-4, "epochs": 2.0},
    {"name": "lr4e-4-ep2", "learning_rate": 4e-4, "epochs": 2.0},
    {"name": "lr1e-4-ep2", "learning_rate": 1e-4, "epochs": 2.0},
    {"name": "best-lr-ep3", "learning_rate": "best", "epochs": 3.0},
    {"name": "best-lr-ep2-neg2", "learning_rate": "best", "epochs": 2.0, "negatives": 2},
    {"name": "best-lr-ep2-len384-frozen", "learning_rate": "best", "epochs": 2.0, "max_length": 384, "stride": 128,
     "freeze_embeddings": True},
]
# the CPU check of the whole path: two recipes, small batches, a few steps
TINY_BASE = {"batch_size": 8, "warmup_ratio": 0.1, "stride": 32, "max_length": 160, "freeze_embeddings": True,
             "negatives": 1}
TINY_GRID: list[dict[str, Any]] = [
    {"name": "tiny-lr3e-4", "learning_rate": 3e-4, "epochs": 1.0},
    {"name": "tiny-best-lr-neg2", "learning_rate": "best", "epochs": 1.0, "negatives": 2},
]
GRIDS = {"gpu": (GPU_BASE, GPU_GRID), "tiny": (TINY_BASE, TINY_GRID)}
TRAIN_FILE = "squad/train-du2017-44articles.json"
OPEN_K = 5  # a recipe is judged at this read-k of the held-back open-domain reading ...
OPEN_KS = (1, 5, 20)  # ... which reads this deep (the decoding calibration reads them all)


def split_articles(data: dict[str, Any], held_out: int, seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """(training articles, held-back articles) as two SQuAD files' contents: a seeded choice of whole articles."""
    arts = data["data"]
    if not 0 < held_out < len(arts):
        raise SystemExit(f"--held-out must be between 1 and {len(arts) - 1} articles")
    held = set(random.Random(seed).sample(range(len(arts)), held_out))
    part = lambda keep: {"version": data.get("version", "1.1"), "data": [a for i, a in enumerate(arts) if keep(i)]}  # noqa: E731
    return part(lambda i: i not in held), part(lambda i: i in held)


def squad_collection(root: Path, content: dict[str, Any]) -> Path:
    """A BM25-only collection of one SQuAD file's articles (reused when it already holds the same file)."""
    from hiera.index.build import BuildOptions

    src = root.with_suffix(".json")
    text = json.dumps(content)
    if root.exists() and (not src.exists() or src.read_text(encoding="utf-8") != text):
        shutil.rmtree(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    src.write_text(text, encoding="utf-8")
    ensure_collection(root, [([src], "squad")], options=BuildOptions(dense=False))
    return src


def held_items(root: Path, src: Path, limit: int | None, seed: int) -> tuple[list[Any], list[Any], list[Any]]:
    """(questions, their paragraphs as passages, their paragraphs whole) of the held-back articles."""
    from bench.reader import gold_paragraph, spread_sample
    from hiera.builds import open_collection
    from hiera.eval.questions import load_questions

    col = open_collection(root)
    sep = col.store.title_sep
    qs = load_questions(src, "squad", rules=col.store.rules)
    if limit:
        qs = spread_sample(qs, limit, seed)
    cache: dict[str, list[list[Any]]] = {}
    parts, whole = [], []
    for q in qs:
        ps = gold_paragraph(col, q, cache)
        parts.append([(p.title(sep), p.text) for p in ps])
        whole.append([(ps[0].title(sep), " ".join(p.text for p in ps))])
    return qs, parts, whole


def held_bm25(root: Path, qs: list[Any], k: int) -> list[list[tuple[str, str]]]:
    """Each question's top ``k`` BM25 passages among the held-back articles' (its paragraph among look-alikes)."""
    from hiera.builds import open_collection
    from hiera.read.pipeline import title_line
    from hiera.retrieve import get_retriever

    col = open_collection(root)
    sep = col.store.title_sep
    runs = get_retriever("bm25", col).batch_search([q.text for q in qs], k=k, level="passage")
    return [[(title_line(h, sep), h.text) for h in r.hits if h.passage_id is not None] for r in runs]


class Judge:
    """Reads one set of questions with any reader; windows are made once per window length and reused."""

    def __init__(self, qs: list[Any], passages: list[list[tuple[str, str]]], part_words: int | None = None,
                 ranked: bool = True) -> None:
        """``part_words``: how the reader cuts long passages (None: its default, 0: token windows only);
        ``ranked``: the passages are a retrieval ranking (else a paragraph's parts: no rank prior)."""
        self.qs, self.passages, self.part_words, self.ranked = qs, passages, part_words, ranked
        self.cache: dict[tuple[int, int, int], list[Any]] = {}

    def __call__(self, reader: Any, ks: tuple[int, ...] | None = None) -> dict[str, Any]:
        """EM/F1 (in %) at each read-k (``None``: every passage) with the reader's decoding, each question's EM,
        and each question's candidate spans (``spans``: what a decoding calibration re-scores)."""
        from hiera.eval.read import score_answer
        from hiera.read.calibrate import spans_of, top_answer

        p = reader.params()
        words = p["part_words"] if self.part_words is None else self.part_words
        key = (reader.meta["max_length"], reader.meta["stride"], words)
        if key not in self.cache:
            self.cache[key] = [reader.windows(q.text, ps, words) for q, ps in zip(self.qs, self.passages, strict=True)]
        lgs = reader.logits_many([(q.text, ps) for q, ps in zip(self.qs, self.passages, strict=True)], self.cache[key])
        spans = [spans_of(lg, p["max_answer_tokens"]) for lg in lgs]
        out: dict[str, Any] = {"spans": spans}
        for k in ks or (None,):
            ems, f1s = [], []
            for q, sp, ps in zip(self.qs, spans, self.passages, strict=True):
                pred = top_answer(sp, len(ps) if k is None else k, p["passage_weight"],
                                  p["rank_weight"] if self.ranked else 0.0, p["merge"])
                em, f1 = score_answer(pred, q)
                ems.append(em)
                f1s.append(f1 or 0.0)
            tag = "" if k is None else f"@{k}"
            out[f"em{tag}"], out[f"f1{tag}"] = 100 * float(np.mean(ems)), 100 * float(np.mean(f1s))
            out[f"per_question{tag}"] = ems
        return out


def calibrate_decoding(judge: Judge, spans: list[Any], ks: tuple[int, ...]) -> dict[str, Any]:
    """The chosen reader's decoding weights, chosen on the held-back open-domain readings (train articles)."""
    from hiera.eval.read import score_answer
    from hiera.read.calibrate import calibrate, grid_of
    from hiera.spec import reader_spec

    readings = [(sp, lambda pred, q=q: score_answer(pred, q)[0]) for sp, q in zip(spans, judge.qs, strict=True)]
    return calibrate(readings, ks, grid_of(reader_spec()))


class Groups:
    """Training groups per (negatives, window) setting, built once and shared by the recipes that use it."""

    def __init__(self, root: Path, questions: list[Any], tokenizer: Any) -> None:
        from hiera.builds import open_collection
        from hiera.train.pool import PassagePool

        self.col = open_collection(root)
        self.pool = PassagePool.from_collection(self.col)
        self.questions = questions
        self.tokenizer = tokenizer
        self.cache: dict[tuple[int, int, int, int], tuple[list[Any], Any]] = {}
        self.per_window = 0.0  # seconds to prepare one training window, from the settings built so far

    def predict(self, args: Any) -> float:
        """Seconds :meth:`get` will take for ``args`` (0 when built already)."""
        if (args.negatives, args.max_length, args.stride, args.seed) in self.cache:
            return 0.0
        return self.per_window * len(self.questions) * (1 + args.negatives)

    def get(self, args: Any) -> tuple[list[Any], Any]:
        from hiera.train.reader import reader_groups

        key = (args.negatives, args.max_length, args.stride, args.seed)
        if key not in self.cache:
            t = time.perf_counter()
            self.cache[key] = reader_groups(self.col, self.pool, self.tokenizer, self.questions, args)
            took = time.perf_counter() - t
            self.per_window = max(self.per_window, took / max(1, len(self.questions) * (1 + args.negatives)))
            print(f"  groups {key[:3]}: {len(self.cache[key][0])} in {took:.1f}s", flush=True)
        return self.cache[key]


def train_one(groups: list[Any], rargs: Any, work: Path) -> tuple[Any, Any, Any, dict[str, Any]]:
    """(model, tokenizer, fit, its training report) of one recipe, from a fresh base model."""
    import transformers

    from hiera.train.common import run_report, train_device
    from hiera.train.reader import base_reader, fit_reader

    transformers.set_seed(rargs.seed)
    tokenizer, model = base_reader(rargs)
    if work.exists():
        shutil.rmtree(work)
    fit = fit_reader(model, groups, rargs, work)
    rep = run_report(fit.trainer, fit.result, fit.seconds, fit.callbacks, None, train_device(rargs))
    shutil.rmtree(work, ignore_errors=True)
    return model, tokenizer, fit, rep


def free() -> None:
    """Give back the memory of a recipe's model before the next one trains."""
    gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except ImportError:
        pass


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """The whole run (``argv``: this module's command-line arguments); returns what ``reader-grid.json`` holds.

    ``bench.gpu`` may call it inside its own run: ``main(["--device", "cuda", "--out", DIR])``.
    """
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--train-file", type=Path, default=None, help=f"SQuAD-format articles (default ../shared/data/{TRAIN_FILE})")
    ap.add_argument("--held-out", type=int, default=8, help="articles held back to judge the recipes")
    ap.add_argument("--seed", type=int, default=0, help="which articles are held back")
    ap.add_argument("--grid", choices=sorted(GRIDS), default="gpu")
    ap.add_argument("--only", default=None, help="comma-separated recipe names of the grid to run")
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--max-examples", type=int, default=None, help="cap the training questions (a CPU check)")
    ap.add_argument("--eval-questions", type=int, default=None, help="cap the held-back questions (a CPU check)")
    ap.add_argument("--open-questions", type=int, default=400,
                    help=f"held-back questions also read over their BM25 top {OPEN_KS[-1]} among the held-back articles")
    ap.add_argument("--budget-minutes", type=float, default=4.0,
                    help="wall clock of the whole command: a recipe predicted to overrun it is skipped, one "
                         "overrunning it is stopped; the best reader so far is always written")
    ap.add_argument("--refit", action="store_true", help="train the chosen recipe again on all articles, time allowing")
    ap.add_argument("--out", type=Path, default=None, help="where the parts and JSON go (default $OUT, else bench/out/reader-grid)")
    ap.add_argument("--keep", type=Path, default=None, help="also keep the chosen reader directory here (float32)")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    from hiera.corpus.store import CorpusStore
    from hiera.eval.questions import load_questions
    from hiera.models import resolve_device
    from hiera.read.reader import Reader
    from hiera.train.args import ReaderArgs
    from hiera.train.common import sample_questions
    from hiera.train.reader import base_reader

    device = resolve_device(args.device)
    out = args.out or Path(os.environ.get("OUT") or REPO / "bench" / "out" / "reader-grid")
    out.mkdir(parents=True, exist_ok=True)
    train_file = args.train_file or data_dir() / TRAIN_FILE
    data = json.loads(train_file.read_text(encoding="utf-8"))
    train_part, held_part = split_articles(data, args.held_out, args.seed)
    work = WORK / "reader-grid" / f"{train_file.stem}-seed{args.seed}-held{args.held_out}"
    t = time.perf_counter()
    train_src = squad_collection(work / "train", train_part)
    held_src = squad_collection(work / "held", held_part)
    store = CorpusStore(work / "train")
    train_qs = sample_questions(load_questions(train_src, "squad", rules=store.rules), args.max_examples, 42)
    store.close()
    held_qs, held_parts, held_whole = held_items(work / "held", held_src, args.eval_questions, args.seed)
    from bench.reader import spread_sample

    open_qs = spread_sample(held_qs, args.open_questions, args.seed)
    rc_judge, whole_judge = Judge(held_qs, held_parts, ranked=False), Judge(held_qs, held_whole, ranked=False)
    windowed_judge = Judge(held_qs, held_whole, part_words=0, ranked=False)
    open_judge = Judge(open_qs, held_bm25(work / "held", open_qs, OPEN_KS[-1]))
    print(f"{len(train_part['data'])} training articles ({len(train_qs)} questions), {len(held_part['data'])} held back "
          f"({len(held_qs)} questions): {', '.join(a['title'] for a in held_part['data'])}; prepared in "
          f"{time.perf_counter() - t:.1f}s on {device}", flush=True)

    base, grid = GRIDS[args.grid]
    if args.only:
        names = {n.strip() for n in args.only.split(",")}
        grid = [g for g in grid if g["name"] in names]
        if not grid:
            raise SystemExit(f"--only names none of the {args.grid} grid's recipes")
    tokenizer, _ = base_reader(ReaderArgs(progress=False))
    groups = Groups(work / "train", train_qs, tokenizer)
    deadline = t_start + 60 * args.budget_minutes
    reserve = 20.0  # the last packing and the whole-paragraph reading of the chosen reader
    rate = None  # training windows per second, from the recipes run so far
    judge_s = 0.0
    spent = 0.0
    results: list[dict[str, Any]] = []
    best: dict[str, Any] | None = None
    best_dir = work / "best"
    state = {"train_file": str(train_file), "device": device, "seed": args.seed,
             "held_out_articles": [a["title"] for a in held_part["data"]],
             "training_questions": len(train_qs), "held_back_questions": len(held_qs)}
    for cfg in grid:
        recipe = {**base, **{k: v for k, v in cfg.items() if k != "name"}}
        if recipe["learning_rate"] == "best":  # the rate of the best recipe so far
            recipe["learning_rate"] = best["recipe"]["learning_rate"] if best else 2e-4
        left = deadline - time.perf_counter() - reserve
        rargs = ReaderArgs(**recipe, device=args.device, progress=False, save_steps=10**9).check()
        windows = recipe["epochs"] * len(train_qs) * (1 + recipe["negatives"])
        predicted = windows / rate + judge_s + groups.predict(rargs) if rate else None
        if predicted is not None and predicted > left:
            print(f"{cfg['name']}: skipped (predicted {predicted:.0f}s, {left:.0f}s of the budget left)", flush=True)
            results.append({"name": cfg["name"], "recipe": recipe, "skipped": True, "predicted_s": round(predicted, 1)})
            continue
        gs, grep = groups.get(rargs)
        rargs.max_minutes = max(0.1, (deadline - time.perf_counter() - reserve - judge_s) / 60)
        model, tok, fit, rep = train_one(gs, rargs, work / "run")
        spent += fit.seconds
        rate = rep["steps"] * rargs.batch_size * (1 + rargs.negatives) / fit.seconds if fit.seconds > 0 else rate
        meta = {"max_length": rargs.max_length, "stride": rargs.stride}
        reader = Reader.from_model(model, tok, meta, name=cfg["name"], device=args.device, batch_size=128)
        t = time.perf_counter()
        rc = rc_judge(reader)
        od = open_judge(reader, OPEN_KS)
        judge_s = time.perf_counter() - t
        score = (rc["em"] + od[f"em@{OPEN_K}"]) / 2
        row = {"name": cfg["name"], "recipe": recipe, "score": round(score, 2),
               "rc_em": round(rc["em"], 2), "rc_f1": round(rc["f1"], 2),
               **{f"open_{m}@{k}": round(od[f"{m}@{k}"], 2) for k in OPEN_KS for m in ("em", "f1")},
               "train": rep, "groups": len(gs), "judge_s": round(judge_s, 1), "per_question": rc["per_question"],
               "per_question_open": od[f"per_question@{OPEN_K}"], "spans_open": od["spans"]}
        results.append(row)
        print(f"{cfg['name']}: held-back reading comprehension EM {rc['em']:.1f} F1 {rc['f1']:.1f}, over BM25 "
              + ", ".join(f"EM@{k} {od[f'em@{k}']:.1f}" for k in OPEN_KS) + f"; {rep['steps']} steps in {fit.seconds:.0f}s "
              f"(loss {'not logged' if rep['train_loss'] is None else format(rep['train_loss'], '.3f')}{', stopped by the budget' if rep['stopped_by_budget'] else ''}); "
              f"judged in {judge_s:.0f}s", flush=True)
        if best is None or (score, rc["f1"]) > (best["score"], best["rc_f1"]):
            best = row
            best["whole"] = {}
            for how, jd in (("as_parts", whole_judge), ("token_windows", windowed_judge)):
                whole = jd(reader)
                best["whole"][how] = {
                    "em": round(whole["em"], 2), "f1": round(whole["f1"], 2),
                    "minus_parts_ci95": [round(x, 2) for x in paired_ci(whole["per_question"], rc["per_question"])]}
            keep_best(model, tok, best_dir, meta, rargs, grep, rep, work, held_part, row, out)
        del reader, model, tok, fit
        free()
        write_report(out, state, results, best, spent, t_start)
    if best is None:
        raise SystemExit("no recipe ran")
    from hiera.read.calibrate import save_decoding

    t = time.perf_counter()
    cal = calibrate_decoding(open_judge, best["spans_open"], OPEN_KS)
    state["decoding"] = cal
    save_decoding(best_dir, cal["chosen"], cal)
    pack_into(best_dir, out)
    plain = best
    print(f"decoding calibrated on {cal['questions']} held-back questions in {time.perf_counter() - t:.0f}s: "
          f"{cal['chosen']} -> EM " + " / ".join(f"@{k} {cal['chosen_em'][f'em@{k}']:.1f}" for k in OPEN_KS)
          + " (registry defaults: " + " / ".join(f"@{k} {plain[f'open_em@{k}']:.1f}" for k in OPEN_KS) + ")",
          flush=True)
    if args.refit:
        recipe = best["recipe"]
        n_all = len(train_qs) + len(held_qs)
        left = deadline - time.perf_counter() - reserve
        predicted = recipe["epochs"] * n_all * (1 + recipe["negatives"]) / rate if rate else None
        if predicted is not None and predicted <= left:
            chosen, state["refit"] = refit_all(train_file, work, recipe, args, data)
            spent += state["refit"]["train"]["seconds"]
            # its own calibration would read articles it trained on: it decodes with the grid winner's weights
            save_decoding(chosen, cal["chosen"], {**cal, "calibrated_on": "the grid's chosen reader"})
            pack_into(chosen, out)
        else:
            state["refit"] = {"skipped": True, "predicted_s": None if predicted is None else round(predicted, 1)}
            print(f"refit skipped: predicted {predicted}s, {left:.0f}s of the budget left")
    report = write_report(out, state, results, best, spent, t_start)
    if args.keep:
        if args.keep.exists():
            shutil.rmtree(args.keep)
        shutil.copytree(work / "refit" if state.get("refit", {}).get("questions") else best_dir, args.keep)
    heads = " | ".join(f"BM25 EM@{k}" for k in OPEN_KS)
    print(f"\n| recipe | score | RC EM | RC F1 | {heads} | steps | train s |\n|---|---|---|---|"
          + "---|" * len(OPEN_KS) + "---|---|")
    for r in results:
        if r.get("skipped"):
            print(f"| {r['name']} | skipped |" + " |" * (len(OPEN_KS) + 4))
        else:
            ems = " | ".join(f"{r[f'open_em@{k}']:.1f}" for k in OPEN_KS)
            print(f"| {r['name']} | {r['score']:.1f} | {r['rc_em']:.1f} | {r['rc_f1']:.1f} | {ems} | "
                  f"{r['train']['steps']} | {r['train']['seconds']:.0f} |")
    print(f"chosen: {best['name']} ({best['recipe']}); whole paragraphs read as one passage: {best['whole']}")
    print(f"parts in {out}: {', '.join(report['parts'])}; {time.perf_counter() - t_start:.0f}s in all")
    return report


def keep_best(model: Any, tok: Any, best_dir: Path, meta: dict[str, Any], rargs: Any, grep: Any, rep: dict[str, Any],
              work: Path, held_part: dict[str, Any], row: dict[str, Any], out: Path) -> None:
    """Save the best reader so far and write its parts now: a run cut short still brings one home."""
    from hiera.read.model import save_reader

    if best_dir.exists():
        shutil.rmtree(best_dir)
    dev = next(model.parameters()).device
    save_reader(model.float().cpu(), tok, best_dir, {
        **meta, "args": rargs.to_dict(), "base_model": {"name": str(rargs.base_model)},
        "collection": str(work / "train"), "examples": vars(grep), "train": rep,
        "chosen_on": {"held_out_articles": [a["title"] for a in held_part["data"]], "rc_em": row["rc_em"],
                      "rc_f1": row["rc_f1"], "recipe": row["name"]}})
    model.to(dev)
    pack_into(best_dir, out)


def pack_into(reader_dir: Path, out: Path) -> None:
    from bench.reader_parts import MANIFEST, PART, pack

    for f in out.glob(PART.replace("{:02d}", "*")):
        f.unlink()
    (out / MANIFEST).unlink(missing_ok=True)
    pack(reader_dir, out)


def write_report(out: Path, state: dict[str, Any], results: list[dict[str, Any]], best: dict[str, Any] | None,
                 spent: float, t_start: float) -> dict[str, Any]:
    """``reader-grid.json``: every recipe's figures so far, paired intervals against the best, the parts."""
    from bench.reader_parts import MANIFEST, PART

    rows = []
    for r in results:
        row = {k: v for k, v in r.items() if not k.startswith(("per_question", "spans"))}
        if best is not None and not r.get("skipped") and r is not best:
            row["best_minus_this_ci95"] = {
                "rc_em": [round(x, 2) for x in paired_ci(best["per_question"], r["per_question"])],
                f"open_em@{OPEN_K}": [round(x, 2) for x in paired_ci(best["per_question_open"], r["per_question_open"])]}
        rows.append(row)
    report = {**state, "chosen": best and best["name"], "chosen_recipe": best and best["recipe"],
              "chosen_whole_paragraphs": best and best.get("whole"), "recipes": rows,
              "training_seconds": round(spent, 1), "seconds": round(time.perf_counter() - t_start, 1),
              "parts": sorted(f.name for f in out.glob(PART.replace("{:02d}", "*"))) + [MANIFEST]}
    (out / "reader-grid.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    return report


def refit_all(train_file: Path, work: Path, recipe: dict[str, Any], args: argparse.Namespace,
              data: dict[str, Any]) -> tuple[Path, dict[str, Any]]:
    """The chosen recipe trained again on every article (no held-back figure can judge it: it saw them)."""
    from hiera.corpus.store import CorpusStore
    from hiera.eval.questions import load_questions
    from hiera.read.model import save_reader
    from hiera.train.args import ReaderArgs
    from hiera.train.common import sample_questions
    from hiera.train.reader import base_reader

    src = squad_collection(work / "all", data)
    store = CorpusStore(work / "all")
    qs = sample_questions(load_questions(src, "squad", rules=store.rules), args.max_examples, 42)
    store.close()
    rargs = ReaderArgs(**recipe, device=args.device, progress=False, save_steps=10**9).check()
    tokenizer, _ = base_reader(rargs)
    gs, grep = Groups(work / "all", qs, tokenizer).get(rargs)
    model, tok, fit, rep = train_one(gs, rargs, work / "run")
    dest = work / "refit"
    if dest.exists():
        shutil.rmtree(dest)
    save_reader(model.float().cpu(), tok, dest, {
        "max_length": rargs.max_length, "stride": rargs.stride, "args": rargs.to_dict(),
        "base_model": {"name": str(rargs.base_model)}, "collection": str(train_file), "examples": vars(grep),
        "train": rep})
    print(f"refit on all {len(qs)} questions: {rep['steps']} steps in {fit.seconds:.0f}s", flush=True)
    return dest, {"questions": len(qs), "train": rep}


if __name__ == "__main__":
    main()
