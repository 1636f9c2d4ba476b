#!/bin/bash
# Record of the decode9 H200 call 1 (2026-12-03; output docs/measurements/2026-12-03-h200-decode9-call1.txt). Carried as
# devwork-decode9/ in /work/main (the checkout the device tool copies) with b.tar.xz = tools/gpu_bundle.sh output of
# 427b543 (libcublas / libcudart removed, binaries stripped) and the A/B lines (one env setting per bench line):
#   lines9B.txt:
#     DS_DEFAULT=1
#     DS_MATVEC_STREAM_WIDE=0 DS_MATVEC_STREAM_Q6K_WIDE=0
#     DS_MATVEC_STREAM_CTAS=1
#     DS_MATVEC_STREAM_Q6K_CTAS=1
#     DS_MATVEC_STREAM_CTAS=1 DS_MATVEC_STREAM_Q6K_CTAS=1
#     DS_MATVEC_STREAM_Q6K_KC=16
#     DS_MATVEC_STREAM_STAGE2=1
#     DS_DEFAULT=1
#     DS_MATVEC_STREAM_WIDE=0 DS_MATVEC_STREAM_Q6K_WIDE=0
#     DS_MATVEC_STREAM_CTAS=1 DS_MATVEC_STREAM_Q6K_CTAS=1
#   lines_0.8B.txt:
#     DS_DEFAULT=1
#     DS_MATVEC_STREAM_WIDE=0 DS_MATVEC_STREAM_Q6K_WIDE=0
#     DS_MATVEC_STREAM_CTAS=1 DS_MATVEC_STREAM_Q6K_CTAS=1
#   lines_27B.txt:
#     DS_DEFAULT=1
#     DS_MATVEC_STREAM_WIDE=0 DS_MATVEC_STREAM_Q6K_WIDE=0
#     DS_MATVEC_STREAM_CTAS=1 DS_MATVEC_STREAM_Q6K_CTAS=1
#     DS_MATVEC_STREAM_Q6K_WIDE=0
#     DS_MATVEC_STREAM_WIDE=0
#     DS_DEFAULT=1
# Run: OUT=$OUT LIM=185 TC_LIM=110 bash devwork-decode9/go.sh (116 s + the cold start).
# decode9 call 1: 16-consumer-warp stream kernels (DS_MATVEC_STREAM_WIDE / DS_MATVEC_STREAM_Q6K_WIDE, default on).
# Phase 1 (parallel): synth 9B / 0.8B / 27B; test_cuda split in 3 processes; memcheck of StreamWideSmall;
# test_cuda_model (default, and 1 CTA x 16 warps everywhere), test_cuda_prefill. Phase 2: tg128 A/B lines, breakdowns.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve
LIM=${LIM:-230}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
step() { local name=$1 limit=$2 log=$3; shift 3; say "== $name"; echo "==== $name" >> "$log"
  timeout "$limit" "$@" >> "$log" 2>&1 < /dev/null; local rc=$?; say "== $name rc=$rc"; tail -2 "$log" | cut -c1-250 | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
"$X" --version | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( for s in 9B 0.8B 27B; do "$X" synth --size $s --type Q4_K_M --vocab "$W/vocab.gguf" --threads 8 -o "$W/m$s.gguf" >/dev/null 2>&1 && touch "$W/m$s.ok"; done ) &
tc() { ( timeout ${TC_LIM:-120} "$B/test_cuda" --gtest_brief=1 --gtest_filter="$2" > "$OUT/t_$1.log" 2>&1; echo "test_cuda $2 rc=$?" >> "$OUT/t_$1.log" ) & TCP="$TCP $!"; }
TCP=""
tc q4 'CudaMatvec.StreamQ4KVariants'
tc q6 'CudaMatvec.StreamQ6KVariants'
tc rest 'CudaMatvec.*-CudaMatvec.StreamQ4KVariants:CudaMatvec.StreamQ6KVariants'
step "memcheck StreamWideSmall" 90 "$OUT/tests.log" /usr/local/cuda/bin/compute-sanitizer --tool memcheck --leak-check no "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvec.StreamWideSmall'
grep -E "ERROR SUMMARY|\[stream wide\]" "$OUT/tests.log" | tee -a "$OUT/steps.log"
step "test_cuda_model default" 60 "$OUT/tests.log" "$B/test_cuda_model" --gtest_brief=1
step "test_cuda_model CTAS=1 both" 60 "$OUT/tests.log" env DS_MATVEC_STREAM_CTAS=1 DS_MATVEC_STREAM_Q6K_CTAS=1 "$B/test_cuda_model" --gtest_brief=1
step "test_cuda_prefill" 40 "$OUT/tests.log" "$B/test_cuda_prefill" --gtest_brief=1
wait $TCP
for f in q4 q6 rest; do tail -1 "$OUT/t_$f.log" | tee -a "$OUT/steps.log"; done
cat "$OUT"/t_*.log >> "$OUT/tests.log"; rm -f "$OUT"/t_*.log
grep -E "FAILED|PASSED|tests ran" "$OUT/tests.log" | tee -a "$OUT/steps.log"
grep -E '^\[(tc|stream|stream q6|stream wide)\]' "$OUT/tests.log" >> "$OUT/steps.log"
bench() { [ $(el) -lt $LIM ] || { say "skip $1 $2"; return; }
  step "bench $1 $2" 40 "$OUT/bench.log" env $2 "$X" bench -m "$W/m$1.gguf" --backend cuda -p 0 -n 128 -r 3 --json
  grep '^{' "$OUT/bench.log" | tail -1 | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); d['label']=sys.argv[1]; print(json.dumps(d))" "$2" >> "$OUT/bench.jsonl"
  tail -1 "$OUT/bench.jsonl" | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print('TG', d['model'], d['label'], d['tokens_per_s'])" | tee -a "$OUT/steps.log"; }
waitm() { while [ ! -e "$W/m$1.ok" ] && [ $(el) -lt $LIM ]; do sleep 1; done; [ -e "$W/m$1.ok" ]; }
bd() { [ $(el) -lt $LIM ] && step "breakdown $1 $2" 30 "$OUT/breakdown.log" env $2 "$X" cuda-bench -m "$W/m$1.gguf" --tg 16 --breakdown --top $3; }
waitm 9B && while read -r l; do bench 9B "$l"; done < "$D/lines9B.txt"
OLD="DS_MATVEC_STREAM_WIDE=0 DS_MATVEC_STREAM_Q6K_WIDE=0"
waitm 9B && { bd 9B DS_DEFAULT=1 220; bd 9B "$OLD" 220; bd 9B "DS_MATVEC_STREAM_CTAS=1 DS_MATVEC_STREAM_Q6K_CTAS=1" 220; }
for s in 0.8B 27B; do waitm $s || { say "no $s"; continue; }
  while read -r l; do bench $s "$l"; done < "$D/lines_$s.txt"; done
waitm 27B && { bd 27B DS_DEFAULT=1 30; bd 27B "$OLD" 30; }
say done
(cd "$OUT" && tar czf all.tgz --exclude all.tgz . && find . -type f ! -name all.tgz ! -name steps.log -delete)
