#!/bin/bash
# dec15 call 1 (H200): the two pending stream-kernel switches (DS_MATVEC_STREAM_XWAIT=1, DS_MATVEC_STREAM_ARRIVE_LANES=1)
# and the measurement of the short products' fixed cost.
# Phase A (all at once): CudaMatvec.Stream* at full shapes under XWAIT=1 + ARRIVE_LANES=1 (XL), XWAIT=1 alone (X) and
# ARRIVE_LANES=1 alone (L), the two long variant tests in 3 processes each (DS_TEST_STREAM_PART); racecheck / synccheck
# on the small shapes under XL; test_cuda_model and test_cuda_prefill under XL; model synthesis in the background.
# Phase B (one at a time): CudaMatvec.StreamTimeline (per-product timeline from the kernels' timestamp probe) default /
# XL / L2 hint variants, tg128 9B / 0.8B / 27B default vs XL interleaved (two each), X and L alone on the 9B, ncu of the
# timeline's first four stream kernels (in_proj, ssm_out, ffn_gate_up Q4_K, ffn_down Q6_K).
# Run as: OUT=$OUT bash devwork-dec15/go.sh
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv_dec15; rm -rf "$W"; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; TC=$B/test_cuda; LIM=${LIM:-150}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }; say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
syn() { nice "$X" synth --size $1 --type Q4_K_M --vocab "$W/vocab.gguf" --threads 6 -o "$W/m$1.gguf" >/dev/null 2>&1 && touch "$W/m$1.ok"; echo "[$(el)s] synth $1 done" >> "$OUT/steps.log"; }
( syn 9B; syn 0.8B ) &
( syn 27B ) &
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
XL="DS_MATVEC_STREAM_XWAIT=1 DS_MATVEC_STREAM_ARRIVE_LANES=1"
# t NAME LIMIT [VAR=value ...] COMMAND ARGS: the command under timeout with those variables, output in $W/t_NAME.log.
t() { local name=$1 lim=$2 ev=(); shift 2; while [[ "$1" == *=* ]]; do ev+=("$1"); shift; done
  echo "==== $name ${ev[*]} $*" > "$W/t_$name.log"; env "${ev[@]}" timeout $lim "$@" >> "$W/t_$name.log" 2>&1 < /dev/null; echo "rc=$?" >> "$W/t_$name.log"; }
say "== phase A"
P=()
for set in XL X L; do
  case $set in XL) E=$XL;; X) E=DS_MATVEC_STREAM_XWAIT=1;; L) E=DS_MATVEC_STREAM_ARRIVE_LANES=1;; esac
  for k in 0 1 2; do
    t ${set}_q4_$k 70 $E DS_TEST_STREAM_PART=$k/3 "$TC" --gtest_filter='CudaMatvec.StreamQ4KVariants' & P+=($!)
    t ${set}_q6_$k 70 $E DS_TEST_STREAM_PART=$k/3 "$TC" --gtest_filter='CudaMatvec.StreamQ6KVariants' & P+=($!)
  done
  t ${set}_rest 70 $E "$TC" --gtest_filter='CudaMatvec.StreamPrefetchHint:CudaMatvec.StreamWideSmall:CudaMatvec.StreamXprep*' & P+=($!)
done
t XL_model 70 $XL "$B/test_cuda_model" --gtest_brief=1 & P+=($!)
t XL_prefill 50 $XL "$B/test_cuda_prefill" --gtest_brief=1 & P+=($!)
SM="DS_TEST_STREAM_SMALL=1 DS_TEST_XPREP_SMALL=1 DS_TEST_XPREP_ITERS=2"
for k in 0 1; do
  t race_q4_$k 75 $XL $SM DS_TEST_STREAM_PART=$k/2 "$CS" --tool racecheck "$TC" --gtest_filter='CudaMatvec.StreamQ4KVariants' & P+=($!)
  t race_q6_$k 75 $XL $SM DS_TEST_STREAM_PART=$k/2 "$CS" --tool racecheck "$TC" --gtest_filter='CudaMatvec.StreamQ6KVariants' & P+=($!)
