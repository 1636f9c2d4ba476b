#!/bin/bash
# sp19 device call 1: the Q4_K block kernel's kForm bits DS_MVB_LEAN (the producer's state in shared memory + the
# epilogue's indices re-read: no spill in the <3> kernel) and DS_MVB_MINQ (the mins' mma.sync after quarter 2's issue)
# vs the default. Tests while the 9B synth runs (GPU processes in parallel): BlockFormsSameBits + BlockBuildFastSameBits
# (default env), MatchesFloat64PerBatchRow alone in its process with LEAN=1 MINQ=1 (110 s limit; every form is bit-equal
# to the default by BlockFormsSameBits), test_cuda_model --gtest_brief=1 with LEAN=1 MINQ=1; cuobjdump -res-usage and
# the <3> kernels' STL/LDL counts; then alone on the GPU: mvb_bench timedef q4_k F0 F1 F3 F2 F0 F1 F3 F2, the 9B step at
# B = 64 after 512-token prompts F0 F1 F3 F0 F1 F3 (while under LIM). F<n>: LEAN = n & 1, MINQ = n >> 1.
# Run from the ignored devwork-sp19/ in /work/main as OUT=$OUT LIM=.. timeout T bash devwork-sp19/go.sh.
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dss19; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; T=$B/test_cuda; M=$B/mvb_bench
LIM=${LIM:-150}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 8 -o "$W/m9B.gguf" >/dev/null 2>&1 && touch "$W/m9B.ok"; echo "[$(el)s] synth done" >> "$OUT/steps.log" ) &
CO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
( timeout 20 "$CO" -res-usage "$M" 2>&1 | grep -A1 block_kernel | grep -oE "(_Z[^ ]*|REG:[0-9]+ STACK:[0-9]+ SHARED:[0-9]+ LOCAL:[0-9]+)" | paste - - > "$OUT/res.txt" 2>&1
  for f in 0 1 2 3; do for w in 2 3; do n=_ZN2ds4cuda3wgb12block_kernelILi${w}ELb0ELb1ELb1ELi${f}EEEvNS0_2wg4ArgsE14CUtensorMap_st
    echo "<$w> F$f STL $(timeout 20 "$CO" -sass -fun "$n" "$M" 2>/dev/null | grep -c 'STL') LDL $(timeout 20 "$CO" -sass -fun "$n" "$M" 2>/dev/null | grep -c 'LDL')"; done; done >> "$OUT/res.txt" 2>&1 ) &
G1='CudaMatvecBatched.BlockFormsSameBits:*BlockBuildFastSameBits'
( timeout 100 "$T" --gtest_filter="$G1" > "$W/t_g1.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_g1.log" ) &
( DS_MVB_LEAN=1 DS_MVB_MINQ=1 timeout 110 "$T" --gtest_filter='CudaMatvecBatched.MatchesFloat64PerBatchRow' > "$W/t_f64.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_f64.log" ) &
( DS_MVB_LEAN=1 DS_MVB_MINQ=1 timeout 100 "$B/test_cuda_model" --gtest_brief=1 > "$W/t_model.log" 2>&1 < /dev/null; echo "rc $?" >> "$W/t_model.log" ) &
wait
say "test_cuda G1 (default env): $(grep -E '^\[       OK|^\[  FAILED  \] [A-Z]|^\[  (PASSED|FAILED) |^rc' $W/t_g1.log | tr '\n' ' ')"
say "test_cuda MatchesFloat64PerBatchRow (LEAN=1 MINQ=1, alone): $(grep -E '^\[       OK|^\[  FAILED  \] [A-Z]|^\[  (PASSED|FAILED) |^rc' $W/t_f64.log | tr '\n' ' ')"
say "test_cuda_model (LEAN=1 MINQ=1): $(grep -E 'PASSED|FAILED|^rc' $W/t_model.log | tr '\n' ' ')"
grep -hE "FAILED|Failure|differ|worst|Expected|Which is" $W/t_*.log | sort | uniq -c | head -80 > "$OUT/test_summary.txt"
td() { local tag=$1 f=$2; env TAG=$tag DS_MVB_LEAN=$((f & 1)) DS_MVB_MINQ=$((f >> 1)) timeout 15 "$M" timedef q4_k >> "$W/td.log" 2>&1; say "td $tag rc=$? $(grep -E "^timedef $tag .*B 64" $W/td.log | awk '{print $4, $7}' | tr '\n' ' ')"; }
td f0 0; td f1 1; td f3 3; td f2 2; td f0b 0; td f1b 1; td f3b 3; td f2b 2
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 120 ]; do sleep 1; done
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --select 0 --json $W/cb.jsonl"
cb() { local name=$1 f=$2; shift 2; [ $(el) -lt $LIM ] || { say "skip cb $name"; return; }; echo "==== $name (F$f $*)" >> "$W/cb.log"; env DS_MVB_LEAN=$((f & 1)) DS_MVB_MINQ=$((f >> 1)) timeout 20 $C "$@" >> "$W/cb.log" 2>&1 < /dev/null; say "cb $name rc=$? $(grep -E '^decode' $W/cb.log | tail -1 | cut -c1-90)"; }
L="--batch 64 --prompt 512 --ctx 1024"
cb "64L F0" 0 $L; cb "64L F1" 1 $L; cb "64L F3" 3 $L; cb "64L F0b" 0 $L; cb "64L F1b" 1 $L; cb "64L F3b" 3 $L
cp "$W/cb.log" "$W/td.log" "$W/t_g1.log" "$W/t_f64.log" "$W/t_model.log" "$OUT/" 2>/dev/null
say done
