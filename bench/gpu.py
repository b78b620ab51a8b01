"""GPU against CPU in one run: encoding, exact flat and DHR search per stage, training steps/s.

    python -m bench.gpu [--encode-passages N] [--cpu-encode-passages 2000] [--sizes 1000000,5000000,21000000]
                        [--queries 200] [--train-steps 20] [--skip-encode] [--skip-search] [--skip-train]

Every measure runs on the CPU and, where torch sees one, on the GPU, with the
same hiera code (the columns ``cpu`` and ``cuda``; without a GPU the cuda
column says "no CUDA device"). Unchanged on a lent GPU machine.

* **encoding** (passages/s end to end, tokenization included):
  ``Encoder._encode`` (the uncached path a build takes) over real passages of
  the pooled corpus (``bench/work/pooled``, built by ``bench.pooled``) repeated
  to ``--encode-passages`` (default 1,000,000 on a GPU) and
  ``--cpu-encode-passages`` (default 2,000: the CPU does about 90/s). CPU rows:
  the default backend (``auto``) and torch float32; GPU: torch float16, batches
  of :data:`hiera.encode.CUDA_BATCH`, tokenization prefetched in a thread. Beside
  them the cosine between vectors of the same 500 passages: the GPU's (or, on
  a CPU, the float16 path run there) against torch float32 on the CPU, and
  the int8 backend's against torch float32.
* **search** (ms per query after the query vector exists, top 100, medians of
  three passes): synthetic random unit 384-d float16 vectors, ``N`` passages
  in about ``N / 5`` documents of 1–9 passages; flat exact search
  (:class:`hiera.index.exact.TorchExactIndex`) and DHR in its dense
  configuration (exact document stage over the mean vectors, ``top_docs``
  100, then the passage-stage primitive
  :class:`hiera.index.passage_stage.TorchPassageStage`, ``lam`` 1), single
  queries and batches of 32; beside them each stage alone (the document
  stage; the passage stage on documents chosen beforehand; its one
  device-to-host copy), DHR over its own document stage, and the kernels,
  copies and synchronizations of one DHR batch (``torch.profiler``; on a CPU
  the operators called, the tests' proxy). The CPU runs ``--cpu-sizes``
  (default 1M; 5M and 21M do not fit a small machine's memory as float32),
  from vectors made on the CPU; the GPU every size of ``--sizes``, drawn on
  the device where the CPU does not run that size. "identical" counts the
  queries whose GPU DHR top 100 equals the CPU exact path's (positions,
  scores to 1e-5), checked at the first size.
* **training** (steps/s): ``hiera train-reader`` on the 44 SQuAD train articles
  (``bench.gpu_reader``'s BM25-only collection of that file),
  ``--train-steps`` steps of 16 questions (the CPU default batch), from the
  report's ``steps_per_second``, with its peak memory.

Writes ``bench/out/gpu.json``. Latency and throughput are machine-dependent:
the CPU figures of this run live in bench/README.md, not in expected.yaml.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import WORK, Report, data_dir, ensure_collection

NO_GPU = "no CUDA device"
DIM = 384


def _devices() -> list[str]:
    from hiera.models import cuda_available

    return ["cpu", "cuda"] if cuda_available() else ["cpu"]


# -- encoding --------------------------------------------------------------------------------------------------
def pooled_passages(limit: int) -> list[str]:
    """Up to ``limit`` distinct titled passages of the pooled corpus, as the passage encoder reads them."""
    from bench.pooled import POOLED
    from hiera.corpus.store import CorpusStore

    if not (POOLED / "corpus.sqlite").exists():
        raise SystemExit(f"{POOLED} is not there: run `python -m bench.pooled` first")
    store = CorpusStore(POOLED)
    sep = store.title_sep
    out = []
    for _, p in store.iter_passages():
        out.append(p.titled_text(sep))
        if len(out) >= limit:
            break
    return out


def _repeat(texts: list[str], n: int) -> list[str]:
    return (texts * (n // len(texts) + 1))[:n]


def encode_rows(rep: Report, args: argparse.Namespace, devices: list[str]) -> dict[str, Any]:
    from hiera.encode import Encoder

    base = pooled_passages(50_000)
    out: dict[str, Any] = {}
    setups = [("cpu", "auto", None), ("cpu", "torch", None)] + ([("cuda", "torch", None)] if "cuda" in devices else [])
    for device, backend, precision in setups:
        enc = Encoder(backend=backend, device=device, precision=precision, use_cache=False)
        n = args.cpu_encode_passages if device == "cpu" else args.encode_passages
        texts = _repeat(base, n)
        enc._encode(texts[: min(256, n)])  # warm up (graphs, kernels, allocator)
        if device == "cuda":
            import torch

            torch.cuda.synchronize()
        t = time.perf_counter()
        enc._encode(texts, show_progress=True)
        seconds = time.perf_counter() - t
        label = f"encode passages/s ({device}, {enc.backend}, {enc.precision})"
        out[label] = {"passages": n, "seconds": round(seconds, 2), "passages_per_s": round(n / seconds, 1),
                      "batch_size": enc.batch_size}
        rep.add({"measure": label, device: round(n / seconds, 1), **({} if device == "cuda" else {"cuda": "–"})},
                out[label], key=label)
    # interchangeability: the same passages from torch float32 on the CPU, the float16 path, the int8 backend
    sample = base[:500]
    ref = Encoder(backend="torch", device="cpu", use_cache=False)._encode(sample)
    half_dev = "cuda" if "cuda" in devices else "cpu"
    half = Encoder(backend="torch", device=half_dev, precision="float16", use_cache=False)._encode(sample)
    cos = (ref * half).sum(axis=1)
    label = f"cosine float16 ({half_dev}) vs float32 cpu, min / mean"
    out[label] = {"min": float(cos.min()), "mean": float(cos.mean()), "n": len(sample)}
    rep.add({"measure": label, half_dev: f"{cos.min():.5f} / {cos.mean():.5f}"}, out[label], key=label)
    from hiera.backends import installed

    if installed("onnx-int8"):
        int8 = Encoder(backend="onnx-int8", device="cpu", use_cache=False)._encode(sample)
        c8 = (ref * int8).sum(axis=1)
        label = "cosine onnx-int8 vs torch float32 cpu, min / mean"
        out[label] = {"min": float(c8.min()), "mean": float(c8.mean()), "n": len(sample)}
        rep.add({"measure": label, "cpu": f"{c8.min():.5f} / {c8.mean():.5f}"}, out[label], key=label)
    return out


# -- search ----------------------------------------------------------------------------------------------------
def synthetic(n: int, device: str, seed: int = 0, on_device: bool = False) -> tuple[Any, np.ndarray]:
    """``n`` random unit float16 vectors on ``device`` and a document offset table.

    Made on the CPU chunk by chunk from one seed (the same vectors on every
    device) unless ``on_device``: sizes only a GPU runs are drawn there, which
    takes seconds instead of minutes.
    """
    import torch

    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 10, size=n // 5 + 10)
    offsets = np.concatenate(([0], np.cumsum(sizes)))
    offsets = offsets[offsets < n]
    offsets = np.append(offsets, n).astype(np.int64)
    dtype = torch.float16 if device == "cuda" else torch.float32
    matrix = torch.empty((n, DIM), dtype=dtype, device=device)
    gen = torch.Generator(device=device if on_device else "cpu").manual_seed(seed)
    for s in range(0, n, 1_000_000):
        x = torch.randn((min(1_000_000, n - s), DIM), generator=gen, device=gen.device)
        x = torch.nn.functional.normalize(x, dim=1).half()  # stored as hiera stores vectors: float16
        matrix[s : s + len(x)] = x.to(device=device, dtype=dtype)
    return matrix, offsets


def doc_vectors(matrix: Any, offsets: np.ndarray) -> Any:
    """The normalized mean of each document's passage vectors (hiera's ``mean`` document vectors)."""
    import torch

    dev = matrix.device
    per_doc = torch.repeat_interleave(torch.arange(len(offsets) - 1, device=dev),
                                      torch.from_numpy(np.diff(offsets)).to(dev))
    out = torch.zeros((len(offsets) - 1, matrix.shape[1]), dtype=torch.float32, device=dev)
    for s in range(0, matrix.shape[0], 1_000_000):
        out.index_add_(0, per_doc[s : s + 1_000_000], matrix[s : s + 1_000_000].float())
    return torch.nn.functional.normalize(out, dim=1).half().to(matrix.dtype)


class Searcher:
    """Flat exact search and DHR (dense configuration) over one synthetic collection on one device.

    DHR here is what ``dhr`` runs with ``--set doc_stage=mean --set
    passage_alpha=0 --set lam=1`` on an exact search device: the document
    stage's exact search (:class:`hiera.index.exact.TorchExactIndex` over the
    mean vectors) hands its top ``top_docs`` documents, still on the device,
    to the passage-stage primitive (:class:`hiera.index.passage_stage.TorchPassageStage`).
    """

    def __init__(self, n: int, device: str, on_device: bool = False) -> None:
        from hiera.index.exact import TorchExactIndex
        from hiera.index.passage_stage import PassageSpec, TorchPassageStage

        self.device = device
        matrix, self.offsets = synthetic(n, device, on_device=on_device)
        self.flat = TorchExactIndex.from_tensor(matrix)
        self.docs = TorchExactIndex.from_tensor(doc_vectors(matrix, self.offsets))
        self.stage = TorchPassageStage(matrix, self.offsets, device)
        self.spec = PassageSpec(lam=1.0, passage_alpha=0.0, k=100)

    def _sync(self) -> None:
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()

    def flat_search(self, q: np.ndarray, k: int) -> Any:
        return self.flat.search(q, k)

    def _qt(self, q: np.ndarray) -> Any:
        import torch

        return torch.from_numpy(np.ascontiguousarray(q, dtype=np.float32)).to(self.device)

    def doc_stage(self, q: np.ndarray, k: int, top_docs: int = 100) -> Any:
        """The document stage alone (synchronized, so its GPU time is counted)."""
        import torch

        with torch.inference_mode():
            out = self.docs.top(self._qt(q), top_docs)
        self._sync()
        return out

    def dhr(self, q: np.ndarray, k: int, top_docs: int = 100) -> list[Any]:
        import torch

        from hiera.index.passage_stage import DeviceSearch, DocLists

        with torch.inference_mode():  # as the dhr retriever hands it over: the search unrun, fused on a GPU
            qt = self._qt(q)
            return self.stage.run([""] * len(q), qt, DocLists.deferred(DeviceSearch(self.docs, qt, top_docs)),
                                  self.spec)

    def passage_stage(self, docs: Any, q: np.ndarray) -> list[Any]:
        """The passage stage alone, on documents the document stage already chose (its one transfer included)."""
        from hiera.index.passage_stage import DocLists

        return self.stage.run([""] * len(q), self._qt(q), DocLists(docs[1], docs[0]), self.spec)

    def time(self, fn: Any, queries: np.ndarray, batch: int, k: int, repeats: int = 3) -> float:
        """ms per query, the median of ``repeats`` passes of ``fn`` over ``queries`` in batches of ``batch``."""
        fn(queries[:batch], k)
        self._sync()
        runs = []
        for _ in range(repeats):
            t = time.perf_counter()
            for s in range(0, len(queries), batch):
                fn(queries[s : s + batch], k)
            self._sync()
            runs.append((time.perf_counter() - t) * 1000 / len(queries))
        return float(np.median(runs))

    def time_passage_stage(self, queries: np.ndarray, batch: int, repeats: int = 3) -> float:
        """ms per query of the passage stage alone (document lists made beforehand, outside the clock)."""
        chunks = [queries[s : s + batch] for s in range(0, len(queries), batch)]
        docs = [self.doc_stage(c, 100) for c in chunks]
        self.passage_stage(docs[0], chunks[0])
        self._sync()
        runs = []
        for _ in range(repeats):
            t = time.perf_counter()
            for d, c in zip(docs, chunks, strict=True):
                self.passage_stage(d, c)
            self._sync()
            runs.append((time.perf_counter() - t) * 1000 / len(queries))
        return float(np.median(runs))

    def transfer_ms(self, batch: int) -> float:
        """One device-to-host copy of a batch's packed result (``batch`` × 100 rows × 7 int64), the stage's only one."""
        import torch

        if self.device != "cuda":
            return 0.0
        x = torch.zeros((batch, 100, 7), dtype=torch.int64, device="cuda")
        x.cpu()
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(50):
            x.cpu()
        return (time.perf_counter() - t) * 1000 / 50

    def graph_profile(self, queries: np.ndarray, top: int = 25) -> dict[str, Any]:
        """One query's fused DHR on the GPU taken apart: the GPU's own time per replay of its graph (CUDA events
        around back-to-back replays, no host work between them) against the whole call, and its kernels by total
        time (``torch.profiler``, 20 calls)."""
        import torch
        from torch.profiler import ProfilerActivity, profile

        q = queries[:1]
        self.dhr(q, 100)
        self._sync()
        graphs = [v for k, v in self.stage._graphs.items() if k[0] == "fused" and k[2][0] == 1]
        out: dict[str, Any] = {}
        if graphs:
            graph = graphs[0][0]
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            graph.replay()
            start.record()
            for _ in range(50):
                graph.replay()
            end.record()
            end.synchronize()
            out["gpu ms per replay"] = start.elapsed_time(end) / 50
        t = time.perf_counter()
        for _ in range(50):
            self.dhr(q, 100)
        self._sync()
        out["whole call ms"] = (time.perf_counter() - t) * 1000 / 50
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(20):
                self.dhr(q, 100)
            self._sync()
        kernels: dict[str, list[float]] = {}
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                kernels.setdefault(e.name[:120], []).append(e.time_range.elapsed_us())
        table = sorted(((sum(v) / 20, len(v) / 20, k) for k, v in kernels.items()), reverse=True)
        out["kernels per call"] = sum(n for _, n, _ in table)
        out["kernel us per call"] = sum(t for t, _, _ in table)
        out["top kernels (us per call, count per call, name)"] = [[round(t, 2), n, k] for t, n, k in table[:top]]
        return out

    def launches(self, queries: np.ndarray, batch: int) -> dict[str, int]:
        """Per batch: CUDA kernels launched, host↔device copies and synchronizations of one DHR call (on a CPU:
        the operators the stage calls, the proxy the tests pin)."""
        import torch
        from torch.profiler import ProfilerActivity, profile

        q = queries[:batch]
        self.dhr(q, 100)
        self._sync()
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.device == "cuda" else [])
        with profile(activities=acts) as prof:
            self.dhr(q, 100)
            self._sync()
        ev = list(prof.events())
        if self.device == "cuda":
            kernels = [e for e in ev if e.device_type == torch.autograd.DeviceType.CUDA and "memcpy" not in e.name.lower()
                       and "memset" not in e.name.lower()]
            copies = [e for e in ev if e.name in ("cudaMemcpyAsync", "cudaMemcpy")]
            syncs = [e for e in ev if "Synchronize" in e.name]
            # what the host calls: each kernel launch, or one graph launch for every kernel it replays
            host = [e for e in ev if e.name in ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel",
                                                "cuLaunchKernelEx", "cudaGraphLaunch")]
            return {"kernels": len(kernels), "host launches": len(host), "copies": len(copies), "syncs": len(syncs)}
        ops = [e for e in ev if e.name.startswith("aten::")
               and (e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::"))]
        return {"operators": len(ops)}


def search_rows(rep: Report, args: argparse.Namespace, devices: list[str]) -> dict[str, Any]:
    import torch

    out: dict[str, Any] = {}
    sizes = [int(x) for x in args.sizes.split(",")]
    cpu_sizes = {int(x) for x in args.cpu_sizes.split(",") if x}
    rng = np.random.default_rng(7)
    queries = rng.standard_normal((args.queries, DIM)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    checked = False
    for n in sizes:
        results: dict[str, dict[str, Any]] = {}
        kept: dict[str, list[Any]] = {}
        for device in devices:
            if device == "cpu" and n not in cpu_sizes:
                continue
            t = time.perf_counter()
            s = Searcher(n, device, on_device=device == "cuda" and n not in cpu_sizes)
            print(f"{n:,} passages on {device}: made in {time.perf_counter() - t:.0f}s", flush=True)
            qn = queries if device == "cuda" else queries[: args.cpu_queries]
            r: dict[str, Any] = {}
            for b in (1, 32):
                r[f"flat_{b}"] = s.time(s.flat_search, qn, b, 100)
                r[f"doc_{b}"] = s.time(s.doc_stage, qn, b, 100)
                r[f"passage_{b}"] = s.time_passage_stage(qn, b)
                r[f"dhr_{b}"] = s.time(s.dhr, qn, b, 100)
                r[f"transfer_{b}"] = s.transfer_ms(b) / b
                r[f"launches_{b}"] = s.launches(qn, b)
            if s.stage.graphs:  # the same DHR without CUDA graphs, and whether both give the same hits
                graphed = s.dhr(queries[:20], 100)
                s.stage.fuse = False  # each stage on its own: the document stage eager, the grid graphed
                r["dhr_1_apart"] = s.time(s.dhr, qn, 1, 100)
                r["dhr_32_apart"] = s.time(s.dhr, qn, 32, 100)
                apart = s.dhr(queries[:20], 100)
                s.stage.fuse = True
                r["fused_equal_apart"] = sum(np.array_equal(a.positions, b.positions) and np.array_equal(a.scores, b.scores)
                                             for a, b in zip(graphed, apart, strict=True))
                s.stage.graphs = False
                r["dhr_1_eager"] = s.time(s.dhr, qn, 1, 100)
                r["dhr_32_eager"] = s.time(s.dhr, qn, 32, 100)
                r["launches_1_eager"] = s.launches(qn, 1)
                eager = s.dhr(queries[:20], 100)
                s.stage.graphs = True
                r["graphs_equal_eager"] = sum(np.array_equal(a.positions, b.positions) and np.array_equal(a.scores, b.scores)
                                              for a, b in zip(graphed, eager, strict=True))
            r["graph_note"] = s.stage.graph_note or ("CUDA graphs on" if s.stage.graphs else "eager")
            if device == "cuda" and n in {int(x) for x in args.profile_sizes.split(",") if x}:
                try:
                    prof = s.graph_profile(qn)
                except Exception as e:  # noqa: BLE001 - a lent GPU runs once: the failure is recorded, the rest goes on
                    prof = {"error": f"{type(e).__name__}: {e}", "whole call ms": float("nan"),
                            "kernels per call": float("nan"), "kernel us per call": float("nan")}
                out[f"DHR 1 query taken apart ({n:,} passages)"] = prof
                rep.add({"measure": f"DHR 1 query: GPU time per graph replay / whole call, ms ({n:,} passages)",
                         "cuda": f"{prof.get('gpu ms per replay', float('nan')):.3f} / {prof['whole call ms']:.3f}"},
                        prof, key=f"profile-{n}")
                rep.add({"measure": f"DHR 1 query: kernels per call, their µs ({n:,} passages)",
                         "cuda": f"{prof['kernels per call']:.0f}, {prof['kernel us per call']:.0f}"}, key=f"kern-{n}")
            results[device] = r
            if not checked:
                kept[device] = s.dhr(queries[:20], 100)
            del s
            if device == "cuda":
                torch.cuda.empty_cache()
        if not checked and len(kept) == 2:
            same = sum(np.array_equal(a.positions, b.positions) and np.allclose(a.scores, b.scores, atol=1e-5)
                       for a, b in zip(kept["cpu"], kept["cuda"], strict=True))
            out[f"dhr identical to cpu at {n}"] = same
            rep.add({"measure": f"DHR top 100 identical to the CPU path ({n:,} passages)", "cuda": f"{same}/20"},
                    {"identical": same, "of": 20}, key=f"identical-{n}")
            checked = True
        for key, what in (("flat_1", "flat exact, 1 query"), ("flat_32", "flat exact, batch of 32"),
                          ("doc_1", "DHR document stage alone, 1 query"), ("doc_32", "DHR document stage, batch of 32"),
                          ("passage_1", "DHR passage stage alone, 1 query"),
                          ("passage_32", "DHR passage stage, batch of 32"),
                          ("transfer_1", "its one device-to-host copy, 1 query"),
                          ("transfer_32", "its one device-to-host copy, batch of 32"),
                          ("dhr_1", "DHR, 1 query"), ("dhr_32", "DHR, batch of 32")):
            row = {"measure": f"{what}, ms/query, {n:,} passages"}
            for device in ("cpu", "cuda"):
                if device in results:
                    row[device] = round(results[device][key], 4)
                else:
                    row[device] = NO_GPU if device == "cuda" and "cuda" not in devices else "not run"
            out[row["measure"]] = {d: results[d][key] for d in results}
            rep.add(row, out[row["measure"]], key=row["measure"])
        for key, what in (("dhr_1_eager", "DHR without CUDA graphs, 1 query"),
                          ("dhr_32_eager", "DHR without CUDA graphs, batch of 32"),
                          ("dhr_1_apart", "DHR, document stage outside the graph, 1 query"),
                          ("dhr_32_apart", "DHR, document stage outside the graph, batch of 32")):
            if any(key in r for r in results.values()):
                row = {"measure": f"{what}, ms/query, {n:,} passages", "cpu": "–"}
                for device, r in results.items():
                    if key in r:
                        row[device] = round(r[key], 4)
                out[row["measure"]] = {d: r[key] for d, r in results.items() if key in r}
                rep.add(row, out[row["measure"]], key=row["measure"])
        for device, r in results.items():
            if "fused_equal_apart" in r:
                label = f"DHR with the document stage in the graph equal to apart, 20 queries ({n:,} passages)"
                out[label] = r["fused_equal_apart"]
                rep.add({"measure": label, device: f"{r['fused_equal_apart']}/20"}, {"equal": r["fused_equal_apart"]},
                        key=label)
            if "graphs_equal_eager" in r:
                label = f"DHR with CUDA graphs equal to eager, 20 queries ({n:,} passages)"
                out[label] = r["graphs_equal_eager"]
                rep.add({"measure": label, device: f"{r['graphs_equal_eager']}/20"}, {"equal": r["graphs_equal_eager"]},
                        key=label)
                label = f"DHR launches per batch of 1 without graphs ({n:,} passages)"
                out[label] = r["launches_1_eager"]
                rep.add({"measure": label, device: ", ".join(f"{k} {v}" for k, v in r["launches_1_eager"].items())},
                        r["launches_1_eager"], key=label)
            out[f"graphs {device} {n}"] = r["graph_note"]
        for b in (1, 32):
            row = {"measure": f"DHR launches per batch of {b} ({n:,} passages)"}
            for device in ("cpu", "cuda"):
                row[device] = ", ".join(f"{k} {v}" for k, v in results[device][f"launches_{b}"].items()) \
                    if device in results else "not run"
            out[row["measure"]] = {d: results[d][f"launches_{b}"] for d in results}
            rep.add(row, out[row["measure"]], key=row["measure"])
        for device, r in results.items():
            ratio = r["dhr_1"] / r["doc_1"]
            label = f"DHR / its document stage, 1 query, {n:,} passages ({device})"
            out[label] = ratio
            rep.add({"measure": label, device: round(ratio, 3)}, {"ratio": ratio}, key=label)
    return out


def derive(search: dict[str, Any]) -> dict[str, float]:
    """Within-run ratios of the search part (what expected.yaml records: speed is never an absolute time there)."""
    out: dict[str, float] = {}
    for key, v in search.items():  # agreement counts as fractions of the queries compared
        if key.startswith("dhr identical to cpu at "):
            out[f"DHR top 100 identical to the CPU path, fraction of 20 queries, {int(key.rsplit(' ', 1)[-1]):,} passages"] = v / 20
        elif key.startswith(("DHR with CUDA graphs equal to eager, 20 queries",
                             "DHR with the document stage in the graph equal to apart, 20 queries")):
            out[key.replace("20 queries", "fraction of 20 queries")] = v / 20
    sizes = sorted({int(k.rsplit(", ", 1)[-1].split()[0].replace(",", "")) for k in search
                    if k.startswith("DHR, 1 query, ms/query")})
    for n in sizes:
        def get(what: str, device: str = "cuda", n: int = n) -> float | None:
            v = search.get(f"{what}, ms/query, {n:,} passages", {})
            return v.get(device) if isinstance(v, dict) else None

        pairs = {
            "DHR / its document stage, 1 query": (get("DHR, 1 query"), get("DHR document stage alone, 1 query")),
            "DHR / flat exact, 1 query": (get("DHR, 1 query"), get("flat exact, 1 query")),
            "DHR / flat exact, batch of 32": (get("DHR, batch of 32"), get("flat exact, batch of 32")),
            "DHR batch of 32 / DHR 1 query, per query": (get("DHR, batch of 32"), get("DHR, 1 query")),
            "DHR with CUDA graphs / without, 1 query": (get("DHR, 1 query"), get("DHR without CUDA graphs, 1 query")),
            "DHR fused / document stage outside the graph, 1 query": (
                get("DHR, 1 query"), get("DHR, document stage outside the graph, 1 query")),
        }
        for label, (a, b) in pairs.items():
            if a is not None and b:
                out[f"{label}, {n:,} passages (cuda)"] = a / b
    return out


# -- a real collection: the default DHR per stage, BM25's host part apart ---------------------------------------
def collection_rows(rep: Report, args: argparse.Namespace, devices: list[str]) -> dict[str, Any]:
    """``--collection DIR`` (a build, e.g. the one ``bench.gpu_encode --work`` made): DHR per stage on each device.

    For the default (``hybrid-max`` documents, hybrid passage stage) and the
    dense configuration (``mean`` documents, ``passage_alpha`` 0): the median
    per query of each trace step (query encoding, document stage, passage
    stage) for single queries and batches of 32, and BM25's part of the
    default alone (its passage search at the hybrid-max depth, which runs on
    the host whatever the device). In the dense configuration on a torch
    device the document search runs inside the passage stage (one graph on
    a GPU), so its time is in the passage stage's row.
    """
    from bench.common import data_dir
    from hiera.builds import open_collection
    from hiera.eval.questions import load_questions
    from hiera.retrieve import get_retriever
    from hiera.score.docstage import HYBRID_DEPTH

    qs = [q.text for q in load_questions(data_dir() / "squad" / "dev-v1.1.first24.json", "squad",
                                         limit=args.collection_queries)]
    out: dict[str, Any] = {}
    configs = {"default": {}, "dense": {"doc_stage": "mean", "passage_alpha": 0.0}}
    for device in devices:
        col = open_collection(args.collection, device=device, dense_search="exact")
        col.warmup()
        for name, params in configs.items():
            r = get_retriever("dhr", col, **params)
            for b in (1, 32):
                r.batch_search(qs[:b], k=100)  # warm: kernels, graphs, caches
                steps: dict[str, list[float]] = {}
                t = time.perf_counter()
                for s in range(0, len(qs), b):
                    for res in r.batch_search(qs[s : s + b], k=100):
                        for st in res.trace:
                            steps.setdefault(st.name, []).append(st.ms)
                total = (time.perf_counter() - t) * 1000 / len(qs)
                for step in ("encode-query", "doc-stage", "passage-stage"):
                    label = f"{args.collection.name} dhr {name}: {step}, batch {b}, ms/query (median)"
                    v = float(np.median(steps.get(step, [0.0])))
                    out.setdefault(label, {})[device] = v
                    rep.add({"measure": label, device: round(v, 3)}, key=f"{label}-{device}")
                label = f"{args.collection.name} dhr {name}: whole search, batch {b}, ms/query"
                out.setdefault(label, {})[device] = total
                rep.add({"measure": label, device: round(total, 3)}, key=f"{label}-{device}")
        bm = col.bm25_passages
        bm.search(qs[0], HYBRID_DEPTH)
        t = time.perf_counter()
        for q in qs:
            bm.search(q, HYBRID_DEPTH)
        label = f"{args.collection.name} dhr default: its BM25 passage search (host), ms/query"
        out.setdefault(label, {})[device] = (time.perf_counter() - t) * 1000 / len(qs)
        rep.add({"measure": label, device: round(out[label][device], 3)}, key=f"{label}-{device}")
        out[f"{args.collection.name} passages"] = col.n_passages
    return out


# -- training --------------------------------------------------------------------------------------------------
def train_rows(rep: Report, args: argparse.Namespace, devices: list[str]) -> dict[str, Any]:
    from hiera.corpus.store import CorpusStore
    from hiera.eval.questions import load_questions
    from hiera.index.build import BuildOptions
    from hiera.train.args import ReaderArgs
    from hiera.train.reader import train_reader

    # the 44 SQuAD train articles alone, BM25 only: bench.gpu_reader's collection for this file
    train_file = data_dir() / "squad" / "train-du2017-44articles.json"
    root = WORK / f"reader-train-{train_file.stem}"
    ensure_collection(root, [([train_file], "squad")], options=BuildOptions(dense=False))
    store = CorpusStore(root)
    qs = load_questions(train_file, "squad", rules=store.rules)
    store.close()
    out: dict[str, Any] = {}
    for device in devices:
        tmp = Path(tempfile.mkdtemp(prefix="gpu-bench-reader-"))
        try:
            meta = train_reader(root, qs, tmp / "reader", ReaderArgs(
                max_steps=args.train_steps, max_examples=max(200, 16 * args.train_steps), save_steps=10_000,
                progress=False, device=device), log=lambda m: None)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        tr = meta["train"]
        out[device] = tr
        row = {"measure": f"train-reader steps/s (16 questions × 2 passages a step; peak MB {device})",
               device: f"{tr['steps_per_second']:.3f} ({tr.get('peak_gpu_mb', tr['peak_rss_mb']):.0f} MB)"}
        rep.add(row, tr, key=f"train-{device}")
    if "cuda" not in devices:
        rep.add({"measure": "train-reader steps/s (cuda)", "cuda": NO_GPU}, echo=False)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--encode-passages", type=int, default=1_000_000, help="passages encoded on the GPU")
    ap.add_argument("--cpu-encode-passages", type=int, default=2_000, help="passages encoded on the CPU (≈ 90/s)")
    ap.add_argument("--sizes", default="1000000,5000000,21000000", help="synthetic passages, GPU")
    ap.add_argument("--cpu-sizes", default="1000000", help="the sizes the CPU runs too")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--profile-sizes", default="", help="sizes whose single-query DHR is taken apart (GPU time, kernels)")
    ap.add_argument("--cpu-queries", type=int, default=64, help="queries timed on the CPU (seconds each at 1M)")
    ap.add_argument("--train-steps", type=int, default=20)
    ap.add_argument("--skip-encode", action="store_true")
    ap.add_argument("--skip-search", action="store_true")
    ap.add_argument("--skip-train", action="store_true")
    ap.add_argument("--collection", type=Path, default=None,
                    help="a built collection: the default DHR per stage there, BM25's host part apart")
    ap.add_argument("--collection-queries", type=int, default=256)
    ap.add_argument("--derive", type=Path, default=None,
                    help="add the within-run ratios to an existing gpu JSON (e.g. one a lent GPU wrote) and stop")
    args = ap.parse_args()
    if args.derive is not None:
        import json

        data = json.loads(args.derive.read_text())
        data["parts"]["ratios"] = derive(data["parts"]["search"])
        args.derive.write_text(json.dumps(data, indent=2))
        for label, v in data["parts"]["ratios"].items():
            print(f"{label}: {v:.3f}")
        return

    import torch

    devices = _devices()
    gpu = torch.cuda.get_device_name() if "cuda" in devices else NO_GPU
    print(f"devices: {devices} ({gpu}); CPU threads {torch.get_num_threads()}")
    rep = Report("gpu", columns=["measure", "cpu", "cuda"])
    parts: dict[str, Any] = {}
    if not args.skip_encode:
        parts["encode"] = encode_rows(rep, args, devices)
    if not args.skip_search:
        parts["search"] = search_rows(rep, args, devices)
    if "search" in parts:
        parts["ratios"] = derive(parts["search"])
        for label, v in parts["ratios"].items():
            rep.add({"measure": label, "cuda": round(v, 3)}, key=f"ratio {label}")
    if args.collection is not None:
        parts["collection"] = collection_rows(rep, args, devices)
    if not args.skip_train:
        parts["train"] = train_rows(rep, args, devices)
    for row in rep.rows:
        row.setdefault("cuda", NO_GPU if "cuda" not in devices else "–")
        row.setdefault("cpu", "–")
    rep.print(f"GPU vs CPU, one run ({gpu}; CPU: {torch.get_num_threads()} threads)")
    rep.write(gpu=gpu, devices=devices, args={k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
              parts=parts, work=str(WORK))


if __name__ == "__main__":
    main()
