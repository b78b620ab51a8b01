"""Encoding at the GPU's speed, and a whole build on the GPU, measured in one run on real text.

    python -m bench.gpu_encode [--distractors 200000] [--st-passages 30000] [--questions 1000] [--device auto]
    python -m bench.gpu_encode --sources squad/dev-v1.1.last24.corpus-only.json --distractors 200 \
        --encode-passages 600 --st-passages 300 --questions 10 --device cpu            # the plumbing, on a CPU

Everything it reads is in the GPU kit (``../shared/gpu/pack.py --faiss --data`` with the four files of
:data:`bench.tokenize_speed.SOURCES`): no ``bench/work``, no embedding cache from before. Steps:

1. **collection** (not timed as a result): the SQuAD train and both dev files and the HotpotQA paragraph
   pool, plus ``--distractors`` real-text distractor passages recombined from SQuAD train and HotpotQA
   sentences (:func:`bench.distractors.kit_sources`; never a sentence of a SQuAD dev article), ingested
   into a fresh collection (every copy kept, as the benchmarks keep them).
2. **(a0) tokenizing alone** on the host's cores (up to 50,000 of the passages, batches of 1,024): one
   worker process against as many as the encoder uses there (one per core on a GPU).
   **(a) hiera's encoder**, passages/s end to end (tokenization included) over every passage of that
   collection, titled as a build encodes them: ``Encoder._encode`` (no cache) and ``encode_document``
   into an empty embedding cache (what a build calls: hashing, cache look-ups, cache writes).
3. **(b) sentence-transformers' own** ``encode`` in float16 at batches of 256 and 1,024 over a seeded
   sample of ``--st-passages`` of the same passages, and hiera on that same sample in the same run:
   the ratio hiera / the better of the two (target ≥ 6).
4. **(c) cosine** of the device's vectors of 500 passages to the same weights' float32 vectors on this
   machine's CPU (min, mean; target min ≥ 0.999), and of the device's query vectors (float32 there) to
   the CPU's for the first 200 dev questions.
5. **(d) ``hiera build --device <device>``** of the collection (a subprocess, empty embedding cache): the
   build log's steps (bm25, encode passages with passages/s — target ≥ 25,000 — , the FAISS indexes, the
   documents, the name table) and the whole build's wall time.
6. **(e) ``hiera eval``** of ``dense`` and ``dhr`` on the first ``--questions`` SQuAD dev questions, on the
   device and on the CPU, both with ``--dense-search exact``: every question's TREC top-100 compared
   (identical ids in order; the largest score difference).

Writes ``$OUT/gpu_encode.json`` when ``OUT`` is set (a lent machine's output folder), else
``bench/out/gpu_encode.json``. ``run(rep, args)`` is the entry point ``bench.gpu`` calls with the
arguments of :func:`add_arguments` (:func:`defaults` makes them: ``run(rep, defaults(distractors=100_000))``).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import Report, data_dir, write_json

STEP = re.compile(r"^(?P<what>[^:]+): (?P<n>[\d,]+) (?P<unit>\w+) in (?P<s>[\d.]+)s \((?P<rate>[\d,]+) \w+/s\)$")
OLD_STEP = re.compile(r"^(?P<what>bm25|names|layout|dense)\b.*?(?P<s>[\d.]+)s\)?$")
QUESTIONS = "squad/dev-v1.1.first24.json"


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--distractors", type=int, default=200_000, help="real-text distractor passages added")
    ap.add_argument("--st-passages", type=int, default=30_000,
                    help="passages sentence-transformers encodes (at each batch size), and hiera beside it")
    ap.add_argument("--questions", type=int, default=1_000, help="dev questions hiera eval compares")
    ap.add_argument("--device", default="auto", help="auto (cuda where torch sees one), cuda or cpu")
    ap.add_argument("--work", default=None, help="folder for the collection (default: a temporary one, removed)")
    ap.add_argument("--sources", default=None,
                    help="comma-separated paths under ../shared/data to ingest (default: all four of the kit)")
    ap.add_argument("--encode-passages", type=int, default=0, help="(a): at most this many passages (0: all)")
    ap.add_argument("--skip-build", action="store_true", help="steps 1-4 only")
    ap.add_argument("--skip-eval", action="store_true", help="no (e)")
    ap.add_argument("--variants", type=int, default=0,
                    help="(a1)/(a2) on this many passages: the model alone, and the pipeline at other settings")


def defaults(**overrides: Any) -> argparse.Namespace:
    """The arguments of :func:`add_arguments` at their defaults, with ``overrides`` (``bench.gpu`` calls ``run`` so)."""
    ap = argparse.ArgumentParser()
    add_arguments(ap)
    args = ap.parse_args([])
    for k, v in overrides.items():
        if not hasattr(args, k):
            raise TypeError(f"bench.gpu_encode has no argument {k!r}")
        setattr(args, k, v)
    return args


def _device(name: str) -> str:
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def make_collection(root: Path, distractors: int, only: str | None = None) -> dict[str, Any]:
    """Ingest the kit's real text (``only``: these paths of it) and ``distractors`` recombined passages into ``root``."""
    from bench.distractors import kit_sources, write_jsonl
    from bench.tokenize_speed import SOURCES
    from hiera.corpus.ingest import ingest

    data = data_dir()
    t = time.perf_counter()
    parts = []
    chosen = set(only.split(",")) if only else {rel for rel, _ in SOURCES}
    unknown = chosen - {rel for rel, _ in SOURCES}
    if unknown:
        raise SystemExit(f"--sources: not a kit source: {', '.join(sorted(unknown))}")
    for rel, fmt in (x for x in SOURCES if x[0] in chosen):
        r = ingest([data / rel], fmt, root, duplicates="keep", progress=False)
        parts.append({"source": rel, "documents": r.documents, "passages": r.passages})
    if distractors > 0:
        path = root.parent / f"distractors-{distractors}.jsonl"
        write_jsonl(path, data, distractors, sources=kit_sources(data))
        r = ingest([path], "hiera-jsonl", root, duplicates="keep", progress=False)
        parts.append({"source": f"distractors ({distractors:,} asked)", "documents": r.documents,
                      "passages": r.passages})
        path.unlink()
    return {"parts": parts, "seconds": round(time.perf_counter() - t, 1)}


