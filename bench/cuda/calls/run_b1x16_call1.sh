#!/bin/bash
# b1x16 call 1 (H200): x staged in one dependent round (DS_MATVEC_STREAM_XONE=1 same bits, =2 RMSNorm factor from the
# staging's own x loads), and dec15's three switches each alone (DS_MATVEC_STREAM_EVICT=1, _PREW=1, _STAGE2=1).
# Phase A (all at once): CudaMatvec.StreamXoneSameBits (modes 0/1/2, full shapes, 2 processes), CudaMatvec.Stream* at
# full shapes under XONE=1 (StreamQ4KVariants / StreamQ6KVariants in 3 processes each), the other CudaMatvec.* under
# XONE=1, test_cuda_model and test_cuda_prefill under XONE=1 and XONE=2, racecheck / synccheck (small shapes) under
# XONE=1 (StreamXoneSameBits runs modes 1 and 2 itself), model synthesis.
# Phase B (one at a time): CudaMatvec.StreamTimeline default / XONE=1 / XONE=2; tg128 9B: default, XONE=1, XONE=2,
# EVICT=1, PREW=1, STAGE2=1, two interleaved rounds; 27B: default, XONE=1, XONE=2, EVICT=1 two rounds; 0.8B: all six
# two rounds; 27B PREW=1 / STAGE2=1 once if time is left.
# Run as: OUT=$OUT bash devwork-b1x16/go.sh
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv_b1x16; rm -rf "$W"; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; TC=$B/test_cuda; LIM=${LIM:-168}
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
X1=DS_MATVEC_STREAM_XONE=1
for k in 0 1; do t xone_$k 60 DS_TEST_STREAM_PART=$k/2 "$TC" --gtest_filter='CudaMatvec.StreamXoneSameBits' & P+=($!); done
for k in 0 1 2; do
  t q4_$k 60 $X1 DS_TEST_STREAM_PART=$k/3 "$TC" --gtest_filter='CudaMatvec.StreamQ4KVariants' & P+=($!)
  t q6_$k 60 $X1 DS_TEST_STREAM_PART=$k/3 "$TC" --gtest_filter='CudaMatvec.StreamQ6KVariants' & P+=($!)
done
t rest 60 $X1 "$TC" --gtest_filter='CudaMatvec.StreamPrefetchHint:CudaMatvec.StreamWideSmall:CudaMatvec.StreamXprep*' & P+=($!)
t matvec 60 $X1 "$TC" --gtest_filter='CudaMatvec.*:-CudaMatvec.Stream*' & P+=($!)
t model1 60 $X1 "$B/test_cuda_model" --gtest_brief=1 & P+=($!)
t prefill1 50 $X1 "$B/test_cuda_prefill" --gtest_brief=1 & P+=($!)
t model2 60 DS_MATVEC_STREAM_XONE=2 "$B/test_cuda_model" --gtest_brief=1 & P+=($!)
t prefill2 50 DS_MATVEC_STREAM_XONE=2 "$B/test_cuda_prefill" --gtest_brief=1 & P+=($!)
SM="DS_TEST_STREAM_SMALL=1 DS_TEST_XPREP_SMALL=1 DS_TEST_XPREP_ITERS=2"
for k in 0 1; do
  t race_q4_$k 60 $X1 $SM DS_TEST_STREAM_PART=$k/2 "$CS" --tool racecheck "$TC" --gtest_filter='CudaMatvec.StreamQ4KVariants' & P+=($!)
  t race_q6_$k 60 $X1 $SM DS_TEST_STREAM_PART=$k/2 "$CS" --tool racecheck "$TC" --gtest_filter='CudaMatvec.StreamQ6KVariants' & P+=($!)