done
t race_rest 75 $XL $SM "$CS" --tool racecheck "$TC" --gtest_filter='CudaMatvec.StreamPrefetchHint:CudaMatvec.StreamWideSmall:CudaMatvec.StreamXprep*' & P+=($!)
t sync_all 75 $XL $SM "$CS" --tool synccheck "$TC" --gtest_filter='CudaMatvec.Stream*:-CudaMatvec.StreamTimeline' & P+=($!)
wait "${P[@]}"
say "== phase A done"
cat "$W"/t_*.log > "$OUT/tests.log"
for f in "$W"/t_*.log; do n=$(basename $f .log); say "${n#t_} | $(grep -E '^rc=|tests? ran|PASSED|FAILED|ERROR SUMMARY|RACECHECK SUMMARY|SYNCCHECK' $f | tr '\n' ' ' | cut -c1-200)"; done
grep -hE "^\[stream" "$W"/t_XL_*.log "$W"/t_X_*.log "$W"/t_L_*.log | sed 's/^/  /' >> "$OUT/steps.log"
grep -hE "Failure|Expected|Which is|worst row" "$W"/t_*.log | head -20 | tee -a "$OUT/steps.log"
tl() { local lab=$1; shift; [ $(el) -lt $LIM ] || { say "skip timeline $lab"; return; }
  env "$@" DS_TEST_TIMELINE_REPS=20 timeout 40 "$TC" --gtest_filter='CudaMatvec.StreamTimeline' > "$W/tl.log" 2>&1 < /dev/null
  echo "==== timeline $lab rc=$?" | tee -a "$OUT/steps.log"; grep -E "^\[timeline\]|Failure|OK \]|FAILED" "$W/tl.log" | tee -a "$OUT/steps.log"; }
tg() { local s=$1 lab=$2; shift 2; [ $(el) -lt $LIM ] || { say "skip tg $s $lab"; return; }
  [ -e "$W/m$s.ok" ] || { say "no model $s ($lab)"; return; }
  env "$@" timeout 30 "$X" bench -m "$W/m$s.gguf" --backend cuda -p 0 -n 128 -r 3 --json 2>>"$OUT/bench.err" < /dev/null | grep '^{' | tail -1 > "$W/t.json"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['label']=sys.argv[2]; print(json.dumps(d))" "$W/t.json" "dec15 $lab" >> "$OUT/bench.jsonl"
  say "TG $s $lab $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens_per_s'])" "$W/t.json" 2>&1 | tail -1)"; }
say "== phase B"
tl default DS_DEFAULT=1
tl XL $XL
while [ ! -e "$W/m0.8B.ok" ] && [ $(el) -lt 100 ]; do sleep 1; done
tg 9B default DS_DEFAULT=1; tg 9B XL $XL; tg 0.8B default DS_DEFAULT=1; tg 0.8B XL $XL
tg 9B default DS_DEFAULT=1; tg 9B XL $XL; tg 0.8B default DS_DEFAULT=1; tg 0.8B XL $XL
tl evict1 DS_MATVEC_STREAM_EVICT=1
tl evict2_pf16 DS_MATVEC_STREAM_EVICT=2 DS_MATVEC_PREFETCH_KB=16384
tl pf16 DS_MATVEC_PREFETCH_KB=16384
tg 9B X DS_MATVEC_STREAM_XWAIT=1; tg 9B L DS_MATVEC_STREAM_ARRIVE_LANES=1
tg 9B evict1 DS_MATVEC_STREAM_EVICT=1; tg 9B evict2_pf16 DS_MATVEC_STREAM_EVICT=2 DS_MATVEC_PREFETCH_KB=16384
tg 27B default DS_DEFAULT=1; tg 27B XL $XL; tg 27B default DS_DEFAULT=1; tg 27B XL $XL
if [ $(el) -lt $LIM ]; then
  NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
  DS_TEST_TIMELINE_REPS=2 timeout 40 "$NCU" --clock-control none --kernel-name-base demangled -k 'regex:mvq6?::kernel<' -c 4 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats \
    "$TC" --gtest_filter='CudaMatvec.StreamTimeline' > "$OUT/ncu.txt" 2>&1 < /dev/null
  say "ncu rc=$?"; grep -E "mvq6?::kernel|Duration|DRAM Throughput|Memory Throughput|Block Size|Grid Size|Warp Cycles Per Issued|Stall|Issue Slots|No Eligible|Active Warps" "$OUT/ncu.txt" | head -80 >> "$OUT/steps.log"
fi
say done
(cd "$OUT" && tar czf all.tgz --exclude all.tgz --exclude steps.log . && find . -type f ! -name all.tgz ! -name steps.log -delete)
