#!/bin/bash
# Session 8 follow-up: the Q6_K wgmma threshold at 32 (was 33): its tests, and B = 25 / 28 / 32 with 25 vs 32.
set -u
cd "$(dirname "$0")"; D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv; mkdir -p $W
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures"
X=$B/deltaserve; T0=$(date +%s); say() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 12 -o "$W/m9B.gguf" > /dev/null 2>&1; touch $W/ok ) &
say tests; timeout 120 "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvecBatched*' 2>&1 | grep -E "PASSED|FAILED|tests ran|worst" | tail -12
timeout 60 "$B/test_cuda_model" --gtest_brief=1 2>&1 | grep -E "PASSED|FAILED|tests ran"
while [ ! -e $W/ok ]; do sleep 1; done
for b in 25 28 32; do for e in DS_DEFAULT=1 DS_MVB_WG_Q6K_MIN=25 DS_MVB_WG_Q6K_MIN=33; do
  say "batch $b $e"; env $e timeout 30 "$X" cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --batch $b --select 0 --json "$OUT/cb.jsonl" 2>&1 | grep "^decode"; done; done
say "batch 64 default"; timeout 30 "$X" cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --batch 64 --select 0 --json "$OUT/cb.jsonl" 2>&1 | grep "^decode"
say done
