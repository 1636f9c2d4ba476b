#!/bin/bash
# hb19 device call 1: DS_MVB_HALF (the Q4_K block kernel's half-block stages; 1 = <2> and <3>, 2 = <2> only) vs the
# default. Tests while the 9B synth runs (GPU processes in parallel): BlockHalfStagesSameBits + BlockBuildFastSameBits +
# SplitReduceSameBits (default env), MatchesFloat64PerBatchRow alone in its own process with DS_MVB_HALF=1 (110 s limit),
# test_cuda_model --gtest_brief=1 with DS_MVB_HALF=1; then alone on the GPU: mvb_bench timedef q4_k 0 / 1 / 0 / 1, the 9B
# step at B = 64 after 512-token prompts H0 / H1 / H2 / RED2 / H0 / H1 / H2 / RED2, short B = 64 H0 / H1 / H2 (while
# under LIM). Run from the ignored devwork-hb19/ in /work/main as OUT=$OUT LIM=.. timeout T bash devwork-hb19/go.sh.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsh19; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; T=$B/test_cuda; M=$B/mvb_bench
LIM=${LIM:-190}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 8 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok"; echo "[$(el)s] synth done" >> "$OUT/steps.log" ) &
CO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
( timeout 20 "$CO" -res-usage "$M" 2>&1 | grep -A1 block_kernel | grep -oE "(_Z[^ ]*|REG:[0-9]+ STACK:[0-9]+ SHARED:[0-9]+ LOCAL:[0-9]+)" | paste - - > "$OUT/res.txt" 2>&1 ) &
G1='CudaMatvecBatched.BlockHalfStagesSameBits:*BlockBuildFastSameBits:*SplitReduceSameBits'
( timeout 100 "$T" --gtest_filter="$G1" > "$W/t_g1.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_g1.log" ) &
( DS_MVB_HALF=1 timeout 110 "$T" --gtest_filter='CudaMatvecBatched.MatchesFloat64PerBatchRow' > "$W/t_f64.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_f64.log" ) &
( DS_MVB_HALF=1 timeout 100 "$B/test_cuda_model" --gtest_brief=1 > "$W/t_model.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_model.log" ) &
wait
say "test_cuda G1 (default env): $(grep -E '^\[       OK|^\[  FAILED  \] [A-Z]|^\[  (PASSED|FAILED) |^rc' $W/t_g1.log | tr '\n' ' ')"
say "test_cuda MatchesFloat64PerBatchRow (DS_MVB_HALF=1, alone): $(grep -E '^\[       OK|^\[  FAILED  \] [A-Z]|^\[  (PASSED|FAILED) |^rc' $W/t_f64.log | tr '\n' ' ')"
say "test_cuda_model (DS_MVB_HALF=1): $(grep -E 'PASSED|FAILED|^rc' $W/t_model.log | tr '\n' ' ')"
grep -hE "FAILED|Failure|differ|worst|Expected|Which is" $W/t_*.log | sort | uniq -c | head -80 > "$OUT/test_summary.txt"
td() { local tag=$1 v=$2; env TAG=$tag DS_MVB_HALF=$v timeout 15 "$M" timedef q4_k >> "$W/td.log" 2>&1; say "td $tag rc=$? $(grep -E "^timedef $tag .*B 64" $W/td.log | awk '{print $4, $7}' | tr '\n' ' ')"; }
td h0 0; td h1 1; td h0b 0; td h1b 1
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 150 ]; do sleep 1; done
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --select 0 --json $W/cb.jsonl"
cb() { local name=$1 e=$2; shift 2; [ $(el) -lt $LIM ] || { say "skip cb $name"; return; }; echo "==== $name ($e $*)" >> "$W/cb.log"; env $e timeout 20 $C "$@" >> "$W/cb.log" 2>&1 < /dev/null; say "cb $name rc=$? $(grep -E '^decode' $W/cb.log | tail -1 | cut -c1-90)"; }
L="--batch 64 --prompt 512 --ctx 1024"
cb "64L H0" DS_MVB_HALF=0 $L; cb "64L H1" DS_MVB_HALF=1 $L; cb "64L H2" DS_MVB_HALF=2 $L; cb "64L RED2" DS_MVB_RED=2 $L
cb "64L H0b" DS_MVB_HALF=0 $L; cb "64L H1b" DS_MVB_HALF=1 $L; cb "64L H2b" DS_MVB_HALF=2 $L; cb "64L RED2b" DS_MVB_RED=2 $L
cb "64 H0" DS_MVB_HALF=0 --batch 64; cb "64 H1" DS_MVB_HALF=1 --batch 64; cb "64 H2" DS_MVB_HALF=2 --batch 64
cp "$W/cb.log" "$W/td.log" "$W/t_g1.log" "$W/t_f64.log" "$W/t_model.log" "$OUT/" 2>/dev/null
say done
