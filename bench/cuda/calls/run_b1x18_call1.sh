#!/bin/bash
# b1x18 call 1 (H200): ffn_down's prepared x written by ffn_gate_up's last CTA per super-block (DS_MATVEC_XPREP_FUSE=1,
# set_matvec_next_swiglu; no xprep_kernel launch), default off in these binaries.
# Phase A (all at once, 60 s limits; model synthesis alongside): CudaMatvec.StreamXprepFuse (new; full shapes, and at
# small shapes under compute-sanitizer memcheck), StreamXoneSameBits (3 shards) / StreamQ4KVariants / StreamQ6KVariants
# (2 shards each; stage_i8 / stage_q6's bodies now prep_i8 / prep_q6), the other Stream* tests, test_cuda_model with
# the switch on and off, test_cuda_prefill.
# Phase B (one at a time): CudaMatvec.StreamTimeline fuse 0 / 1; tg128 9B fuse 0 / 1 x 3 interleaved, 0.8B 0 / 1,
# 27B 0 / 1 x 2; the 9B batch-1 breakdown fuse 0 / 1.
# Run as: OUT=$OUT bash devwork-b1x18/go.sh
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv_b1x18; rm -rf "$W"; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; TC=$B/test_cuda; LIM=${LIM:-128}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }; say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
syn() { nice "$X" synth --size $1 --type Q4_K_M --vocab "$W/vocab.gguf" --threads 6 -o "$W/m$1.gguf" >/dev/null 2>&1 && touch "$W/m$1.ok"; echo "[$(el)s] synth $1 done" >> "$OUT/steps.log"; }
( syn 9B; syn 0.8B ) &
( syn 27B ) &
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
t() { local name=$1 lim=$2 ev=(); shift 2; while [[ "$1" == *=* ]]; do ev+=("$1"); shift; done
  echo "==== $name ${ev[*]} $*" > "$W/t_$name.log"; env "${ev[@]}" timeout $lim "$@" >> "$W/t_$name.log" 2>&1 < /dev/null; echo "rc=$?" >> "$W/t_$name.log"; }
say "== phase A"
P=()
t fuse 60 "$TC" --gtest_filter='CudaMatvec.StreamXprepFuse' & P+=($!)
t fuse_memcheck 60 DS_TEST_STREAM_SMALL=1 "$CS" --tool memcheck "$TC" --gtest_filter='CudaMatvec.StreamXprepFuse' & P+=($!)
for k in 0 1 2; do t xone_$k 60 DS_TEST_STREAM_PART=$k/3 "$TC" --gtest_filter='CudaMatvec.StreamXoneSameBits' & P+=($!); done
for k in 0 1; do
  t q4_$k 60 DS_TEST_STREAM_PART=$k/2 "$TC" --gtest_filter='CudaMatvec.StreamQ4KVariants' & P+=($!)
  t q6_$k 60 DS_TEST_STREAM_PART=$k/2 "$TC" --gtest_filter='CudaMatvec.StreamQ6KVariants' & P+=($!)
done
t rest 60 "$TC" --gtest_filter='CudaMatvec.StreamPrefetchHint:CudaMatvec.StreamWideSmall:CudaMatvec.StreamXprep:CudaMatvec.StreamXprepOrdering' & P+=($!)
t model_fuse1 60 DS_MATVEC_XPREP_FUSE=1 "$B/test_cuda_model" --gtest_brief=1 & P+=($!)
t model_fuse0 60 "$B/test_cuda_model" --gtest_brief=1 & P+=($!)
t prefill 60 "$B/test_cuda_prefill" --gtest_brief=1 & P+=($!)
wait "${P[@]}"
say "== phase A done"
cat "$W"/t_*.log > "$OUT/tests.log"
for f in "$W"/t_*.log; do n=$(basename $f .log); say "${n#t_} | $(grep -E '^rc=|tests? ran|PASSED|FAILED|ERROR SUMMARY' $f | tr '\n' ' ' | cut -c1-200)"; done
grep -hE "^\[xprep|^\[stream" "$W"/t_*.log | sed 's/^/  /' >> "$OUT/steps.log"
grep -hE "Failure|Expected|Which is|worst row|differ|over tol" "$W"/t_*.log | head -20 | tee -a "$OUT/steps.log"
tl() { local lab=$1; shift; [ $(el) -lt $LIM ] || { say "skip timeline $lab"; return; }
  env "$@" DS_TEST_TIMELINE_REPS=20 timeout 20 "$TC" --gtest_filter='CudaMatvec.StreamTimeline' > "$W/tl.log" 2>&1 < /dev/null
  echo "==== timeline $lab rc=$?" | tee -a "$OUT/steps.log"; grep -E "^\[timeline\]|Failure|OK \]|FAILED" "$W/tl.log" | tee -a "$OUT/steps.log"; }
tg() { local s=$1 lab=$2; shift 2; [ $(el) -lt $LIM ] || { say "skip tg $s $lab"; return; }
  [ -e "$W/m$s.ok" ] || { say "no model $s ($lab)"; return; }
  env "$@" timeout 25 "$X" bench -m "$W/m$s.gguf" --backend cuda -p 0 -n 128 -r 3 --json 2>>"$OUT/bench.err" < /dev/null | grep '^{' | tail -1 > "$W/t.json"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['label']=sys.argv[2]; print(json.dumps(d))" "$W/t.json" "b1x18 call1 $lab" >> "$OUT/bench.jsonl"
  say "TG $s $lab $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens_per_s'])" "$W/t.json" 2>&1 | tail -1)"; }
bd() { local lab=$1; shift; [ $(el) -lt $LIM ] || { say "skip breakdown $lab"; return; }
  env "$@" timeout 20 "$X" cuda-bench -m "$W/m9B.gguf" --tg 16 --breakdown --top 14 > "$W/bd.log" 2>&1 < /dev/null
  echo "==== breakdown 9B $lab rc=$?" | tee -a "$OUT/steps.log"; cat "$W/bd.log" >> "$OUT/steps.log"; }
say "== phase B"
tl fuse0 DS_MATVEC_XPREP_FUSE=0
tl fuse1 DS_MATVEC_XPREP_FUSE=1
for r in 1 2 3; do tg 9B fuse0 DS_MATVEC_XPREP_FUSE=0; tg 9B fuse1 DS_MATVEC_XPREP_FUSE=1; done
tg 0.8B fuse0 DS_MATVEC_XPREP_FUSE=0; tg 0.8B fuse1 DS_MATVEC_XPREP_FUSE=1
bd fuse0 DS_MATVEC_XPREP_FUSE=0
bd fuse1 DS_MATVEC_XPREP_FUSE=1
for r in 1 2; do tg 27B fuse0 DS_MATVEC_XPREP_FUSE=0; tg 27B fuse1 DS_MATVEC_XPREP_FUSE=1; done
say done
(cd "$OUT" && tar czf all.tgz --exclude all.tgz --exclude steps.log . ; find . -type f ! -name all.tgz ! -name steps.log -delete)
exit 0
