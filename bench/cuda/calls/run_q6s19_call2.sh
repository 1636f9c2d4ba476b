#!/bin/bash
# q6s19 call 2 (H200): the Q6_K stream kernel's consumer-warp split in the model: tg128 27B / 9B with
# DS_MATVEC_STREAM_Q6K_WIDE 1 (default: 16 consumer warps) / 0 (8), interleaved, and StreamTimeline under each
# (call 1's mvbench: 27B ffn_down stream6_w8 34.45 us vs 36.30 with 16 warps; 9B 20.07 vs 19.14). Same binaries as call 1.
# Run as: cd devwork-q6s19 && OUT=$OUT timeout T bash go.sh
set -u
cd "$(dirname "$0")"
D=$PWD; W=/tmp/dsv_q6s19b; rm -rf "$W"; mkdir -p "$W"
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }; say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
tar xJf b.tar.xz; B=$D/gpu-bundle
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; TC=$B/test_cuda; LIM=${LIM:-75}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
syn() { nice "$X" synth --size $1 --type Q4_K_M --vocab "$W/vocab.gguf" --threads 7 -o "$W/m$1.gguf" >/dev/null 2>&1 && touch "$W/m$1.ok"; echo "[$(el)s] synth $1 done" >> "$OUT/steps.log"; }
( syn 27B ) &
( syn 9B ) &
tl() { echo "==== timeline WIDE=$1" >> "$W/timeline.log"
  DS_MATVEC_STREAM_Q6K_WIDE=$1 timeout 30 "$TC" --gtest_filter='CudaMatvec.StreamTimeline' >> "$W/timeline.log" 2>&1 < /dev/null
  say "timeline WIDE=$1 rc=$? $(grep -E 'per replay|ffn_down q6' $W/timeline.log | tail -2 | cut -c1-330 | tr '\n' ' ')"; }
tl 1; tl 0
tg() { local s=$1 f=$2; [ $(el) -lt $LIM ] || { say "skip tg $s wide=$f"; return; }
  while [ ! -e "$W/m$s.ok" ] && [ $(el) -lt $LIM ]; do sleep 1; done
  [ -e "$W/m$s.ok" ] || { say "no model $s"; return; }
  DS_MATVEC_STREAM_Q6K_WIDE=$f timeout 40 "$X" bench -m "$W/m$s.gguf" --backend cuda -p 0 -n 128 -r 3 --json 2>>"$W/bench.err" < /dev/null | grep '^{' | tail -1 > "$W/t.json"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['label']=sys.argv[2]; print(json.dumps(d))" "$W/t.json" "q6s19 call2 $s wide=$f" >> "$OUT/bench.jsonl"
  say "TG $s wide=$f $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens_per_s'])" "$W/t.json" 2>&1 | tail -1)"; }
for r in 1 2; do tg 27B 1; tg 27B 0; done
for r in 1 2; do tg 9B 1; tg 9B 0; done
say done
cp "$W/timeline.log" "$OUT/" 2>/dev/null
