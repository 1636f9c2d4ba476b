#!/bin/bash
# decode11 call 1 (H200): the prepared-x hazard (DS_MATVEC_STREAM_XPREP) made to fail on purpose and shown fixed,
# the whole test_cuda (4 shards) + test_cuda_model with the new defaults (XPREP 32, proxy fence, two buffers), and
# tg128 A/B. Phase A (all at once, as session 9's failing call ran test_cuda in concurrent processes): 4 shards,
# test_cuda_model, CudaMatvec.StreamXprepOrdering for DS_TEST_XPREP_SECONDS in 5 settings (old = decode10:
# FENCE=0 BUFS=1; new defaults; fence only; double buffer only; old without PDL between prep and product),
# StreamQ4KVariants in the old setting, racecheck / synccheck on the small form. Phase B: tg128 one at a time.
# Run as: OUT=$OUT bash devwork-decode11/go.sh
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; LIM=${LIM:-95}; SEC=${SEC:-45}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }; say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( for s in 9B 0.8B 27B; do nice "$X" synth --size $s --type Q4_K_M --vocab "$W/vocab.gguf" --threads 8 -o "$W/m$s.gguf" >/dev/null 2>&1 && touch "$W/m$s.ok"; done ) &
say "== phase A"
P=()
for i in 0 1 2 3; do GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout 110 "$B/test_cuda" --gtest_brief=1 > "$OUT/tc$i.log" 2>&1 < /dev/null & P+=($!); done
timeout 110 "$B/test_cuda_model" --gtest_brief=1 > "$OUT/tm.log" 2>&1 < /dev/null & P+=($!)
stress() { local n=$1; shift; env "$@" DS_TEST_XPREP_SECONDS=$SEC timeout $((SEC + 30)) "$B/test_cuda" --gtest_filter=CudaMatvec.StreamXprepOrdering < /dev/null 2>&1 | grep -E "xprep ordering|OK \]|FAILED" | sed "s/^/$n $* | /" > "$OUT/st_$n.log"; }
stress A_old DS_MATVEC_STREAM_XPREP_FENCE=0 DS_MATVEC_STREAM_XPREP_BUFS=1 & P+=($!)
stress B_new DS_DEFAULT=1 & P+=($!)
stress C_fence DS_MATVEC_STREAM_XPREP_FENCE=1 DS_MATVEC_STREAM_XPREP_BUFS=1 & P+=($!)
stress D_bufs DS_MATVEC_STREAM_XPREP_FENCE=0 DS_MATVEC_STREAM_XPREP_BUFS=2 & P+=($!)
stress E_nopdl DS_MATVEC_STREAM_XPREP_FENCE=0 DS_MATVEC_STREAM_XPREP_BUFS=1 DS_MATVEC_STREAM_XPREP_PDL=0 & P+=($!)
DS_MATVEC_STREAM_XPREP_FENCE=0 DS_MATVEC_STREAM_XPREP_BUFS=1 timeout 110 "$B/test_cuda" --gtest_brief=1 --gtest_filter=CudaMatvec.StreamQ4KVariants > "$OUT/q4old.log" 2>&1 < /dev/null & P+=($!)
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
( for tool in racecheck synccheck; do DS_TEST_XPREP_SMALL=1 DS_TEST_XPREP_ITERS=2 timeout 40 "$CS" --tool $tool "$B/test_cuda" --gtest_brief=1 --gtest_filter=CudaMatvec.StreamXprepOrdering > "$OUT/san_$tool.log" 2>&1 < /dev/null; echo "rc=$?" >> "$OUT/san_$tool.log"; done ) & P+=($!)
wait "${P[@]}"
say "== phase A done"
cat "$OUT"/tc*.log > "$OUT/tests.log"; rm -f "$OUT"/tc*.log
{ echo "## test_cuda (4 shards)"; grep -E "PASSED|FAILED|tests ran|xprep ordering|Failure|actual" "$OUT/tests.log"
  echo "## test_cuda_model"; grep -E "PASSED|FAILED|tests ran" "$OUT/tm.log"
  echo "## stress (StreamXprepOrdering, $SEC s each)"; cat "$OUT"/st_*.log
  echo "## StreamQ4KVariants, FENCE=0 BUFS=1"; grep -E "PASSED|FAILED|stream int8|actual|width" "$OUT/q4old.log"
  echo "## sanitizers (small form)"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=|Error|hazard" "$OUT"/san_*.log | head -20
} | tee -a "$OUT/steps.log"
rm -f "$OUT"/st_*.log
tg() { [ $(el) -lt $LIM ] || { say "skip $1 $2"; return; }
  while [ ! -e "$W/m$1.ok" ]; do sleep 1; [ $(el) -lt $((LIM + 5)) ] || { say "no model $1"; return; }; done
  env ${2//,/ } timeout 40 "$X" bench -m "$W/m$1.gguf" --backend cuda -p 0 -n 128 -r 3 --json 2>/dev/null | grep '^{' | tail -1 > "$W/t.json"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['label']=sys.argv[2]; print(json.dumps(d))" "$W/t.json" "decode11 $2" >> "$OUT/bench.jsonl"
  say "TG $1 $2 $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens_per_s'])" "$W/t.json")"; }
tg 9B DS_DEFAULT=1; tg 9B DS_MATVEC_STREAM_XPREP=0; tg 27B DS_DEFAULT=1; tg 27B DS_MATVEC_STREAM_XPREP=0
tg 0.8B DS_DEFAULT=1; tg 9B DS_MATVEC_STREAM_XPREP=0,DS_MATVEC_STREAM_XPREP_Q6K=32; tg 9B DS_DEFAULT=1
say done
