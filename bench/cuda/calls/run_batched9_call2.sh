#!/bin/bash
# batched9 device call 2: built-in defaults now DS_MVB_WG=12 (Q4_K block kernel, n128, no cluster) and DS_MVB_WG_Q6K=6
# (Q6_K ring, no cluster); Q4_K n64 (9) and the Q6_K block form (8) A/B; kernel times, 9B batched decode, tests, memcheck.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsb9; mkdir -p "$W"
M=$W/mvb_bench; xz -dc "$D/mvb_bench.xz" > "$M" && chmod +x "$M"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures"
X=$B/deltaserve
LIM=${LIM:-140}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
step() { local name=$1 limit=$2 log=$3; shift 3; [ $(el) -lt $LIM ] || { say "skip $name"; return 9; }
  say "== $name"; echo "==== $name" >> "$log"
  timeout "$limit" "$@" >> "$log" 2>&1 < /dev/null; local rc=$?; say "== $name rc=$rc"; tail -2 "$log" | cut -c1-250 | tee -a "$OUT/steps.log"; return $rc; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
[ -e "$W/m9B.ok" ] || ( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 12 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok"; echo "synth done $(el)" >> "$OUT/steps.log" ) &
for v in "DS_MVB_WG=12" "DS_MVB_WG=12 DS_MVB_BLK_WG=3" "DS_MVB_WG=9" "DS_MVB_WG=9 DS_MVB_BLK_WG=3" "DS_MVB_WG=4"; do
  step "timedef q4 $v" 25 "$OUT/mvb.log" env $v TAG=$(echo $v | tr -d ' ') "$M" timedef q4_k; done
for v in "DS_MVB_WG_Q6K=6" "DS_MVB_WG_Q6K=8" "DS_MVB_WG_Q6K=8 DS_MVB_BLK_WG=3" "DS_MVB_WG_Q6K=8 DS_MVB_BLK_WG=2"; do
  step "timedef q6 $v" 25 "$OUT/mvb.log" env $v TAG=$(echo $v | tr -d ' ') "$M" timedef q6_k; done
grep -E "^timedef" "$OUT/mvb.log" | awk '{print $2, $3, $4, $6, $7}' > "$OUT/timedef.txt"
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 120 ]; do sleep 1; done
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --json $OUT/cb.jsonl"
cb() { local name=$1 e=$2; shift 2; [ $(el) -lt $LIM ] || { say "skip cb $name"; return; }; say "== cb $name"; echo "==== $name ($e $*)" >> "$OUT/cb.log"; env $e timeout 20 $C "$@" >> "$OUT/cb.log" 2>&1; say "== cb $name rc=$?"; grep -E "^decode" "$OUT/cb.log" | tail -1 | tee -a "$OUT/steps.log"; }
O="DS_MVB_WG=4 DS_MVB_WG_Q6K=1"
cb "64 default (12, q6 6)" "DS_X=0" --batch 64 --breakdown --top 4
cb "64 9, q6 6" "DS_MVB_WG=9" --batch 64 --breakdown --top 4
cb "64 old (4, q6 1)" "$O" --batch 64 --breakdown --top 4
cb "64 12 + q6 8" "DS_MVB_WG_Q6K=8" --batch 64 --breakdown --top 4
cb "32 default" "DS_X=0" --batch 32 --breakdown --top 4
cb "32 default q6 min 25" "DS_MVB_WG_Q6K_MIN=25" --batch 32
cb "32 old" "$O" --batch 32
cb "8 default" "DS_X=0" --batch 8
cb "64 default again" "DS_X=0" --batch 64
cb "64 old again" "$O" --batch 64
step "test_cuda batched 12,9,q6,q8 (q6 min 25)" 40 "$OUT/tests.log" env DS_MVB_WG_Q6K_MIN=25 DS_TEST_MVB_WG=12,9,q6,q8 "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvecBatched.*'
step "test_cuda batched defaults (-1)" 55 "$OUT/tests.log" env DS_TEST_MVB_WG=-1 "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvecBatched.*'
step test_cuda_model 30 "$OUT/tests.log" "$B/test_cuda_model" --gtest_brief=1
step test_cuda_prefill 20 "$OUT/tests.log" "$B/test_cuda_prefill" --gtest_brief=1
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
step "memcheck batched 12,9,q6,q8" 30 "$OUT/memcheck.log" env DS_MVB_WG_Q6K_MIN=25 DS_TEST_MVB_WG=12,9,q6,q8 $SAN --tool memcheck --error-exitcode 3 "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvecBatched.RunToRunIdentical:CudaMatvecBatched.Accumulate:CudaMatvecBatched.RowScalesAndOutliers'
step "test_cuda_model q6 8" 20 "$OUT/tests.log" env DS_MVB_WG_Q6K=8 "$B/test_cuda_model" --gtest_brief=1 --gtest_filter='CudaState.*'
cb "25 default" "DS_X=0" --batch 25
cb "25 old" "$O" --batch 25
cb "64 12 + q6 8 again" "DS_MVB_WG_Q6K=8" --batch 64
grep -E "FAILED|PASSED|tests ran|Failure|ERROR SUMMARY" "$OUT/tests.log" "$OUT/memcheck.log" | head -40 | tee -a "$OUT/steps.log"
grep -E "^matvec_batched" "$OUT/tests.log" > "$OUT/errors.txt"
say done
cd "$OUT" && tar czf all.tgz *.log *.txt *.jsonl 2>/dev/null; ls -la "$OUT"
