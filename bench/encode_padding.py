"""How much of a GPU encoder's work is padding: batches by character length against batches re-cut by token count.

    python -m bench.encode_padding [--distractors 100000] [--batch 1024]

The streaming encoder cuts batches by character length (known before
tokenizing) and pads each to its longest text. Its tokenizer workers hand
back packed batches, and :func:`hiera.encode._regrouped` re-cuts
:data:`hiera.encode.REGROUP` consecutive ones together by token count. This
runs both on the same real passages (the GPU kit's collection:
``bench.gpu_encode.make_collection``, SQuAD and HotpotQA text plus recombined
distractors) through the encoder's own code, widths rounded as on a GPU
(:data:`hiera.encode.WIDTH_MULTIPLE`), and counts per setup: real tokens over
padded slots (the linear layers' useful share) and the sum of batch × width²
(the attention's work). A CPU measurement of what a GPU computes; no timing.

Writes ``bench/out/encode_padding.json``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import Report


def padding(texts: list[str], batch: int, window: int, multiple: int) -> dict[str, Any]:
    """Tokens, slots and batch × width² of ``texts`` batched as the streaming encoder batches them."""
    from hiera.backends import FastTokenizer
    from hiera.encode import _regrouped, resolve_model_path

    fast = FastTokenizer.load(resolve_model_path("all-MiniLM-L6-v2"))
    assert fast is not None
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    batches = [order[s : s + batch] for s in range(0, len(order), batch)]
    stream = (fast.packed([texts[i] for i in idx], multiple) for idx in batches)
    tokens = slots = square = 0
    for _, feats in _regrouped(stream, batches, window, multiple):
        n, w = feats["ids"].shape
        tokens += int(feats["lengths"].sum())
        slots += n * w
        square += n * w * w
    return {"batches": len(batches), "tokens": tokens, "slots": slots, "tokens_per_slot": tokens / slots,
            "batch_width_squared": square}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--distractors", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=1024)
    args = ap.parse_args()
    from bench.gpu_encode import collection_passages, make_collection
    from hiera.encode import REGROUP, WIDTH_MULTIPLE

    t = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="encode-padding-") as work:
        make_collection(Path(work) / "coll", args.distractors)
        texts = collection_passages(Path(work) / "coll")
    rep = Report("encode_padding", columns=["setup", "tokens per slot", "slots", "batch × width²"])
    out: dict[str, Any] = {"passages": len(texts)}
    for label, window in (("by character length", 1), (f"re-cut by token count, {REGROUP} batches at a time", REGROUP)):
        r = padding(texts, args.batch, window, WIDTH_MULTIPLE)
        out[label] = r
        rep.add({"setup": label, "tokens per slot": round(r["tokens_per_slot"], 3), "slots": r["slots"],
                 "batch × width²": r["batch_width_squared"]}, r, key=label)
    a, b = (out[k] for k in list(out)[1:3])
    out["slots, re-cut / by characters"] = b["slots"] / a["slots"]
    out["batch × width², re-cut / by characters"] = b["batch_width_squared"] / a["batch_width_squared"]
    for k in ("slots, re-cut / by characters", "batch × width², re-cut / by characters"):
        rep.add({"setup": k, "tokens per slot": round(out[k], 3)}, key=k)
    rep.print(f"Padding of {len(texts):,} real passages in batches of {args.batch:,} "
              f"({time.perf_counter() - t:.0f} s)")
    rep.write(args=vars(args), parts=out)


if __name__ == "__main__":
    main()
