#!/bin/bash
# Record of decode10's device script (run from the ignored /work/main/devwork-decode10 with b.tar.xz = tools/gpu_bundle.sh output):
#   OUT=$OUT LIM=150 bash devwork-decode10/go.sh
# Call 1 (51467d2, XPREP default 0) differed only in: test_cuda_model also with DS_MATVEC_STREAM_XPREP=1, no test_cuda_prefill,
# 9B bench labels DS_DEFAULT=1 / DS_MATVEC_STREAM_XPREP=1 / =32 (twice), breakdowns default and XPREP=1, 27B default / XPREP=1 / =32,
# 0.8B default / XPREP=1.
# decode10 call 2: built-in default DS_MATVEC_STREAM_XPREP=32 (5b9cf2d) — tests + tg128 A/B vs XPREP=0 + ONE_NB=0.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve
LIM=${LIM:-150}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
step() { local name=$1 limit=$2 log=$3; shift 3; say "== $name"; echo "==== $name" >> "$log"
  timeout "$limit" "$@" >> "$log" 2>&1 < /dev/null; local rc=$?; say "== $name rc=$rc"; tail -2 "$log" | cut -c1-250 | tee -a "$OUT/steps.log"; }
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( for s in 9B 27B 0.8B; do "$X" synth --size $s --type Q4_K_M --vocab "$W/vocab.gguf" --threads 8 -o "$W/m$s.gguf" >/dev/null 2>&1 && touch "$W/m$s.ok"; done ) &
TC="timeout 75 $B/test_cuda --gtest_brief=1"
( $TC --gtest_filter='CudaMatvec.StreamXprep:CudaMatvec.StreamWideSmall:CudaMatvec.FusedInputMatchesCpu:CudaMatvec.TensorCoreQ4KWideRangeX:CudaMatvec.StreamPrefetchHint' > "$OUT/tc1.log" 2>&1; echo "test_cuda 1 rc=$?" >> "$OUT/tc1.log" ) &
P1=$!
( $TC --gtest_filter='CudaMatvec.StreamQ4KVariants' > "$OUT/tc2.log" 2>&1; echo "test_cuda 2 rc=$?" >> "$OUT/tc2.log" ) &
P2=$!
( $TC --gtest_filter='CudaMatvec.StreamQ6KVariants' > "$OUT/tc3.log" 2>&1; echo "test_cuda 3 rc=$?" >> "$OUT/tc3.log" ) &
P3=$!
step "test_cuda_model default" 40 "$OUT/tests.log" "$B/test_cuda_model" --gtest_brief=1
step "test_cuda_prefill" 30 "$OUT/tests.log" "$B/test_cuda_prefill" --gtest_brief=1
wait $P1 $P2 $P3; cat "$OUT"/tc?.log >> "$OUT/tests.log"; rm -f "$OUT"/tc?.log
grep -E "FAILED|PASSED|tests ran|rc=" "$OUT/tests.log" | tee -a "$OUT/steps.log"
grep -E '^\[(stream|stream wide|stream xprep|stream q6)\]' "$OUT/tests.log" >> "$OUT/steps.log"
bench() { [ $(el) -lt $LIM ] || { say "skip $1 $2"; return; }
  step "bench $1 $2" 30 "$OUT/bench.log" env $2 "$X" bench -m "$W/m$1.gguf" --backend cuda -p 0 -n 128 -r 3 --json
  grep '^{' "$OUT/bench.log" | tail -1 | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); d['label']=sys.argv[1]; print(json.dumps(d))" "$2" >> "$OUT/bench.jsonl"
  tail -1 "$OUT/bench.jsonl" | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print('TG', d['model'], d['label'], d['tokens_per_s'])" | tee -a "$OUT/steps.log"; }
bd() { [ $(el) -lt $LIM ] || return; step "breakdown $1 $2" 25 "$OUT/breakdown_$1_$(echo $2 | tr -c 'A-Za-z0-9' _).txt" env $2 "$X" cuda-bench -m "$W/m$1.gguf" --tg 16 --breakdown --top 220; }
waitm() { while [ ! -e "$W/m$1.ok" ] && [ $(el) -lt $LIM ]; do sleep 1; done; [ -e "$W/m$1.ok" ]; }
waitm 9B && for l in DS_DEFAULT=1 DS_MATVEC_STREAM_XPREP=0 DS_MATVEC_STREAM_ONE_NB=0 DS_DEFAULT=1 DS_MATVEC_STREAM_XPREP=0 DS_MATVEC_STREAM_ONE_NB=0; do bench 9B "$l"; done
bd 9B DS_DEFAULT=1
waitm 27B && for l in DS_DEFAULT=1 DS_MATVEC_STREAM_XPREP=0 DS_DEFAULT=1 DS_MATVEC_STREAM_XPREP=0; do bench 27B "$l"; done
waitm 0.8B && for l in DS_DEFAULT=1 DS_MATVEC_STREAM_XPREP=0; do bench 0.8B "$l"; done
say done
(cd "$OUT" && tar czf all.tgz --exclude all.tgz --exclude steps.log . ; find . -type f ! -name all.tgz ! -name steps.log -delete)
