"""The GPU recipe for the reader (issue 32): all of SQuAD v1.1 train, then the issue-14 table again.

    # 1. once: put the official SQuAD v1.1 train file under bench/work (git-ignored, never committed)
    python -m bench.gpu_reader --squad-train /path/to/train-v1.1.json
    # 2. on a GPU machine: ingest it (BM25 only), train the reader, evaluate on the pooled corpus
    python -m bench.gpu_reader [--questions 5696]
    # the same recipe end to end on a CPU, on a slice (minutes, figures meaningless):
    python -m bench.gpu_reader --train-file ../shared/data/squad/train-du2017-44articles.json \\
        --max-examples 200 --max-minutes 3 --batch-size 8 --questions 30

Steps:

1. ``--squad-train PATH`` checks the file is the official one (size and
   sha256 below, the values the SQuAD authors' release has) and copies it to
   ``bench/work/squad/train-v1.1.json``. hiera never downloads it: get the
   file from the SQuAD authors' release (or a public repository that carries
   it unchanged) on a machine with network access and carry it over; a GPU
   machine may have none.
2. The train file is ingested into its own collection,
   ``bench/work/reader-train-<file stem>`` (``--format squad``, BM25 only:
   the reader's positives are the gold paragraphs and its negatives BM25
   passages without the answer).
3. ``hiera train-reader`` with the GPU recipe (:data:`GPU_RECIPE`, train-reader's
   defaults on cuda: batches of 64 questions, 3 epochs, 256-token windows,
   word embeddings trained too, learning rate 4e-4, bf16 on the GPU) into
   ``bench/work/reader/gpu-<file stem>``;
   ``--max-examples`` / ``--max-minutes`` / ``--batch-size`` / ``--epochs``
   override it. Rerunning resumes from the last checkpoint.
4. ``python -m bench.reader --reader THAT_DIR --questions N --name reader-gpu``:
   reading comprehension EM/F1 on the gold paragraph and open-domain
   EM@1/5/20 for bm25, dense, dhr and hybrid over the pooled corpus
   (``bench/out/reader-gpu.json``). The targets (issue 32): reading
   comprehension EM ≥ 65, best open-domain EM@5 ≥ 40.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

from bench.common import REPO, WORK, ensure_collection
from hiera.train.args import READER_DEVICE_DEFAULTS

# The official SQuAD v1.1 training set (Rajpurkar et al., 2016): 442 articles, 87,599 questions.
SQUAD_TRAIN_SIZE = 30_288_272
SQUAD_TRAIN_SHA256 = "3527663986b8295af4f7fcdff1ba1ff3f72d07d61a20f487cb238a6ef92fd955"
SQUAD_TRAIN = WORK / "squad" / "train-v1.1.json"
# hiera train-reader's own defaults on cuda (chosen by bench.reader_grid), checkpointed every 500 steps: all
# 87,599 questions for 3 epochs is about 4,100 steps of 64 (the grid's 474 steps took 15 s on an H200)
GPU_RECIPE = {**READER_DEVICE_DEFAULTS["cuda"], "save_steps": 500}


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def keep_official(src: Path) -> Path:
    """Check ``src`` is the official train file and copy it under bench/work (git-ignored)."""
    size = src.stat().st_size
    digest = sha256(src)
    if size != SQUAD_TRAIN_SIZE or digest != SQUAD_TRAIN_SHA256:
        raise SystemExit(f"{src}: {size} bytes, sha256 {digest[:16]}…: not the official SQuAD v1.1 train file "
                         f"({SQUAD_TRAIN_SIZE} bytes, sha256 {SQUAD_TRAIN_SHA256[:16]}…)")
    SQUAD_TRAIN.parent.mkdir(parents=True, exist_ok=True)
    tmp = SQUAD_TRAIN.with_suffix(".partial")
    shutil.copyfile(src, tmp)
    tmp.rename(SQUAD_TRAIN)
    print(f"kept {SQUAD_TRAIN} (official: {size} bytes, sha256 {digest[:16]}…)")
    return SQUAD_TRAIN


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--squad-train", type=Path, default=None, help="step 1: the official train-v1.1.json to keep")
    ap.add_argument("--train-file", type=Path, default=SQUAD_TRAIN, help="SQuAD-format training questions")
    ap.add_argument("--out", type=Path, default=None, help="reader directory (default bench/work/reader/gpu-<stem>)")
    ap.add_argument("--max-examples", type=int, default=None)
    ap.add_argument("--max-minutes", type=float, default=None)
    ap.add_argument("--batch-size", type=int, default=None)
    ap.add_argument("--epochs", type=float, default=None)
    ap.add_argument("--max-length", type=int, default=None)
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--questions", type=int, default=5696, help="SQuAD dev questions bench.reader evaluates")
    ap.add_argument("--name", default="reader-gpu", help="bench.reader's report: bench/out/NAME.json")
    ap.add_argument("--skip-eval", action="store_true")
    ap.add_argument("--skip-train", action="store_true", help="evaluate the reader already at --out")
    args = ap.parse_args()

    if args.squad_train is not None:
        keep_official(args.squad_train)
        return
    train_file = args.train_file
    if not train_file.is_file():
        raise SystemExit(f"{train_file} is not there: run step 1 (--squad-train PATH) or pass --train-file")

    from hiera.corpus.store import CorpusStore
    from hiera.eval.questions import load_questions
    from hiera.index.build import BuildOptions
    from hiera.train.args import ReaderArgs
    from hiera.train.reader import train_reader

    stem = train_file.stem
    root = WORK / f"reader-train-{stem}"
    ensure_collection(root, [([train_file], "squad")], options=BuildOptions(dense=False))
    recipe = dict(GPU_RECIPE)
    for name in ("batch_size", "epochs", "max_length"):
        if getattr(args, name) is not None:
            recipe[name] = getattr(args, name)
    max_length = recipe.get("max_length", ReaderArgs.max_length)
    recipe["stride"] = min(recipe.get("stride", ReaderArgs.stride), max_length // 2 - 1)
    out = args.out or WORK / "reader" / f"gpu-{stem}"
    rargs = ReaderArgs(**recipe, max_examples=args.max_examples, max_minutes=args.max_minutes, device=args.device)
    if not args.skip_train:
        store = CorpusStore(root)  # gold passage ids depend on how the collection was split
        questions = load_questions(train_file, "squad", rules=store.rules)
        store.close()
        print(f"{len(questions)} training questions from {train_file}; recipe {recipe}")
        meta = train_reader(root, questions, out, rargs)
        tr = meta["train"]
        print(f"trained {out}: {tr['steps']} steps, {tr['steps_per_second']} steps/s on {tr['device']} "
              f"({tr['mixed_precision']}), peak {tr.get('peak_gpu_mb', tr['peak_rss_mb'])} MB")
    if args.skip_eval:
        return
    cmd = [sys.executable, "-m", "bench.reader", "--reader", str(out), "--questions", str(args.questions),
           "--name", args.name, "--tune-questions", "0", "--fetchhr", str(WORK / "no-fetchhr-heads")]
    print("evaluating:", " ".join(cmd[1:]), flush=True)
    subprocess.run(cmd, check=True, cwd=REPO)


if __name__ == "__main__":
    main()
