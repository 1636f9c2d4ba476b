#!/bin/bash
# follow-up: the final defaults (XPREP 0, FUSE_IN 0) through every GPU test; XPREP=32 repro of StreamQ4KVariants
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve
T0=$(date +%s); say() { echo "[$(( $(date +%s) - T0 ))s] $*" | tee -a "$OUT/steps.log"; }
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( for s in 9B 0.8B 27B; do "$X" synth --size $s --type Q4_K_M --vocab "$W/vocab.gguf" --threads 12 -o "$W/m$s.gguf" >/dev/null 2>&1 && touch "$W/m$s.ok"; done ) &
say "== test_cuda final defaults (4 shards) + XPREP=32 repro"
for i in 0 1 2 3; do DS_MATVEC_STREAM_XPREP=0 DS_MVB_FUSE_IN=0 GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i timeout 200 "$B/test_cuda" --gtest_brief=1 > "$OUT/tc$i.log" 2>&1 < /dev/null & done
DS_MATVEC_STREAM_XPREP=32 timeout 100 "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvec.StreamQ4KVariants:CudaMatvec.StreamXprep' > "$OUT/repro.log" 2>&1 < /dev/null &
wait
cat "$OUT"/tc*.log > "$OUT/tests.log"; rm -f "$OUT"/tc*.log
grep -E "PASSED|FAILED|tests ran" "$OUT/tests.log" | tee -a "$OUT/steps.log"
grep -E "PASSED|FAILED|stream int8" "$OUT/repro.log" | tee -a "$OUT/steps.log"
DS_MATVEC_STREAM_XPREP=0 DS_MVB_FUSE_IN=0 timeout 70 "$B/test_cuda_model" --gtest_brief=1 >> "$OUT/tests.log" 2>&1; say "model rc=$?"
DS_MATVEC_STREAM_XPREP=0 DS_MVB_FUSE_IN=0 timeout 40 "$B/test_cuda_prefill" --gtest_brief=1 >> "$OUT/tests.log" 2>&1; say "prefill rc=$?"
grep -E "FAILED|PASSED|tests ran" "$OUT/tests.log" | tail -4 | tee -a "$OUT/steps.log"
tg() { local el=$(( $(date +%s) - T0 )); [ $el -lt ${LIM:-230} ] || { say "skip $1 $2"; return; }
  while [ ! -e "$W/m$1.ok" ]; do sleep 1; done
  env DS_MATVEC_STREAM_XPREP=0 DS_MVB_FUSE_IN=0 $2 timeout 60 "$X" bench -m "$W/m$1.gguf" --backend cuda -p 0 -n 128 -r 3 --json 2>/dev/null | grep '^{' | tail -1 > "$OUT/t.json"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['label']=sys.argv[2]; print(json.dumps(d))" "$OUT/t.json" "final-defaults $2" >> "$OUT/bench.jsonl"
  say "TG $1 $2 $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens_per_s'])" "$OUT/t.json")"; }
tg 9B DS_DEFAULT=1; tg 0.8B DS_DEFAULT=1; tg 9B DS_MATVEC_STREAM_XPREP=32; tg 27B DS_DEFAULT=1
say done
rm -f "$OUT/t.json"
