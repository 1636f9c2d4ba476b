#!/bin/bash
# Session 15 verification of main's final head (DS_ATTN_EVICT and gs18's split on by default): GPU model / prefill
# tests, the GDN same-bits tests, tg128 0.8B / 9B, the 9B step at 64 x 512+. Run as OUT=$OUT bash devwork-v15/go.sh
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsv; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }; say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"; "$X" --version | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( for s in 0.8B 9B; do "$X" synth --size $s --type Q4_K_M --vocab "$W/vocab.gguf" --threads 8 -o "$W/m$s.gguf" >/dev/null 2>&1 && touch "$W/m$s.ok"; done ) &
t() { local n=$1 lim=$2; shift 2; timeout $lim "$@" > "$OUT/t_$n.log" 2>&1 < /dev/null; echo "rc=$?" >> "$OUT/t_$n.log"; say "$n $(grep -E '^rc=|PASSED|FAILED|SUMMARY' "$OUT/t_$n.log" | tr '\n' ' ' | cut -c1-200)"; }
say "== tests"
t model 90 "$B/test_cuda_model" --gtest_brief=1 & P1=$!
t prefill 60 "$B/test_cuda_prefill" --gtest_brief=1 & P2=$!
t gdn 60 "$B/test_cuda_model" --gtest_filter='GdnConvStep.*:GdnStep.*:AttnRing.*' & P3=$!
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
t race 80 "$CS" --tool racecheck --error-exitcode 9 "$B/test_cuda_model" --gtest_filter='GdnConvStep.FusedGivesSameBits' & P4=$!
wait $P1 $P2 $P3 $P4
tg() { while [ ! -e "$W/m$1.ok" ] && [ $(el) -lt 150 ]; do sleep 1; done
  env $2 timeout 30 "$X" bench -m "$W/m$1.gguf" --backend cuda -p 0 -n 128 -r 3 --json 2>/dev/null < /dev/null | grep '^{' | tail -1 > "$W/t.json"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d['label']=sys.argv[2]; print(json.dumps(d))" "$W/t.json" "$2" >> "$OUT/bench.jsonl"
  say "TG $1 $2 $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens_per_s'])" "$W/t.json")"; }
for r in 1 2; do tg 0.8B DS_DEFAULT=1; tg 0.8B DS_GDN_SPLIT_B1=0; done
for r in 1 2; do tg 9B DS_DEFAULT=1; done
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --select 0 --json $OUT/cb.jsonl"
for e in DS_DEFAULT=1 DS_ATTN_EVICT=0 DS_DEFAULT=1 DS_ATTN_EVICT=0; do env $e timeout 30 $C --batch 64 --prompt 512 --ctx 1024 >> "$OUT/cb.log" 2>&1 < /dev/null; say "B64x512 $e $(grep -E '^decode' "$OUT/cb.log" | tail -1 | cut -c1-90)"; done
timeout 20 "$X" cuda-bench -m "$W/m0.8B.gguf" --tg 16 --breakdown >> "$OUT/cb.log" 2>&1 < /dev/null; say "0.8B $(grep -E '^decode' "$OUT/cb.log" | tail -1 | cut -c1-90)"
say done