done
for k in 0 1 2 3; do t race_xone_$k 60 $SM DS_TEST_STREAM_PART=$k/4 "$CS" --tool racecheck "$TC" --gtest_filter='CudaMatvec.StreamXoneSameBits' & P+=($!); done
t race_rest 60 $X1 $SM "$CS" --tool racecheck "$TC" --gtest_filter='CudaMatvec.StreamPrefetchHint:CudaMatvec.StreamWideSmall:CudaMatvec.StreamXprep*' & P+=($!)
t sync_all 60 $X1 $SM "$CS" --tool synccheck "$TC" --gtest_filter='CudaMatvec.Stream*:-CudaMatvec.StreamTimeline:CudaMatvec.StreamXoneSameBits' & P+=($!)
t sync_xone 60 $SM "$CS" --tool synccheck "$TC" --gtest_filter='CudaMatvec.StreamXoneSameBits' & P+=($!)
wait "${P[@]}"
say "== phase A done"
cat "$W"/t_*.log > "$OUT/tests.log"
for f in "$W"/t_*.log; do n=$(basename $f .log); say "${n#t_} | $(grep -E '^rc=|tests? ran|PASSED|FAILED|ERROR SUMMARY|RACECHECK SUMMARY|SYNCCHECK' $f | tr '\n' ' ' | cut -c1-200)"; done
grep -hE "^\[stream" "$W"/t_*.log | sed 's/^/  /' >> "$OUT/steps.log"
grep -hE "Failure|Expected|Which is|worst row|differ" "$W"/t_*.log | head -20 | tee -a "$OUT/steps.log"
tl() { local lab=$1; shift; [ $(el) -lt $LIM ] || { say "skip timeline $lab"; return; }
  env "$@" DS_TEST_TIMELINE_REPS=20 timeout 30 "$TC" --gtest_filter='CudaMatvec.StreamTimeline' > "$W/tl.log" 2>&1 < /dev/null
  echo "==== timeline $lab rc=$?" | tee -a "$OUT/steps.log"; grep -E "^\[timeline\]|Failure|OK \]|FAILED" "$W/tl.log" | tee -a "$OUT/steps.log"; }
# tg MODEL LABEL [VAR=value ...]: tg128 of this branch's deltaserve under those variables.
tg() { local s=$1 lab=$2; shift 2; [ $(el) -lt $LIM ] || { say "skip tg $s $lab"; return; }
  [ -e "$W/m$s.ok" ] || { say "no model $s ($lab)"; return; }
  env "$@" timeout 30 "$X" bench -m "$W/m$s.gguf" --backend cuda -p 0 -n 128 -r 3 --json 2>>"$OUT/bench.err" < /dev/null | grep '^{' | tail -1 > "$W/t.json"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['label']=sys.argv[2]; print(json.dumps(d))" "$W/t.json" "b1x16 call1 $lab" >> "$OUT/bench.jsonl"
  say "TG $s $lab $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens_per_s'])" "$W/t.json" 2>&1 | tail -1)"; }
six() { local s=$1; tg $s default DS_X=0; tg $s xone1 DS_MATVEC_STREAM_XONE=1; tg $s xone2 DS_MATVEC_STREAM_XONE=2
  tg $s evict DS_MATVEC_STREAM_EVICT=1; tg $s prew DS_MATVEC_STREAM_PREW=1; tg $s stage2 DS_MATVEC_STREAM_STAGE2=1; }
say "== phase B"
tl default DS_X=0
tl xone1 DS_MATVEC_STREAM_XONE=1
tl xone2 DS_MATVEC_STREAM_XONE=2
six 9B; six 9B
for r in 1 2; do tg 27B default DS_X=0; tg 27B xone1 DS_MATVEC_STREAM_XONE=1; tg 27B xone2 DS_MATVEC_STREAM_XONE=2; tg 27B evict DS_MATVEC_STREAM_EVICT=1; done
six 0.8B; six 0.8B
tg 27B prew DS_MATVEC_STREAM_PREW=1; tg 27B stage2 DS_MATVEC_STREAM_STAGE2=1
say done
(cd "$OUT" && tar czf all.tgz --exclude all.tgz --exclude steps.log . && find . -type f ! -name all.tgz ! -name steps.log -delete)
