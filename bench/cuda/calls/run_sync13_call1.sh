#!/bin/bash
# sync13 call 1 (H200, the only one): the batch-1 stream kernels' staging barrier as a named barrier of the consumer
# warps (no __syncthreads joined by the producer warp), the superseded GDN kernels removed.
# Phase A (all at once): test_cuda in 8 shards, test_cuda_model, test_cuda_prefill, the stream tests with
# DS_MATVEC_STREAM_ARRIVE_LANES=1, compute-sanitizer synccheck / racecheck on CudaMatvec.Stream* (racecheck on the
# small shapes, DS_TEST_STREAM_SMALL=1; and with ARRIVE_LANES=1 on two tests, for the ring's reports).
# Phase B (one at a time, GPU otherwise idle): tg128 9B / 0.8B and the 9B batched step at 64 (--select 0), this
# branch's deltaserve against main 58ad1aa's (deltaserve_base, in the bundle) in the same call.
# Run as: OUT=$OUT bash devwork-sync13/go.sh
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv_sync13; rm -rf "$W"; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; X0=$B/deltaserve_base; LIM=${LIM:-92}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }; say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( for s in 9B 0.8B; do "$X" synth --size $s --type Q4_K_M --vocab "$W/vocab.gguf" --threads 6 -o "$W/m$s.gguf" >/dev/null 2>&1 && touch "$W/m$s.ok"; done ) &
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
say "== phase A"
P=()
for i in 0 1 2 3 4 5 6 7; do GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i timeout 70 "$B/test_cuda" --gtest_brief=1 > "$OUT/tc$i.log" 2>&1 < /dev/null & P+=($!); done
timeout 60 "$B/test_cuda_model" --gtest_brief=1 > "$OUT/tm.log" 2>&1 < /dev/null & P+=($!)
timeout 40 "$B/test_cuda_prefill" --gtest_brief=1 > "$OUT/tp.log" 2>&1 < /dev/null & P+=($!)
DS_MATVEC_STREAM_ARRIVE_LANES=1 nice timeout 70 "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvec.Stream*' > "$OUT/lanes.log" 2>&1 < /dev/null & P+=($!)
san() { local n=$1 tool=$2 lim=$3 f=$4; shift 4
  env "$@" timeout $lim "$CS" --tool $tool "$B/test_cuda" --gtest_brief=1 --gtest_filter="$f" > "$OUT/san_$n.log" 2>&1 < /dev/null
  echo "rc=$?" >> "$OUT/san_$n.log"; }
SM="DS_TEST_STREAM_SMALL=1 DS_TEST_XPREP_SMALL=1 DS_TEST_XPREP_ITERS=2"
san sync_variants synccheck 65 'CudaMatvec.StreamQ4KVariants:CudaMatvec.StreamQ6KVariants' $SM & P+=($!)
san sync_rest synccheck 65 'CudaMatvec.Stream*:-CudaMatvec.StreamQ4KVariants:CudaMatvec.StreamQ6KVariants' DS_TEST_XPREP_ITERS=2 & P+=($!)
san race_q4 racecheck 65 'CudaMatvec.StreamQ4KVariants' $SM & P+=($!)
san race_rest racecheck 65 'CudaMatvec.Stream*:-CudaMatvec.StreamQ4KVariants' $SM & P+=($!)
san race_lanes racecheck 60 'CudaMatvec.StreamWideSmall:CudaMatvec.StreamXprepOrdering' $SM DS_MATVEC_STREAM_ARRIVE_LANES=1 & P+=($!)
wait "${P[@]}"
say "== phase A done"
for i in 0 1 2 3 4 5 6 7; do echo "==== test_cuda shard $i" >> "$OUT/tests.log"; cat "$OUT/tc$i.log" >> "$OUT/tests.log"; rm -f "$OUT/tc$i.log"; done
{ echo "## test_cuda (8 shards)"; grep -E "PASSED|FAILED|tests ran|Failure" "$OUT/tests.log"
  echo "## test_cuda_model"; grep -E "PASSED|FAILED|tests ran|Failure" "$OUT/tm.log"
  echo "## test_cuda_prefill"; grep -E "PASSED|FAILED|tests ran|Failure" "$OUT/tp.log"
  echo "## stream tests, DS_MATVEC_STREAM_ARRIVE_LANES=1"; grep -E "PASSED|FAILED|tests ran|Failure" "$OUT/lanes.log"
  echo "## sanitizers"; for f in "$OUT"/san_*.log; do echo "# $(basename $f)"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|SYNCCHECK|PASSED|FAILED|tests ran|rc=|^=========     at|Race reported" "$f" | sort | uniq -c | sort -rn | head -12; done
} 2>&1 | tee -a "$OUT/steps.log"
tg() { local s=$1 bin=$2 lab=$3; shift 3; [ $(el) -lt $LIM ] || { say "skip tg $s $lab"; return; }
  while [ ! -e "$W/m$s.ok" ]; do sleep 1; [ $(el) -lt $LIM ] || { say "no model $s"; return; }; done
  env "$@" timeout 30 "$bin" bench -m "$W/m$s.gguf" --backend cuda -p 0 -n 128 -r 3 --json 2>>"$OUT/bench.err" < /dev/null | grep '^{' | tail -1 > "$W/t.json"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['label']=sys.argv[2]; print(json.dumps(d))" "$W/t.json" "sync13 $lab" >> "$OUT/bench.jsonl"
  say "TG $s $lab $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens_per_s'])" "$W/t.json" 2>&1 | tail -1)"; }
cb() { local bin=$1 lab=$2; shift 2; [ $(el) -lt $((LIM + 5)) ] || { say "skip cb $lab"; return; }
  echo "==== cb $lab" >> "$OUT/cb.log"
  env "$@" timeout 25 "$bin" cuda-bench -m "$W/m9B.gguf" --batch 64 --tg 32 --reps 2 --select 0 >> "$OUT/cb.log" 2>&1 < /dev/null
  say "CB 64 $lab rc=$? | $(grep -E '^decode' "$OUT/cb.log" | tail -1 | cut -c1-90)"; }
say "== phase B"
tg 9B "$X" new DS_DEFAULT=1; tg 9B "$X0" base DS_DEFAULT=1
cb "$X" new DS_DEFAULT=1; cb "$X0" base DS_DEFAULT=1
tg 0.8B "$X" new DS_DEFAULT=1; tg 0.8B "$X0" base DS_DEFAULT=1
tg 9B "$X" new_lanes DS_MATVEC_STREAM_ARRIVE_LANES=1; tg 0.8B "$X" new_lanes DS_MATVEC_STREAM_ARRIVE_LANES=1
tg 9B "$X" new DS_DEFAULT=1; tg 9B "$X0" base DS_DEFAULT=1; tg 0.8B "$X" new DS_DEFAULT=1
say done
(cd "$OUT" && tar czf all.tgz --exclude all.tgz --exclude steps.log . && find . -type f ! -name all.tgz ! -name steps.log -delete)
