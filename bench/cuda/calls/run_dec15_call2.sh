#!/bin/bash
# dec15 call 2 (H200): the new defaults (sync13's XWAIT + ARRIVE_LANES as the only forms, weight copies with the L2
# evict_first policy, norm weights prefetched into L1 before griddepcontrol.wait, x staged two super-blocks per warp).
# Phase A (all at once): CudaMatvec.Stream* at full shapes (the two long variant tests in 3 processes each), the other
# CudaMatvec.* tests, test_cuda_model, test_cuda_prefill, racecheck / synccheck on the small shapes, model synthesis.
# Phase B (one at a time): tg128 9B / 0.8B / 27B this branch vs main d39a3ec's deltaserve (deltaserve_base, same
# call, interleaved), cuda-bench --tg 16 --breakdown (9B), CudaMatvec.StreamTimeline, and each new default turned off
# alone (DS_MATVEC_STREAM_STAGE2=0, DS_MATVEC_STREAM_PREW=0, DS_MATVEC_STREAM_EVICT=0) on the 9B and the timeline.
# Run as: OUT=$OUT bash devwork-dec15/go.sh
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv_dec15; rm -rf "$W"; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; X0=$B/deltaserve_base; TC=$B/test_cuda; LIM=${LIM:-100}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }; say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
syn() { nice "$X" synth --size $1 --type Q4_K_M --vocab "$W/vocab.gguf" --threads 6 -o "$W/m$1.gguf" >/dev/null 2>&1 && touch "$W/m$1.ok"; echo "[$(el)s] synth $1 done" >> "$OUT/steps.log"; }
( syn 9B; syn 0.8B ) &
( syn 27B ) &
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
# t NAME LIMIT [VAR=value ...] COMMAND ARGS: the command under timeout with those variables, output in $W/t_NAME.log.
t() { local name=$1 lim=$2 ev=(); shift 2; while [[ "$1" == *=* ]]; do ev+=("$1"); shift; done
  echo "==== $name ${ev[*]} $*" > "$W/t_$name.log"; env "${ev[@]}" timeout $lim "$@" >> "$W/t_$name.log" 2>&1 < /dev/null; echo "rc=$?" >> "$W/t_$name.log"; }
say "== phase A"
P=()
for k in 0 1 2; do
  t q4_$k 60 DS_TEST_STREAM_PART=$k/3 "$TC" --gtest_filter='CudaMatvec.StreamQ4KVariants' & P+=($!)
  t q6_$k 60 DS_TEST_STREAM_PART=$k/3 "$TC" --gtest_filter='CudaMatvec.StreamQ6KVariants' & P+=($!)
done
t rest 60 DS_DEFAULT=1 "$TC" --gtest_filter='CudaMatvec.StreamPrefetchHint:CudaMatvec.StreamWideSmall:CudaMatvec.StreamXprep*' & P+=($!)
t matvec 60 DS_DEFAULT=1 "$TC" --gtest_filter='CudaMatvec.*:-CudaMatvec.Stream*' & P+=($!)
t model 60 DS_DEFAULT=1 "$B/test_cuda_model" --gtest_brief=1 & P+=($!)
t prefill 50 DS_DEFAULT=1 "$B/test_cuda_prefill" --gtest_brief=1 & P+=($!)
SM="DS_TEST_STREAM_SMALL=1 DS_TEST_XPREP_SMALL=1 DS_TEST_XPREP_ITERS=2"
for k in 0 1; do
  t race_q4_$k 60 $SM DS_TEST_STREAM_PART=$k/2 "$CS" --tool racecheck "$TC" --gtest_filter='CudaMatvec.StreamQ4KVariants' & P+=($!)
  t race_q6_$k 60 $SM DS_TEST_STREAM_PART=$k/2 "$CS" --tool racecheck "$TC" --gtest_filter='CudaMatvec.StreamQ6KVariants' & P+=($!)
