#!/bin/bash
# Record of the batched8 helper's device call 2 (2026-12-03): as run_batched8_call1.sh (same bundle recipe, run from
# /work/main/devwork-batched8, the device tool's checkout) after the ring forms' weights became one 2D tensor copy per
# stage (cp.async.bulk.tensor; call 1's per-row 144-byte bulk copies were ~2x slower): kernel times, 9B batched decode
# A/B (rings, GDN prefetch), then the batched tests and the model tests with the ring forms on.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsb8; mkdir -p "$W"
M=$W/mvb_bench; xz -dc "$D/mvb_bench.xz" > "$M" && chmod +x "$M"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures"
X=$B/deltaserve
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
step() { local name=$1 limit=$2 log=$3; shift 3; say "== $name"; echo "==== $name" >> "$log"
  timeout "$limit" "$@" >> "$log" 2>&1; local rc=$?; say "== $name rc=$rc"; tail -2 "$log" | cut -c1-250 | tee -a "$OUT/steps.log"; return $rc; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 12 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok"; echo "synth done $(el)" >> "$OUT/steps.log" ) &
RING=1
step "timeq q4_k" 40 "$OUT/mvb.log" "$M" timeq q4_k || RING=0
[ $RING = 1 ] && { step "timeq q6_k" 40 "$OUT/mvb.log" "$M" timeq q6_k || RING=0; }
say "ring usable: $RING"
grep -E "^time .*B (32|64) (wg)" "$OUT/mvb.log" >> "$OUT/steps.log"
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 150 ]; do sleep 1; done
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --json $OUT/cb.jsonl"
cb() { local name=$1 e=$2; shift 2; [ $RING = 0 ] && [[ "$e" == *MVB* ]] && return; say "== $name"; echo "==== $name" >> "$OUT/cb.log"; env $e timeout 15 $C "$@" >> "$OUT/cb.log" 2>&1; say "== $name rc=$?"; grep -E "^decode" "$OUT/cb.log" | tail -1 | tee -a "$OUT/steps.log"; }
O="DS_GDN_PREFETCH=0"
cb "64 old" "$O" --batch 64 --breakdown --top 2
cb "64 default" "DS_X=0" --batch 64
cb "64 q4 ring auto" "DS_MVB_WG=4" --batch 64 --breakdown --top 2
cb "64 q4 ring 2" "DS_MVB_WG=5" --batch 64
cb "64 q4 ring 3" "DS_MVB_WG=6" --batch 64
cb "64 q4 ring 2ov" "DS_MVB_WG=7" --batch 64
cb "64 q6 ring auto" "DS_MVB_WG_Q6K=5" --batch 64
cb "64 q6 ring 2p" "DS_MVB_WG_Q6K=8" --batch 64
cb "64 both ring" "DS_MVB_WG=4 DS_MVB_WG_Q6K=5" --batch 64
for b in 8 32; do cb "$b old" "$O" --batch $b; cb "$b default" "DS_X=0" --batch $b; done
cb "32 q4 ring" "DS_MVB_WG=4" --batch 32
cb "64 old again" "$O" --batch 64
cb "64 default again" "DS_X=0" --batch 64
cb "64 q4 ring auto again" "DS_MVB_WG=4" --batch 64
[ $RING = 1 ] && export DS_MVB_WG=4 DS_MVB_WG_Q6K=5
step test_cuda_model 40 "$OUT/tests.log" "$B/test_cuda_model" --gtest_brief=1
step "test_cuda batched" 100 "$OUT/tests.log" "$B/test_cuda" --gtest_brief=1 --gtest_filter='CudaMatvecBatched.*'
grep -E "FAILED|PASSED|tests ran|Failure" "$OUT/tests.log" | head -30 | tee -a "$OUT/steps.log"
say done
cd "$OUT" && tar czf all.tgz *.log *.jsonl 2>/dev/null; ls -la "$OUT"
