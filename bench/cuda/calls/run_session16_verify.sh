#!/bin/bash
# Session 16 verification of main's final source (DS_MVB_LEAN=2 the default): GPU model tests, the block kernel's
# same-bits tests, tg128 9B, the 9B step at 64 x 512+ and short. Run as OUT=$OUT bash devwork-v16/go.sh
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }; say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"; "$X" --version | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 12 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok" ) &
t() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > "$OUT/t_$n.log" 2>&1 < /dev/null; echo "rc=$?" >> "$OUT/t_$n.log"; say "$n $(grep -E '^rc=|PASSED|FAILED|SUMMARY' "$OUT/t_$n.log" | tr '\n' ' ' | cut -c1-200)"; }
say "== tests"
t model 90 "$B/test_cuda_model" --gtest_brief=1 & P1=$!
t block 90 "$B/test_cuda" --gtest_filter='CudaMatvecBatched.BlockLeanSameBits:CudaMatvecBatched.BlockBuildFastSameBits:CudaMatvecBatched.Accumulate*' & P2=$!
wait $P1 $P2
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 150 ]; do sleep 1; done
timeout 30 "$X" bench -m "$W/m9B.gguf" --backend cuda -p 0 -n 128 -r 3 --json 2>/dev/null < /dev/null | grep '^{' | tail -1 > "$OUT/bench.jsonl"
say "TG 9B $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens_per_s'])" "$OUT/bench.jsonl")"
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --select 0 --json $OUT/cb.jsonl"
for e in DS_DEFAULT=1 DS_MVB_LEAN=1 DS_DEFAULT=1 DS_MVB_LEAN=1; do env $e timeout 30 $C --batch 64 --prompt 512 --ctx 1024 >> "$OUT/cb.log" 2>&1 < /dev/null; say "B64x512 $e $(grep -E '^decode' "$OUT/cb.log" | tail -1 | cut -c1-90)"; done
timeout 30 $C --batch 64 >> "$OUT/cb.log" 2>&1 < /dev/null; say "B64 short $(grep -E '^decode' "$OUT/cb.log" | tail -1 | cut -c1-90)"
say done
