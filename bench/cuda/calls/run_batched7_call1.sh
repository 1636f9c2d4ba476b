#!/bin/bash
# Record of the batched7 helper's device call 1 (2026-12-03). Lives in devwork-b7/ (ignored, in the session checkout)
# with b.tar.xz = tools/gpu_bundle.sh output (deltaserve, test_cuda, test_cuda_model, libs without cuBLAS/cudart, fixtures;
# stripped) and mvb_bench.xz (bench/cuda/matvec_batched_bench_standalone.cu, nvcc -arch=sm_90a -DDS_HAVE_SM90A=1, stripped);
# carried and run as OUT=$OUT bash devwork-b7/go1.sh.
# batched7 call 1: wgmma Q6_K kernel: accuracy (mvb_bench checkwg6), kernel times (timeq q6_k), 9B batched decode
# at 8 / 32 / 64 with and without (DS_MVB_WG_Q6K=0), variants at 64, breakdown at 64, batched + model tests.
set -u
cd "$(dirname "$0")/.."
D=$PWD/devwork-b7; B=$D/bundle; W=/tmp/dsf; mkdir -p "$W"
[ -x "$B/deltaserve" ] || (cd "$D" && tar xJf b.tar.xz)
M=/tmp/mvb_bench; [ -x "$M" ] || { xz -dc "$D/mvb_bench.xz" > "$M" && chmod +x "$M"; }
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures"
X=$B/deltaserve
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
step() { local name=$1 limit=$2 log=$3; shift 3; say "== $name"; echo "==== $name" >> "$log"
  timeout "$limit" "$@" >> "$log" 2>&1; local rc=$?; say "== $name rc=$rc"; tail -2 "$log" | cut -c1-200 | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 12 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok"; echo "synth done $(el)" >> "$OUT/steps.log" ) &
step "checkwg6" 40 "$OUT/mvb.log" "$M" checkwg6
grep -E "^check|BAD|wgmma" "$OUT/mvb.log" | tee -a "$OUT/steps.log"
step "timeq q6_k" 40 "$OUT/mvb.log" "$M" timeq q6_k
grep -E "^time .*B (8|32|64) (fold2|wg6)" "$OUT/mvb.log" >> "$OUT/steps.log"
step "test_cuda batched" 110 "$OUT/tests.log" "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvecBatched.*'
grep -E "^matvec_batched|FAILED|PASSED" "$OUT/tests.log" | tee -a "$OUT/steps.log"
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 200 ]; do sleep 1; done
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --json $OUT/cb.jsonl"
step "breakdown 64" 15 "$OUT/cb.log" $C --batch 64 --breakdown --top 16
for b in 8 32 64; do step "batch $b" 10 "$OUT/cb.log" $C --batch $b; done
for b in 32 64; do DS_MVB_WG_Q6K=0 step "old batch $b" 10 "$OUT/cb.log" $C --batch $b; done
for b in 8 32 64; do DS_MVB_WG_Q6K=0 DS_RMS_V4=0 step "both old batch $b" 10 "$OUT/cb.log" $C --batch $b; done
step "batch 25" 10 "$OUT/cb.log" $C --batch 25
DS_MVB_WG_Q6K=0 step "old batch 25" 10 "$OUT/cb.log" $C --batch 25
grep -E "^decode" "$OUT/cb.log" | tee -a "$OUT/steps.log"
step "test_cuda_model" 30 "$OUT/tests.log" "$B/test_cuda_model" --gtest_brief=1 --gtest_filter='CudaState.*'
grep -E "FAILED|PASSED" "$OUT/tests.log" | tee -a "$OUT/steps.log"
say done