def collection_passages(root: Path) -> list[str]:
    """Every passage of the collection, titled as the passage encoder reads it (a build's own texts)."""
    from hiera.corpus.store import CorpusStore

    store = CorpusStore(root)
    try:
        sep = store.title_sep
        return [p.titled_text(sep) for _, p in store.iter_passages()]
    finally:
        store.close()


def _timed(device: str, fn: Any) -> tuple[Any, float]:
    _sync(device)
    t = time.perf_counter()
    out = fn()
    _sync(device)
    return out, time.perf_counter() - t


def tokenize_rows(rep: Report, texts: list[str], workers: int) -> dict[str, Any]:
    """(a0): tokenizing alone on this host's cores, one worker process against ``workers``, and the path before."""
    from bench.tokenize_speed import _through
    from hiera.backends import FastTokenizer, TokenizerPool
    from hiera.encode import CUDA_BATCH, resolve_model_path

    fast = FastTokenizer.load(resolve_model_path("all-MiniLM-L6-v2"))
    if fast is None:
        return {"skipped": "the model is not a plain pipeline FastTokenizer reproduces"}
    batches = [texts[s : s + CUDA_BATCH] for s in range(0, len(texts), CUDA_BATCH)]
    out: dict[str, Any] = {}
    for n, kind in dict.fromkeys(((1, "process"), (workers, "process"), (workers, "thread"))):
        with TokenizerPool(fast.packing(), n, kind) as pool:  # as the encoder's workers tokenize
            _through(pool, batches[:n], n)  # start-up, not timed
            t = time.perf_counter()
            _through(pool, batches, 2 * n)
            rate = len(texts) / (time.perf_counter() - t)
        label = f"workers_{n}" if kind == "process" else f"threads_{n}"
        out[label] = {"workers": n, "kind": kind, "passages": len(texts), "passages_per_s": rate}
        rep.add({"measure": f"(a0) tokenizing alone, {n} worker {kind}{'es' if n > 1 and kind == 'process' else ''}"
                            f"{'s' if n > 1 and kind == 'thread' else ''}, {len(texts):,} passages",
                 "value": f"{rate:,.0f} passages/s", "target": "–"}, out[label], key=f"a0-tokenize-{kind}-{n}")
    return out


