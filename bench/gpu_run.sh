#!/usr/bin/env bash
# Every GPU measurement of DHR search and encoding in one call on a lent machine, packed as ../shared/gpu/README.md says
# (`pack.py --faiss --data` with the four files of bench.tokenize_speed.SOURCES), run from the checkout's root:
#
#   source .gpu/setup.sh && bash bench/gpu_run.sh
#
# 1. bench.gpu's search part: flat exact and DHR per stage at 1M (against the CPU), 5M and 21M synthetic passages;
# 2. bench.gpu_encode: tokenizing alone, the encoder end to end with where its host time went, the model alone,
#    the pipeline at other settings, sentence-transformers beside it, cosine to the CPU, a whole `hiera build
#    --device cuda`, and `hiera eval` on the GPU against the CPU (both exact);
# 3. bench.gpu --collection on that build: the default DHR and its dense configuration per stage;
# 4. (part "recall", not by default: it needs `bash bench/gpu_sources.sh pack` here and ".gpu-sources" carried too)
#    bench.filters_recall on bench.scale_real's store of the pooled corpus and 1M real-text distractor passages,
#    made and encoded on the device: filtered HNSW32 search against exact, by allowed share.
# JSON and logs go to $OUT (the device tool's folder) or bench/out/gpu-run. Each part has its own time limit, so one
# that hangs leaves the others measured. GPU_RUN_PARTS (default "search encode collection"; "recall" too) picks parts,
# GPU_RUN_SEARCH_ARGS replaces bench.gpu's sizes and query counts, GPU_RUN_ENCODE_ARGS adds to bench.gpu_encode's
# (default "--variants 60000"; "--skip-build" stops after (c)).
set -u
OUT=${OUT:-bench/out/gpu-run}
mkdir -p "$OUT"
WORK=${GPU_RUN_WORK:-/tmp/gpu-run}
PARTS=${GPU_RUN_PARTS:-search encode collection}
python3 - <<'EOF' | tee "$OUT/versions.txt"
import importlib
for m in ("torch", "transformers", "sentence_transformers", "tokenizers", "numpy", "faiss"):
    try:
        print(m, importlib.import_module(m).__version__)
    except Exception as e:  # noqa: BLE001
        print(m, "missing:", e)
EOF
nvidia-smi --query-gpu=name,memory.total,clocks.sm --format=csv,noheader 2>/dev/null | tee -a "$OUT/versions.txt"
show() { grep -v "^{" || true; }
if [[ " $PARTS " == *" search "* ]]; then
  rm -f bench/out/gpu.json
  # shellcheck disable=SC2086 # the arguments are words
  timeout "${GPU_RUN_SEARCH_S:-240}" python3 -m bench.gpu --skip-encode --skip-train \
    ${GPU_RUN_SEARCH_ARGS:---sizes 1000000,5000000,21000000 --cpu-sizes 1000000 --queries 100 --cpu-queries 8 \
    --profile-sizes 5000000} 2>&1 | tee "$OUT/search.log" | show
  cp bench/out/gpu.json "$OUT/gpu-search.json" 2>/dev/null
fi
if [[ " $PARTS " == *" encode "* ]]; then
  rm -rf "$WORK" && mkdir -p "$WORK"
  # shellcheck disable=SC2086 # the extra arguments are words
  OUT="$OUT" timeout "${GPU_RUN_ENCODE_S:-300}" python3 -m bench.gpu_encode --distractors 100000 --st-passages 10000 \
    --questions 100 --work "$WORK" ${GPU_RUN_ENCODE_ARGS:---variants 60000} 2>&1 | tee "$OUT/encode.log" | show
fi
if [[ " $PARTS " == *" collection "* ]] && [ -d "$WORK/coll" ]; then
  rm -f bench/out/gpu.json
  timeout "${GPU_RUN_COLLECTION_S:-120}" python3 -m bench.gpu --skip-encode --skip-train --skip-search \
    --collection "$WORK/coll" --collection-queries 64 2>&1 | tee "$OUT/collection.log" | show
  cp bench/out/gpu.json "$OUT/gpu-collection.json" 2>/dev/null
fi
if [[ " $PARTS " == *" recall "* ]]; then
  # shellcheck disable=SC1091 # made by the pack step
  source bench/gpu_sources.sh unpack
  # shellcheck disable=SC2086 # the arguments are words
  OUT="$OUT" timeout "${GPU_RUN_RECALL_S:-420}" python3 -m bench.filters_recall \
    ${GPU_RUN_RECALL_ARGS:---no-cache --device cuda --distractors 1000000 --queries 100} 2>&1 | tee "$OUT/recall.log" \
    | show
fi
ls -la "$OUT"
