#!/bin/bash
# Record of the batched7 helper's device call 2 (2026-12-03). Lives in devwork-b7/ (ignored, in the session checkout)
# with b.tar.xz = tools/gpu_bundle.sh output (deltaserve, test_cuda, test_cuda_model, libs without cuBLAS/cudart, fixtures;
# stripped); carried and run as OUT=$OUT bash devwork-b7/go2.sh.
# batched7 call 2: new defaults (wgmma Q6_K from B = 41, auto 2-warpgroup CTAs pipelined, x prepared in one launch per
# product for the fold / wgmma / fp16 gemm kernels; DS_MVB_PREP=0 the 2-3 launches as before): batched tests without the
# long float64 sweep, the threshold measured in the 9B model (33 / 40 both ways, 41 / 48 with and without), model tests.
set -u
cd "$(dirname "$0")/.."
D=$PWD/devwork-b7; B=$D/bundle; W=/tmp/dsf; mkdir -p "$W"
[ -x "$B/deltaserve" ] || (cd "$D" && tar xJf b.tar.xz)
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures"
X=$B/deltaserve
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
step() { local name=$1 limit=$2 log=$3; shift 3; say "== $name"; echo "==== $name" >> "$log"
  timeout "$limit" "$@" >> "$log" 2>&1; local rc=$?; say "== $name rc=$rc"; tail -2 "$log" | cut -c1-200 | tee -a "$OUT/steps.log"; }
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 12 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok"; echo "synth done $(el)" >> "$OUT/steps.log" ) &
step "test_cuda batched" 50 "$OUT/tests.log" "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvecBatched.*:-CudaMatvecBatched.MatchesFloat64PerBatchRow'
grep -E "^matvec_batched|FAILED|PASSED|Failure" "$OUT/tests.log" | tee -a "$OUT/steps.log"
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 60 ]; do sleep 1; done
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --json $OUT/cb.jsonl"
step "breakdown 64" 12 "$OUT/cb.log" $C --batch 64 --breakdown --top 4
for b in 8 32 33 40 41 48; do step "batch $b" 10 "$OUT/cb.log" $C --batch $b; done
for b in 33 40; do DS_MVB_WG_Q6K_MIN=25 step "min25 batch $b" 10 "$OUT/cb.log" $C --batch $b; done
for b in 41 48 64; do DS_MVB_WG_Q6K=0 step "old batch $b" 10 "$OUT/cb.log" $C --batch $b; done
for b in 8 32 64; do DS_MVB_PREP=0 step "prep3 batch $b" 10 "$OUT/cb.log" $C --batch $b; done
step "batch 64 again" 10 "$OUT/cb.log" $C --batch 64
grep -E "^decode" "$OUT/cb.log" | tee -a "$OUT/steps.log"
L=$(( 108 - $(el) )); [ $L -lt 5 ] && L=5
step "test_cuda_model" $L "$OUT/tests.log" "$B/test_cuda_model"
grep -E "FAILED|PASSED|tests ran|^\[       OK|^\[  FAILED" "$OUT/tests.log" | tee -a "$OUT/steps.log"
say done