def _host_row(rep: Report, what: str, stats: Any, key: str) -> None:
    d = stats.to_dict()
    wall = max(d["wall"], 1e-9)
    parts = ", ".join(f"{k.replace('_', ' ')} {d[k] / wall:.0%}" for k in ("wait_tokenize", "copy_in", "launch",
                                                                          "wait_device"))
    rep.add({"measure": what, "value": f"{parts}; tokens/slots {d['tokens'] / max(d['slots'], 1):.2f}",
             "target": "–"}, d, key=key)


def model_alone(rep: Report, enc: Any, texts: list[str], device: str) -> dict[str, Any]:
    """(a1) the model's forward pass alone over the same length-sorted batches, tokenized and on the device
    beforehand: the ceiling the pipeline is held to on these texts."""
    import torch

    from hiera.encode import model_inputs

    pool = enc.tokenizer_pool()
    if pool is None:
        return {"skipped": "no tokenizer pool"}
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    batches = [[texts[i] for i in order[s : s + enc.batch_size]] for s in range(0, len(order), enc.batch_size)]
    futures = [pool.submit(b) for b in batches]
    on_device = [model_inputs({k: torch.from_numpy(v).to(device) for k, v in f.result().items()}) for f in futures]
    model = enc.doc_model
    tokens = sum(int(x["attention_mask"].sum()) for x in on_device)
    res: dict[str, Any] = {"passages": len(texts), "tokens": tokens, "tokens_per_passage": tokens / max(1, len(texts))}
    padded = enc._forward(pool)
    for label, fn in (("sentence-transformers' forward", lambda x: model(x)["sentence_embedding"]),
                      ("hiera's padded forward", padded)):
        def forward(fn: Any = fn) -> None:
            with torch.inference_mode():
                for x in on_device:
                    torch.nn.functional.normalize(fn(x).float(), dim=1)

        forward()  # warm-up: every shape once
        _, seconds = _timed(device, forward)
        syncs = "–"
        if device == "cuda":  # does one batch's forward pass make the host wait on the GPU?
            torch.cuda.set_sync_debug_mode("error")
            try:
                with torch.inference_mode():
                    fn(on_device[-1])
                syncs = "none"
            except RuntimeError as e:
                syncs = f"synchronizes: {str(e)[:80]}"
            finally:
                torch.cuda.set_sync_debug_mode("default")
        res[label] = {"seconds": round(seconds, 3), "passages_per_s": len(texts) / seconds, "host syncs": syncs}
        rep.add({"measure": f"(a1) the model alone, {label}, batches already on the device, {len(texts):,} passages "
                            f"({res['tokens_per_passage']:.0f} tokens each); host syncs: {syncs}",
                 "value": f"{len(texts) / seconds:,.0f} passages/s", "target": "–"}, res[label], key=f"a1-{label}")
    return res


