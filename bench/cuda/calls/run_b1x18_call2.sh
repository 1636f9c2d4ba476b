#!/bin/bash
# b1x18 call 2 (H200): the two cheaper forms of ffn_gate_up writing ffn_down's prepared x (call 1's per-row-group
# __threadfence lost 11%): DS_MATVEC_XPREP_FUSE=1 per row group with fence.acq_rel.gpu, =2 all of a CTA's arrivals
# after its last row group (one fence per CTA); default off in these binaries.
# Phase A (all at once, 45 s limits; 9B / 27B synthesis alongside): CudaMatvec.StreamXprepFuse (modes 1 and 2; full
# shapes, and small shapes under memcheck), StreamXprep / StreamXprepOrdering / StreamPrefetchHint / StreamWideSmall,
# test_cuda_model with DS_MATVEC_XPREP_FUSE=1 and =2. Phase B: registers of the stream kernels; StreamTimeline
# fuse 0 / 1 / 2; tg128 9B 0 / 1 / 2 interleaved x 3, 27B 0 / 2 / 1; the 9B batch-1 breakdown fuse 2.
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
( syn 9B ) &
( syn 27B ) &
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
t() { local name=$1 lim=$2 ev=(); shift 2; while [[ "$1" == *=* ]]; do ev+=("$1"); shift; done
  echo "==== $name ${ev[*]} $*" > "$W/t_$name.log"; env "${ev[@]}" timeout $lim "$@" >> "$W/t_$name.log" 2>&1 < /dev/null; echo "rc=$?" >> "$W/t_$name.log"; }
say "== phase A"
P=()
t fuse 45 "$TC" --gtest_filter='CudaMatvec.StreamXprepFuse' & P+=($!)
t fuse_memcheck 45 DS_TEST_STREAM_SMALL=1 "$CS" --tool memcheck "$TC" --gtest_filter='CudaMatvec.StreamXprepFuse' & P+=($!)
t rest 45 "$TC" --gtest_filter='CudaMatvec.StreamPrefetchHint:CudaMatvec.StreamWideSmall:CudaMatvec.StreamXprep:CudaMatvec.StreamXprepOrdering' & P+=($!)
t model_fuse1 45 DS_MATVEC_XPREP_FUSE=1 "$B/test_cuda_model" --gtest_brief=1 & P+=($!)
t model_fuse2 45 DS_MATVEC_XPREP_FUSE=2 "$B/test_cuda_model" --gtest_brief=1 & P+=($!)
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
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['label']=sys.argv[2]; print(json.dumps(d))" "$W/t.json" "b1x18 call2 $lab" >> "$OUT/bench.jsonl"
  say "TG $s $lab $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens_per_s'])" "$W/t.json" 2>&1 | tail -1)"; }
bd() { local lab=$1; shift; [ $(el) -lt $LIM ] || { say "skip breakdown $lab"; return; }
  env "$@" timeout 20 "$X" cuda-bench -m "$W/m9B.gguf" --tg 16 --breakdown --top 14 > "$W/bd.log" 2>&1 < /dev/null
  echo "==== breakdown 9B $lab rc=$?" | tee -a "$OUT/steps.log"; cat "$W/bd.log" >> "$OUT/steps.log"; }
say "== phase B"
(cuobjdump --dump-resource-usage "$TC" 2>&1 | grep -A1 "mvq.*kernel" | grep -oE "Function [^ ]+|REG:[0-9]+|STACK:[0-9]+|LOCAL:[0-9]+" | paste - - - - | c++filt | cut -c1-160) >> "$OUT/steps.log" 2>&1
tl fuse0 DS_MATVEC_XPREP_FUSE=0
tl fuse1 DS_MATVEC_XPREP_FUSE=1
tl fuse2 DS_MATVEC_XPREP_FUSE=2
for r in 1 2 3; do tg 9B fuse0 DS_MATVEC_XPREP_FUSE=0; tg 9B fuse2 DS_MATVEC_XPREP_FUSE=2; tg 9B fuse1 DS_MATVEC_XPREP_FUSE=1; done
tg 27B fuse0 DS_MATVEC_XPREP_FUSE=0; tg 27B fuse2 DS_MATVEC_XPREP_FUSE=2; tg 27B fuse1 DS_MATVEC_XPREP_FUSE=1
bd fuse2 DS_MATVEC_XPREP_FUSE=2
tg 27B fuse0 DS_MATVEC_XPREP_FUSE=0; tg 27B fuse2 DS_MATVEC_XPREP_FUSE=2
say done
(cd "$OUT" && tar czf all.tgz --exclude all.tgz --exclude steps.log . ; find . -type f ! -name all.tgz ! -name steps.log -delete)
exit 0
