#!/bin/bash
# decode11 call 2 (H200): the Sx / zero-block fix. Phase A at once: CudaMatvec.StreamXprepOrdering (the stress
# that failed 17 + 1 times in call 1) in 3 processes for SEC s each with the new defaults, the stream-kernel tests
# (StreamQ4KVariants with XPREP 32 on its long rows, StreamXprep, StreamQ6KVariants, StreamWideSmall) and
# test_cuda_model; phase B: tg128 9B default / XPREP=0, 0.8B, 27B default / XPREP=0 while elapsed < LIM.
# Run as: OUT=$OUT SEC=30 LIM=50 bash devwork-decode11/go.sh
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; LIM=${LIM:-50}; SEC=${SEC:-30}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }; say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 6 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok"
  "$X" synth --size 0.8B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 6 -o "$W/m0.8B.gguf" >/dev/null 2>&1 && touch "$W/m0.8B.ok" ) &
( "$X" synth --size 27B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 6 -o "$W/m27B.gguf" >/dev/null 2>&1 && touch "$W/m27B.ok" ) &
say "== phase A"
P=()
stress() { local n=$1; DS_TEST_XPREP_SECONDS=$SEC timeout $((SEC + 25)) "$B/test_cuda" --gtest_filter=CudaMatvec.StreamXprepOrdering < /dev/null 2>&1 | grep -E "xprep ordering|OK \]|FAILED" | sed "s/^/stress $n | /" > "$OUT/st_$n.log"; }
for n in 1 2 3; do stress $n & P+=($!); done
timeout 70 "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvec.StreamQ4KVariants' > "$OUT/t1.log" 2>&1 < /dev/null & P+=($!)
timeout 70 "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvec.StreamXprep:CudaMatvec.StreamQ6KVariants:CudaMatvec.StreamWideSmall' > "$OUT/t2.log" 2>&1 < /dev/null & P+=($!)
timeout 70 "$B/test_cuda_model" --gtest_brief=1 > "$OUT/tm.log" 2>&1 < /dev/null & P+=($!)
wait "${P[@]}"
say "== phase A done"
{ echo "## stress (StreamXprepOrdering, $SEC s each, defaults)"; cat "$OUT"/st_*.log
  echo "## test_cuda stream tests"; grep -E "PASSED|FAILED|^\[stream|actual|width" "$OUT/t1.log" "$OUT/t2.log"
  echo "## test_cuda_model"; grep -E "PASSED|FAILED|tests ran" "$OUT/tm.log"
} | tee -a "$OUT/steps.log"
rm -f "$OUT"/st_*.log
tg() { [ $(el) -lt $LIM ] || { say "skip $1 $2"; return; }
  [ -e "$W/m$1.ok" ] || { say "no model $1 yet"; return; }
  env ${2//,/ } timeout 30 "$X" bench -m "$W/m$1.gguf" --backend cuda -p 0 -n 128 -r 3 --json 2>/dev/null | grep '^{' | tail -1 > "$W/t.json"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['label']=sys.argv[2]; print(json.dumps(d))" "$W/t.json" "decode11 $2" >> "$OUT/bench.jsonl"
  say "TG $1 $2 $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens_per_s'])" "$W/t.json")"; }
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt $LIM ]; do sleep 1; done
tg 9B DS_DEFAULT=1; tg 9B DS_MATVEC_STREAM_XPREP=0; tg 0.8B DS_DEFAULT=1; tg 27B DS_DEFAULT=1; tg 27B DS_MATVEC_STREAM_XPREP=0; tg 9B DS_DEFAULT=1
say done
