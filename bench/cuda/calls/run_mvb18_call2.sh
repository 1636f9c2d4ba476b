#!/bin/bash
# mvb18 device call 2 (the bundle of call 1, commit ee460b0): DS_MVB_BUILD=2 (build17's form + the scale terms once per
# half block) vs 1 (the new default) on the 9B step: test_cuda_model with DS_MVB_BUILD=2 (while the 9B synth runs), then
# the step at B = 64 after 512-token prompts 1 / 2 / 1 / 2, short B = 64 1 / 2 / 0 (call 1 skipped those) while
# under 58 s; OUT=$OUT timeout 68 bash devwork-mvb18/go.sh, timeout_s 70.
# Run from the ignored devwork-mvb18/ in /work/main as OUT=$OUT bash devwork-mvb18/go.sh.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsm18; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve
LIM=${LIM:-58}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 6 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok"; echo "[$(el)s] synth done" >> "$OUT/steps.log" ) &
DS_MVB_BUILD=2 timeout 40 "$B/test_cuda_model" --gtest_brief=1 > "$W/t_model.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_model.log"
wait
say "test_cuda_model (DS_MVB_BUILD=2): $(grep -E 'PASSED|FAILED|^rc' $W/t_model.log | tr '\n' ' ')"
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --select 0 --json $W/cb.jsonl"
cb() { local name=$1 v=$2; shift 2; [ $(el) -lt $LIM ] || { say "skip cb $name"; return; }; echo "==== $name (DS_MVB_BUILD=$v $*)" >> "$W/cb.log"; env DS_MVB_BUILD=$v timeout 20 $C "$@" >> "$W/cb.log" 2>&1; say "cb $name rc=$? $(grep -E '^decode' $W/cb.log | tail -1 | cut -c1-90)"; }
cb "64L f1" 1 --batch 64 --prompt 512 --ctx 1024
cb "64L f2" 2 --batch 64 --prompt 512 --ctx 1024
cb "64L f1b" 1 --batch 64 --prompt 512 --ctx 1024
cb "64L f2b" 2 --batch 64 --prompt 512 --ctx 1024
cb "64 f1" 1 --batch 64
cb "64 f2" 2 --batch 64
cb "64 f0" 0 --batch 64
cp "$W/cb.log" "$W/t_model.log" "$OUT/" 2>/dev/null
say done