done
t race_rest 60 $SM "$CS" --tool racecheck "$TC" --gtest_filter='CudaMatvec.StreamPrefetchHint:CudaMatvec.StreamWideSmall:CudaMatvec.StreamXprep*' & P+=($!)
t sync_all 60 $SM "$CS" --tool synccheck "$TC" --gtest_filter='CudaMatvec.Stream*:-CudaMatvec.StreamTimeline' & P+=($!)
wait "${P[@]}"
say "== phase A done"
cat "$W"/t_*.log > "$OUT/tests.log"
for f in "$W"/t_*.log; do n=$(basename $f .log); say "${n#t_} | $(grep -E '^rc=|tests? ran|PASSED|FAILED|ERROR SUMMARY|RACECHECK SUMMARY|SYNCCHECK' $f | tr '\n' ' ' | cut -c1-200)"; done
grep -hE "^\[stream" "$W"/t_q*.log "$W"/t_rest.log "$W"/t_matvec.log | sed 's/^/  /' >> "$OUT/steps.log"
grep -hE "Failure|Expected|Which is|worst row" "$W"/t_*.log | head -20 | tee -a "$OUT/steps.log"
tl() { local lab=$1; shift; [ $(el) -lt $LIM ] || { say "skip timeline $lab"; return; }
  env "$@" DS_TEST_TIMELINE_REPS=20 timeout 40 "$TC" --gtest_filter='CudaMatvec.StreamTimeline' > "$W/tl.log" 2>&1 < /dev/null
  echo "==== timeline $lab rc=$?" | tee -a "$OUT/steps.log"; grep -E "^\[timeline\]|Failure|OK \]|FAILED" "$W/tl.log" | tee -a "$OUT/steps.log"; }
# tg MODEL LABEL [VAR=value ...] [X=binary]: tg128 of this branch's deltaserve, or of the binary named by X=.
tg() { local s=$1 lab=$2 bin=$X ev=(); shift 2; [ $(el) -lt $LIM ] || { say "skip tg $s $lab"; return; }
  for a in "$@"; do case $a in X=*) bin=${a#X=};; *) ev+=("$a");; esac; done
  [ -e "$W/m$s.ok" ] || { say "no model $s ($lab)"; return; }
  env "${ev[@]}" timeout 30 "$bin" bench -m "$W/m$s.gguf" --backend cuda -p 0 -n 128 -r 3 --json 2>>"$OUT/bench.err" < /dev/null | grep '^{' | tail -1 > "$W/t.json"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['label']=sys.argv[2]; print(json.dumps(d))" "$W/t.json" "dec15 call2 $lab" >> "$OUT/bench.jsonl"
  say "TG $s $lab $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens_per_s'])" "$W/t.json" 2>&1 | tail -1)"; }
cb() { [ $(el) -lt $LIM ] || { say "skip breakdown"; return; }
  timeout 25 "$X" cuda-bench -m "$W/m9B.gguf" --tg 16 --breakdown > "$OUT/breakdown.txt" 2>&1 < /dev/null; say "breakdown rc=$?"
  grep -E "^decode|^bytes per step|^per-kernel|^kind|^matvec|^gdn|^conv|^attention|^rms|^qk|^swiglu" "$OUT/breakdown.txt" | head -16 | tee -a "$OUT/steps.log"; }
say "== phase B"
while [ ! -e "$W/m0.8B.ok" ] && [ $(el) -lt 90 ]; do sleep 1; done
tg 9B new DS_DEFAULT=1; tg 9B base_d39a3ec DS_DEFAULT=1 X=$X0; tg 9B new DS_DEFAULT=1; tg 9B base_d39a3ec DS_DEFAULT=1 X=$X0
tg 0.8B new DS_DEFAULT=1; tg 0.8B base_d39a3ec X=$X0; tg 0.8B new DS_DEFAULT=1; tg 0.8B base_d39a3ec X=$X0
tg 27B new DS_DEFAULT=1; tg 27B base_d39a3ec X=$X0
cb
tl new DS_DEFAULT=1
tg 9B stage2_off DS_MATVEC_STREAM_STAGE2=0; tg 9B prew_off DS_MATVEC_STREAM_PREW=0; tg 9B evict_off DS_MATVEC_STREAM_EVICT=0
tl stage2_off DS_MATVEC_STREAM_STAGE2=0
tl prew_off DS_MATVEC_STREAM_PREW=0
tg 27B new DS_DEFAULT=1; tg 27B base_d39a3ec X=$X0
tl evict_off DS_MATVEC_STREAM_EVICT=0
tg 9B pf12 DS_MATVEC_PREFETCH_KB=12288
say done
(cd "$OUT" && tar czf all.tgz --exclude all.tgz --exclude steps.log . && find . -type f ! -name all.tgz ! -name steps.log -delete)
