#!/bin/bash
# batched9 device call: Q4_K block kernel (matvec_wgmma_block.cuh, DS_MVB_WG 8..12) - kernel times per variant,
# 9B batched decode A/B, batched tests per config, model / prefill tests, memcheck on the new kernel's tests.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsb9; mkdir -p "$W"
M=$W/mvb_bench; xz -dc "$D/mvb_bench.xz" > "$M" && chmod +x "$M"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures"
X=$B/deltaserve
export DS_MVB_WG=${DEF:-8}  # the candidate default (the binary's built-in default is still 4); runs below override it
LIM=${LIM:-280}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
step() { local name=$1 limit=$2 log=$3; shift 3; [ $(el) -lt $LIM ] || { say "skip $name"; return 9; }
  say "== $name"; echo "==== $name" >> "$log"
  timeout "$limit" "$@" >> "$log" 2>&1 < /dev/null; local rc=$?; say "== $name rc=$rc"; tail -2 "$log" | cut -c1-250 | tee -a "$OUT/steps.log"; return $rc; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 12 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok"; echo "synth done $(el)" >> "$OUT/steps.log" ) &
# kernel times: ring (4, the old default) vs block variants, by shape and with forced warpgroups
for v in 4 8 9 10 11 12 "8 DS_MVB_BLK_WG=2" "8 DS_MVB_BLK_WG=3"; do
  set -- $v; tag="wg$1${2:+_${2#DS_MVB_BLK_WG=}}"
  step "timedef $tag" 25 "$OUT/mvb.log" env DS_MVB_WG=$1 ${2:-DS_X=0} TAG=$tag "$M" timedef q4_k
done
for v in 1 5 6 "5 DS_MVB_BLK_WG=2"; do
  set -- $v; tag="q6_$1${2:+_${2#DS_MVB_BLK_WG=}}"
  step "timedef $tag" 25 "$OUT/mvb.log" env DS_MVB_WG_Q6K=$1 ${2:-DS_X=0} TAG=$tag "$M" timedef q6_k
done
grep -E "^timedef" "$OUT/mvb.log" > "$OUT/timedef.txt"
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 120 ]; do sleep 1; done
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --json $OUT/cb.jsonl"
cb() { local name=$1 e=$2; shift 2; [ $(el) -lt $LIM ] || { say "skip cb $name"; return; }; say "== cb $name"; echo "==== $name ($e $*)" >> "$OUT/cb.log"; env $e timeout 20 $C "$@" >> "$OUT/cb.log" 2>&1; say "== cb $name rc=$?"; grep -E "^decode" "$OUT/cb.log" | tail -1 | tee -a "$OUT/steps.log"; }
cb "64 default(8)" "DS_X=0" --batch 64 --breakdown --top 4
cb "64 ring4" "DS_MVB_WG=4" --batch 64 --breakdown --top 4
cb "64 wg11" "DS_MVB_WG=11" --batch 64
cb "64 wg10" "DS_MVB_WG=10" --batch 64
cb "64 wg8 q6ring5" "DS_MVB_WG_Q6K=5" --batch 64 --breakdown --top 4
cb "64 wg8 q6ring6" "DS_MVB_WG_Q6K=6" --batch 64
cb "32 default(8)" "DS_X=0" --batch 32 --breakdown --top 4
cb "32 ring4" "DS_MVB_WG=4" --batch 32
cb "40 wg8 q6ring5" "DS_MVB_WG_Q6K=5" --batch 40
cb "40 ring4" "DS_MVB_WG=4" --batch 40
cb "8 default" "DS_X=0" --batch 8
cb "64 default again" "DS_X=0" --batch 64
cb "64 ring4 again" "DS_MVB_WG=4" --batch 64
# tests: each new config alone (a crash stays in its process), then the default / Q6_K configs, model, prefill
for c in 8,9,10,12 11 q5,q6 q7 -1; do
  step "test_cuda batched cfg $c" 60 "$OUT/tests.log" env DS_TEST_MVB_WG=$c "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvecBatched.*'
done
step "test_cuda_model (wg8, q6 ring 5)" 60 "$OUT/tests.log" env DS_MVB_WG_Q6K=5 "$B/test_cuda_model" --gtest_brief=1
step "test_cuda_prefill (wg8, q6 ring 5)" 40 "$OUT/tests.log" env DS_MVB_WG_Q6K=5 "$B/test_cuda_prefill" --gtest_brief=1
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
step "memcheck batched wg8,q5" 70 "$OUT/memcheck.log" env DS_TEST_MVB_WG=8,q5 $SAN --tool memcheck --error-exitcode 3 "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvecBatched.RunToRunIdentical:CudaMatvecBatched.Accumulate'
LIM=$((LIM + 30)) step "test_cuda CudaMatvec.*" 55 "$OUT/tests.log" "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvec.*'
grep -E "FAILED|PASSED|tests ran|Failure|ERROR SUMMARY" "$OUT/tests.log" "$OUT/memcheck.log" | head -40 | tee -a "$OUT/steps.log"
grep -E "^matvec_batched" "$OUT/tests.log" > "$OUT/errors.txt"
say done
cd "$OUT" && tar czf all.tgz *.log *.txt *.jsonl 2>/dev/null; ls -la "$OUT"