def variant_rows(rep: Report, texts: list[str], device: str, base: Any) -> dict[str, Any]:
    """(a2) the same pipeline on the same passages at other settings: worker threads, other batch sizes."""
    from hiera.encode import Encoder, StreamStats

    out: dict[str, Any] = {}
    setups = [("15 processes, batch 1,024", {}), ("16 processes, batch 1,024", {"tokenize_workers": 16}),
              ("threads, batch 1,024", {"tokenize_kind": "thread"}),
              ("4 threads, batch 1,024", {"tokenize_kind": "thread", "tokenize_workers": 4}),
              ("processes, batch 2,048", {"batch_size": 2048})]
    for label, kw in setups:
        enc = Encoder(backend="torch", device=device, use_cache=False,
                      tokenize_kind=kw.get("tokenize_kind", base.tokenize_kind), batch_size=kw.get("batch_size"),
                      tokenize_workers=kw.get("tokenize_workers"))
        try:
            enc._encode(texts[: 4 * enc.batch_size])
            enc.stream_stats = StreamStats()
            _, seconds = _timed(device, lambda e=enc: e._encode(texts))
        except Exception as e:  # noqa: BLE001 - one variant failing leaves the others
            out[label] = {"error": f"{type(e).__name__}: {e}"}
            continue
        finally:
            pool = enc.tokenizer_pool()
            if pool is not None:
                pool.close()
        out[label] = {"passages": len(texts), "passages_per_s": len(texts) / seconds, **kw,
                      "stream": enc.stream_stats.to_dict()}
        rep.add({"measure": f"(a2) hiera Encoder._encode, {label}, {len(texts):,} passages",
                 "value": f"{len(texts) / seconds:,.0f} passages/s", "target": "–"}, out[label], key=f"a2-{label}")
        _host_row(rep, f"(a2) {label}: where the host's time went", enc.stream_stats, f"a2-host-{label}")
    return out


