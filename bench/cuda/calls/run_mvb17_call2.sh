#!/bin/bash
# mvb17 device call 2 (the binaries of call 1): 3 warpgroups (192-row tiles, more K splits) on every Q4_K block-kernel
# shape (DS_MVB_BLK_WG=3, env only; today's plan puts the split products on 2) vs the plan by shape: mvb_bench timedef
# q4_k and the 9B step at B = 64 short / long and B = 32, interleaved; then, only if the forced form is faster on
# ffn_down, CudaMatvecBatched shards with DS_MVB_BLK_WG=3 in the environment.
# Run from the ignored devwork-mvb17/ in /work/main as OUT=$OUT bash devwork-mvb17/go.sh.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsmvb17; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; T=$B/test_cuda; M=$B/mvb_bench
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 8 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok"; echo "[$(el)s] synth done" >> "$OUT/steps.log" ) &
td() { local tag=$1 e=$2; env TAG=$tag $e timeout 20 "$M" timedef q4_k >> "$W/td.log" 2>&1; say "td $tag rc=$? $(grep -E "^timedef $tag .*B 64" $W/td.log | awk '{print $4, $7}' | tr '\n' ' ')"; }
td base "X=0"
td wg3 "DS_MVB_BLK_WG=3"
td base2 "X=0"
td wg3_2 "DS_MVB_BLK_WG=3"
cp "$W/td.log" "$OUT/"
fd() { grep -E "^timedef $1 +Q4_K +ffn_down +B 64" $W/td.log | awk '{print $7}'; }
WIN=$(awk -v a="$(fd base2)" -v b="$(fd wg3_2)" 'BEGIN{print (b < 0.98 * a) ? 1 : 0}')
say "wg3 faster on ffn_down: $WIN"
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 40 ]; do sleep 1; done
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --select 0 --json $W/cb.jsonl"
cb() { local name=$1 e=$2; shift 2; echo "==== $name ($e $*)" >> "$W/cb.log"; env $e timeout 25 $C "$@" >> "$W/cb.log" 2>&1; say "cb $name rc=$? $(grep -E '^decode' $W/cb.log | tail -1 | cut -c1-90)"; }
cb "64 base" "X=0" --batch 64
cb "64 wg3" "DS_MVB_BLK_WG=3" --batch 64
cb "64 base2" "X=0" --batch 64
cb "64 wg3_2" "DS_MVB_BLK_WG=3" --batch 64
if [ "$WIN" = 1 ]; then
  cb "64L base" "X=0" --batch 64 --prompt 512 --ctx 1024
  cb "64L wg3" "DS_MVB_BLK_WG=3" --batch 64 --prompt 512 --ctx 1024
  cb "32 base" "X=0" --batch 32
  cb "32 wg3" "DS_MVB_BLK_WG=3" --batch 32
  REST='CudaMatvecBatched.*-*MatchesFloat64*-*WgmmaRing*-*SplitReduce*-*PrepReg*-*HlAndPrebuild*-*Q6KScaled*'
  sh() { local name=$1 sel=$2 filt=$3; ( env DS_TEST_MVB_WG=$sel DS_MVB_BLK_WG=3 timeout 55 "$T" --gtest_filter="$filt" > "$W/t_$name.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_$name.log" ) & }
  sh b "-1,13" 'CudaMatvecBatched.MatchesFloat64PerBatchRow'
  sh c "-1,13" "$REST"
  sh f "x" 'CudaMatvecBatched.SplitReduceSameBits:CudaMatvecBatched.PrepRegSameBits'
  wait
  for f in b c f; do say "test_cuda shard $f (DS_MVB_BLK_WG=3): $(grep -E '^\[  (PASSED|FAILED) |^\[==========\] .* ran|^rc' $W/t_$f.log | tr '\n' ' ')"; done
  grep -hE "FAILED|Failure|worst|differ" $W/t_*.log | sort | uniq -c | head -60 > "$OUT/test_summary.txt"
fi
cp "$W/cb.log" "$OUT/" 2>/dev/null
say done
