#!/bin/bash
# b1x17 call 1 (H200): the batch-1 stream kernels' one-round staging for the ffn_down (prepared x off:
# DS_MATVEC_STREAM_XPREP=0; the 9B's 48 super-blocks at 3 per warp, the 27B's 68 at 4-5 per warp in two rounds, new) and
# DS_MATVEC_STREAM_XONE=2 decided; stage_one (one template for stage_i8_one / stage_q6_one) under every test.
# Phase A (all at once, 60-80 s limits): CudaMatvec.StreamXoneSameBits (3 shards, now 64 / 68 super-blocks too),
# StreamQ4KVariants / StreamQ6KVariants (2 shards each), the other Stream* tests, test_cuda_model (default and XPREP=0),
# test_cuda_prefill, racecheck / synccheck at small shapes; model synthesis.
# Phase B (one at a time): CudaMatvec.StreamTimeline default / XPREP=0; tg128 9B and 27B: default, XPREP=0, XONE=2 in
# three interleaved rounds; 0.8B default / XONE=2 three rounds; 9B XPREP=0 + XONE=2 if time is left.
# Run as: OUT=$OUT bash devwork-b1x17/go.sh
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv_b1x17; rm -rf "$W"; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; TC=$B/test_cuda; LIM=${LIM:-165}
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
for k in 0 1 2; do t xone_$k 70 DS_TEST_STREAM_PART=$k/3 "$TC" --gtest_filter='CudaMatvec.StreamXoneSameBits' & P+=($!); done
for k in 0 1; do
  t q4_$k 70 DS_TEST_STREAM_PART=$k/2 "$TC" --gtest_filter='CudaMatvec.StreamQ4KVariants' & P+=($!)
  t q6_$k 70 DS_TEST_STREAM_PART=$k/2 "$TC" --gtest_filter='CudaMatvec.StreamQ6KVariants' & P+=($!)
done
t rest 70 "$TC" --gtest_filter='CudaMatvec.StreamPrefetchHint:CudaMatvec.StreamWideSmall:CudaMatvec.StreamXprep*' & P+=($!)
t model 80 "$B/test_cuda_model" --gtest_brief=1 & P+=($!)
t model_x0 80 DS_MATVEC_STREAM_XPREP=0 "$B/test_cuda_model" --gtest_brief=1 & P+=($!)
t prefill 70 "$B/test_cuda_prefill" --gtest_brief=1 & P+=($!)
SM="DS_TEST_STREAM_SMALL=1 DS_TEST_XPREP_SMALL=1 DS_TEST_XPREP_ITERS=2"
for k in 0 1; do t race_xone_$k 70 $SM DS_TEST_STREAM_PART=$k/2 "$CS" --tool racecheck "$TC" --gtest_filter='CudaMatvec.StreamXoneSameBits' & P+=($!); done
t race_q4 70 $SM "$CS" --tool racecheck "$TC" --gtest_filter='CudaMatvec.StreamQ4KVariants' & P+=($!)
t race_q6 70 $SM "$CS" --tool racecheck "$TC" --gtest_filter='CudaMatvec.StreamQ6KVariants' & P+=($!)
t sync_all 70 $SM "$CS" --tool synccheck "$TC" --gtest_filter='CudaMatvec.StreamXoneSameBits:CudaMatvec.StreamQ4KVariants:CudaMatvec.StreamQ6KVariants' & P+=($!)
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
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['label']=sys.argv[2]; print(json.dumps(d))" "$W/t.json" "b1x17 call1 $lab" >> "$OUT/bench.jsonl"
  say "TG $s $lab $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens_per_s'])" "$W/t.json" 2>&1 | tail -1)"; }
three() { local s=$1; tg $s default DS_X=0; tg $s xprep0 DS_MATVEC_STREAM_XPREP=0; tg $s xone2 DS_MATVEC_STREAM_XONE=2; }
say "== phase B"
tl default DS_X=0
tl xprep0 DS_MATVEC_STREAM_XPREP=0
for r in 1 2 3; do three 9B; done
for r in 1 2 3; do tg 0.8B default DS_X=0; tg 0.8B xone2 DS_MATVEC_STREAM_XONE=2; done
for r in 1 2 3; do three 27B; done
tg 9B xprep0_xone2 DS_MATVEC_STREAM_XPREP=0 DS_MATVEC_STREAM_XONE=2; tg 9B default DS_X=0
say done
(cd "$OUT" && tar czf all.tgz --exclude all.tgz --exclude steps.log . && find . -type f ! -name all.tgz ! -name steps.log -delete)