def encode_rows(rep: Report, texts: list[str], device: str, args: argparse.Namespace) -> dict[str, Any]:
    """(a), (b), (c): hiera's encoder end to end, sentence-transformers' encode beside it, cosine to the CPU."""
    from hiera.encode import Encoder, StreamStats, default_tokenize_workers

    out: dict[str, Any] = {}
    out["tokenize"] = tokenize_rows(rep, texts[:50_000], default_tokenize_workers(device))
    enc = Encoder(backend="torch", device=device, use_cache=False)
    try:
        enc._encode(texts[: 4 * enc.batch_size])  # warm-up: kernels, allocator, tokenizer workers started
    except Exception as e:  # noqa: BLE001 - one try on the GPU: fall back to worker threads and say so
        out["process_pool_error"] = f"{type(e).__name__}: {e}"
        print(f"tokenizer worker processes failed ({out['process_pool_error']}); worker threads instead", flush=True)
        enc = Encoder(backend="torch", device=device, use_cache=False, tokenize_kind="thread")
        enc._encode(texts[: 4 * enc.batch_size])
    pool = enc.tokenizer_pool()
    setup = {"batch_size": enc.batch_size, "precision": enc.precision, "tokenize_workers": enc.tokenize_workers,
             "tokenize_kind": enc.tokenize_kind if pool is not None else "sentence-transformers preprocess"}
    enc.stream_stats = StreamStats()
    vecs, seconds = _timed(device, lambda: enc._encode(texts))
    out["hiera"] = {"passages": len(texts), "seconds": round(seconds, 2), "passages_per_s": len(texts) / seconds, **setup,
                    "stream": enc.stream_stats.to_dict()}
    rep.add({"measure": f"(a) hiera Encoder._encode, {len(texts):,} passages (no cache)",
             "value": f"{len(texts) / seconds:,.0f} passages/s", "target": "≥ 30,000"}, out["hiera"], key="a-hiera")
    _host_row(rep, "(a) where the host's time went", enc.stream_stats, "a-host")
    if args.variants:
        out["model_alone"] = model_alone(rep, enc, texts[: args.variants], device)
        out["variants"] = variant_rows(rep, texts[: args.variants], device, enc)
    with tempfile.TemporaryDirectory(prefix="gpu-encode-cache-") as cache:
        cached = Encoder(backend="torch", device=device, cache_dir=Path(cache), tokenize_kind=enc.tokenize_kind)
        cached.encode_document(texts[:64])
        _, seconds = _timed(device, lambda: cached.encode_document(texts))
        out["hiera_cached"] = {"passages": len(texts), "seconds": round(seconds, 2),
                               "passages_per_s": len(texts) / seconds, "cache_rows": len(cached.cache or [])}
        rep.add({"measure": "(a) hiera encode_document into an empty cache (a build's call)",
                 "value": f"{len(texts) / seconds:,.0f} passages/s", "target": "–"}, out["hiera_cached"],
                key="a-hiera-cached")
    # (b) sentence-transformers' own loop on a sample, hiera on the same sample
    sample = random.Random(7).sample(range(len(texts)), min(args.st_passages, len(texts)))
    st_texts = [texts[i] for i in sample]
    _, seconds = _timed(device, lambda: enc._encode(st_texts))
    hiera_rate = len(st_texts) / seconds
    out["hiera_on_st_sample"] = {"passages": len(st_texts), "passages_per_s": hiera_rate}
    from sentence_transformers import SentenceTransformer

    from hiera.models import quiet_transformers

    with quiet_transformers():
        st = SentenceTransformer(str(enc.path), device=device)
    if device == "cuda":
        st.half()
    best = 0.0
    for batch in (256, 1024):
        st.encode(st_texts[:batch], batch_size=batch, convert_to_numpy=True, normalize_embeddings=True)  # warm-up
        _, seconds = _timed(device, lambda b=batch: st.encode(st_texts, batch_size=b, convert_to_numpy=True,
                                                               normalize_embeddings=True, show_progress_bar=False))
        rate = len(st_texts) / seconds
        best = max(best, rate)
        out[f"st_batch_{batch}"] = {"passages": len(st_texts), "seconds": round(seconds, 2), "passages_per_s": rate,
                                    "precision": "float16" if device == "cuda" else "float32"}
        rep.add({"measure": f"(b) sentence-transformers encode, batch {batch:,}, {len(st_texts):,} passages",
                 "value": f"{rate:,.0f} passages/s", "target": "–"}, out[f"st_batch_{batch}"], key=f"b-st-{batch}")
    out["hiera_over_best_st"] = hiera_rate / best
    rep.add({"measure": f"(b) hiera / the better sentence-transformers, same {len(st_texts):,} passages",
             "value": f"{hiera_rate:,.0f} / {best:,.0f} = {hiera_rate / best:.2f}×", "target": "≥ 6×"},
            {"hiera": hiera_rate, "st_best": best, "ratio": hiera_rate / best}, key="b-ratio")
    # (c) the device's vectors against the same weights' float32 vectors on this machine's CPU
    from hiera.eval.questions import load_questions

    cpu = Encoder(backend="torch", device="cpu", use_cache=False)
    idx = sample[:500]
    ref = cpu._encode([texts[i] for i in idx])
    cos = (ref * vecs[idx]).sum(axis=1)
    out["cosine_passages"] = {"n": len(idx), "min": float(cos.min()), "mean": float(cos.mean())}
    rep.add({"measure": f"(c) cosine, {device} passages vs float32 CPU (min / mean, {len(idx)})",
             "value": f"{cos.min():.5f} / {cos.mean():.5f}", "target": "min ≥ 0.999"}, out["cosine_passages"],
            key="c-cos")
    qs = [q.text for q in load_questions(data_dir() / QUESTIONS, "squad")[:200]]
    qcos = (cpu.encode_query(qs) * enc.encode_query(qs)).sum(axis=1)
    out["cosine_queries"] = {"n": len(qs), "min": float(qcos.min()), "mean": float(qcos.mean())}
    rep.add({"measure": f"(c) cosine, {device} queries (float32) vs CPU (min, {len(qs)})",
             "value": f"{qcos.min():.7f}", "target": "–"}, out["cosine_queries"], key="c-qcos")
    if pool is not None:
        pool.close()
    return out


def _run(cmd: list[str], env: dict[str, str]) -> tuple[int, str, float]:
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return proc.returncode, proc.stdout + proc.stderr, time.perf_counter() - t


def build_steps(log: str) -> dict[str, Any]:
    """The steps a build logged: ``what`` → seconds (and count, rate for the rated ones)."""
    steps: dict[str, Any] = {}
    for line in log.replace("\r", "\n").splitlines():
        line = line.strip()
        m = STEP.match(line)
        if m:
            steps[m["what"]] = {"n": int(m["n"].replace(",", "")), "unit": m["unit"], "seconds": float(m["s"]),
                                "rate": float(m["rate"].replace(",", ""))}
            continue
        m = OLD_STEP.match(line)
        if m:
            steps[m["what"]] = {"seconds": float(m["s"]), "line": line}
    return steps


def build_rows(rep: Report, root: Path, device: str, env: dict[str, str]) -> dict[str, Any]:
    """(d): ``hiera build --device`` in a subprocess, into an empty embedding cache; its steps from its log."""
    with tempfile.TemporaryDirectory(prefix="gpu-build-cache-") as cache:
        cmd = [sys.executable, "-m", "hiera", "build", str(root), "--device", device, "--backend", "torch"]
        rc, log, seconds = _run(cmd, {**env, "HIERA_CACHE_DIR": cache})
    steps = build_steps(log)
    out = {"command": " ".join(cmd[1:]), "rc": rc, "seconds": round(seconds, 1), "steps": steps,
           "log_tail": log[-3000:]}
    rep.add({"measure": f"(d) hiera build --device {device}: whole build (subprocess, imports included)",
             "value": f"{seconds:.1f} s (rc {rc})", "target": "–"}, out, key="d-build")
    for what, s in steps.items():
        rate = f" ({s['rate']:,.0f} {s['unit']}/s)" if "rate" in s else ""
        target = "≥ 25,000/s" if what == "encode passages" else "–"
        rep.add({"measure": f"(d) build step: {what}", "value": f"{s['seconds']:.1f} s{rate}", "target": target},
                echo=True)
    return out


def read_trec(path: Path) -> dict[str, list[tuple[str, float]]]:
    runs: dict[str, list[tuple[str, float]]] = {}
    for line in path.read_text().splitlines():
        qid, _, pid, _, score, _ = line.split()
        runs.setdefault(qid, []).append((pid, float(score)))
    return runs


def compare_runs(a: dict[str, list[tuple[str, float]]], b: dict[str, list[tuple[str, float]]],
                 ks: tuple[int, ...] = (1, 10, 100)) -> dict[str, Any]:
    """Per question: the same ids in the same order at each cut, and the largest score difference of a shared id."""
    same = dict.fromkeys(ks, 0)
    worst = 0.0
    for qid, ra in a.items():
        rb = b.get(qid, [])
        for k in ks:
            same[k] += [p for p, _ in ra[:k]] == [p for p, _ in rb[:k]]
        sb = dict(rb)
        for p, s in ra:
            if p in sb:
                worst = max(worst, abs(s - sb[p]))
    return {"questions": len(a), **{f"identical_top{k}": same[k] for k in ks}, "max_score_diff": worst}


def eval_rows(rep: Report, root: Path, device: str, n: int, env: dict[str, str], work: Path) -> dict[str, Any]:
    """(e): ``hiera eval`` on the device and on the CPU, both exact, every question's top 100 compared.

    Run on a CPU (``--device cpu``, the plumbing check) the pair is the CPU's exact search and its FAISS
    indexes, which on a small (Flat) build are exact too.
    """
    out: dict[str, Any] = {}
    runs = {}
    setups = [(device, "exact"), ("cpu", "exact")] if device != "cpu" else [("cpu", "exact"), ("cpu", "faiss")]
    for dev, search in setups:
        label = f"{dev}-{search}"
        dest = work / f"eval-{label}"
        cmd = [sys.executable, "-m", "hiera", "eval", str(root), "--questions", str(data_dir() / QUESTIONS),
               "--format", "squad", "--retrievers", "dense,dhr", "--ks", "1,5,20,100", "--limit", str(n),
               "--latency-sample", "0", "--device", dev, "--dense-search", search, "--out", str(dest)]
        rc, log, seconds = _run(cmd, env)
        out[label] = {"command": " ".join(cmd[1:]), "rc": rc, "seconds": round(seconds, 1), "log_tail": log[-2000:]}
        if rc != 0:
            rep.add({"measure": f"(e) hiera eval --device {dev} --dense-search {search}",
                     "value": f"failed (rc {rc})", "target": "–"}, out[label], key=f"e-{label}")
            print(log[-2000:], flush=True)
            continue
        runs[label] = {name: read_trec(dest / f"{name}.trec") for name in ("dense", "dhr")}
    if len(runs) == 2:
        (a, b) = runs
        for name in ("dense", "dhr"):
            cmp = compare_runs(runs[a][name], runs[b][name])
            out[f"compare_{name}"] = {"pair": [a, b], **cmp}
            rep.add({"measure": f"(e) {name}: {a} vs {b}, identical top-1 / top-10 / top-100",
                     "value": f"{cmp['identical_top1']} / {cmp['identical_top10']} / {cmp['identical_top100']} of "
                              f"{cmp['questions']}; max score diff {cmp['max_score_diff']:.2e}",
                     "target": "all"}, out[f"compare_{name}"], key=f"e-{name}")
    return out


def _guarded(rep: Report, what: str, fn: Any) -> dict[str, Any]:
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - a lent GPU is measured once: record the failure, go on
        import traceback

        error = f"{type(e).__name__}: {e}"
        rep.add({"measure": f"{what} failed", "value": error[:200], "target": "–"},
                {"error": error, "traceback": traceback.format_exc()[-4000:]}, key=f"failed {what}")
        return {"error": error}


def run(rep: Report, args: argparse.Namespace) -> dict[str, Any]:
    """Every step of the module docstring; the parts' results by name (also in ``rep``)."""
    device = _device(args.device)
    parts: dict[str, Any] = {"device": device}
    if device == "cuda":
        import torch

        parts["gpu"] = torch.cuda.get_device_name()
    parts["cpus"] = os.cpu_count()
    first_row = len(rep.rows)
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="gpu-encode-"))
    root = work / "coll"
    env = {**os.environ, "TOKENIZERS_PARALLELISM": os.environ.get("TOKENIZERS_PARALLELISM", "false")}
    try:
        if not root.exists():
            parts["collection"] = make_collection(root, args.distractors, args.sources)
        texts = collection_passages(root)
        parts["passages"] = len(texts)
        print(f"{len(texts):,} passages in {root} ({parts.get('collection', {}).get('seconds', 0)}s to make)",
              flush=True)
        # each part on its own: one failing part (recorded) leaves the others measured
        parts["encode"] = _guarded(rep, "(a)-(c) encoding", lambda: encode_rows(
            rep, texts[: args.encode_passages or None], device, args))
        if not args.skip_build:
            if "process_pool_error" in parts["encode"]:  # the build and eval fall back as (a) did
                env["HIERA_TOKENIZE_KIND"] = "thread"
            parts["build"] = _guarded(rep, "(d) build", lambda: build_rows(rep, root, device, env))
            if parts["build"].get("rc") == 0 and not args.skip_eval:
                parts["eval"] = _guarded(rep, "(e) eval", lambda: eval_rows(rep, root, device, args.questions, env,
                                                                             work))
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
        for row in rep.rows[first_row:]:  # the value under the device's name too: bench.gpu's columns are cpu, cuda
            row.setdefault(device, row.get("value"))
    return parts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap)
    args = ap.parse_args()
    rep = Report("gpu_encode", columns=["measure", "value", "target"])
    t = time.perf_counter()
    parts = run(rep, args)
    parts["seconds"] = round(time.perf_counter() - t, 1)
    rep.print(f"Encoding and a whole build on {parts['device']} ({parts.get('gpu', 'no GPU')}; "
              f"{parts['cpus']} CPUs), {parts['seconds']} s")
    dest = Path(os.environ["OUT"]) / "gpu_encode.json" if os.environ.get("OUT") else "gpu_encode"
    path = write_json(dest, rep.to_dict(args=vars(args), parts=parts))
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
