#!/bin/bash
# prep20 device call 1 (H200): the wgmma products' x preparation spread over a cluster of CTAs per batch column
# (DS_MVB_PREP_PAR) and the preparations launched as programmatic dependents (DS_MVB_PREP_PDL). Configs: A = PAR 0 PDL 0
# (before), B = PAR 1 PDL 0, C = PAR 1 PDL 1, D = PAR 0 PDL 1. Tests while the 9B synth runs: test_cuda PrepParSameBits
# (Q4_K 13 / 12, Q6_K 9 / 8 / 1) + CudaMatvecBatchedIn.* + PrepRegSameBits; test_cuda_model --gtest_brief=1 with C.
# Then alone on the GPU: mvb_bench timedef q4_k and q6_k A B C D A B C D, the 9B step at 64 x 512+ A B C A B C, one
# --breakdown at 64 x 512+ A / C, then short B = 64 and B = 32 A / C (while under LIM); cuobjdump -res-usage of
# mvb_bench's prep kernels. NOT RUN in session 17 (status: new device loans paused); for a later session.
# Lives in /work/main/devwork-prep20/ (ignored) as go.sh beside b.tar.xz: tools/gpu_bundle.sh (deltaserve, test_cuda,
# test_cuda_model, fixtures; lib/ without libcublas*/libcudart*) + mvb_bench (nvcc -O3 -std=c++20 -arch=sm_90a
# -DDS_HAVE_CUDA=1 -DDS_HAVE_SM90A=1 --expt-relaxed-constexpr -DFMT_SHARED -DFMT_USE_CONSTEXPR=1 -DFMT_CONSTEVAL= -DNDEBUG
# -lineinfo -I src bench/cuda/matvec_batched_bench_standalone.cu build/src/cuda/libds_cuda.a build/src/quant/libds_quant.a
# build/src/core/libds_core.a -lcublas -lfmt -Xcompiler -fopenmp), stripped, `xz -9e -T2` (43.6 MB for 2732331).
# Run as: cd devwork-prep20 && OUT=$OUT LIM=150 timeout 200 bash go.sh (timeout_s 210; ~190 s wall expected).
set -u
cd "$(dirname "$0")"
D=$PWD; tar xJf b.tar.xz; B=$D/gpu-bundle; W=/tmp/dsprep20; mkdir -p "$W"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures" DS_BIN="$B/deltaserve"
X=$B/deltaserve; T=$B/test_cuda; M=$B/mvb_bench
LIM=${LIM:-150}
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[$(el)s] $*" | tee -a "$OUT/steps.log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$OUT/steps.log"
python3 -c "import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],'wb'))" "$B/fixtures/tokenizer/vocab-qwen3.gguf.xz" "$W/vocab.gguf"
( "$X" synth --size 9B --type Q4_K_M --vocab "$W/vocab.gguf" --threads 12 -o "$W/m9B.gguf" > "$W/synth.log" 2>&1 && touch "$W/m9B.ok"; echo "[$(el)s] synth done rc $?" >> "$OUT/steps.log" ) &
cfg() { case $1 in A) echo "DS_MVB_PREP_PAR=0 DS_MVB_PREP_PDL=0";; B) echo "DS_MVB_PREP_PAR=1 DS_MVB_PREP_PDL=0";;
  C) echo "DS_MVB_PREP_PAR=1 DS_MVB_PREP_PDL=1";; D) echo "DS_MVB_PREP_PAR=0 DS_MVB_PREP_PDL=1";; esac; }
CO=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
( timeout 20 "$CO" -res-usage "$M" 2>&1 | grep -A1 prep_ | grep -oE "(_Z[^ ]*|REG:[0-9]+ STACK:[0-9]+ SHARED:[0-9]+ LOCAL:[0-9]+)" | paste - - > "$OUT/res.txt" 2>&1 ) &
G='CudaMatvecBatched.PrepParSameBits:CudaMatvecBatchedIn.*:CudaMatvecBatched.PrepRegSameBits'
( timeout 90 "$T" --gtest_filter="$G" > "$OUT/t_par.log" 2>&1 < /dev/null; echo "rc $?" >> "$OUT/t_par.log" ) &
P1=$!
( env $(cfg C) timeout 90 "$B/test_cuda_model" --gtest_brief=1 > "$OUT/t_model.log" 2>&1 < /dev/null; echo "rc $?" >> "$OUT/t_model.log" ) &
P2=$!
wait $P1 $P2
say "test_cuda $G: $(grep -E '^\[       OK|^\[  FAILED  \] [A-Z]|^\[  (PASSED|FAILED) |^rc' $OUT/t_par.log | tr '\n' ' ')"
say "test_cuda_model (C): $(grep -E 'PASSED|FAILED|^rc' $OUT/t_model.log | tr '\n' ' ')"
td() { local tag=$1 ty=$2; env TAG=$tag$ty $(cfg ${tag:0:1}) timeout 20 "$M" timedef $ty >> "$W/td.log" 2>&1; say "td $tag $ty rc=$? $(grep -E "^timedef $tag$ty .*B 64" $W/td.log | awk '{print $4, $7}' | tr '\n' ' ')"; }
for r in 1 2; do for c in A B C D; do td $c$r q4_k; td $c$r q6_k; done; done
cp "$W/td.log" "$OUT/"
while [ ! -e "$W/m9B.ok" ] && [ $(el) -lt 120 ]; do sleep 1; done
C="$X cuda-bench -m $W/m9B.gguf --tg 32 --reps 2 --select 0 --json $W/cb.jsonl"
cb() { local name=$1 c=$2; shift 2; [ $(el) -lt $LIM ] || { say "skip cb $name"; return; }; echo "==== $name ($(cfg $c) $*)" >> "$OUT/cb.log"; env $(cfg $c) timeout 25 $C "$@" >> "$OUT/cb.log" 2>&1 < /dev/null; say "cb $name rc=$? $(grep -E '^decode' $OUT/cb.log | tail -1 | cut -c1-90)"; }
L="--batch 64 --prompt 512 --ctx 1024"
cb "64L A" A $L; cb "64L B" B $L; cb "64L C" C $L; cb "64L Ab" A $L; cb "64L Bb" B $L; cb "64L Cb" C $L
cb "64L A breakdown" A $L --breakdown; cb "64L C breakdown" C $L --breakdown
cb "64 short A" A --batch 64; cb "64 short C" C --batch 64; cb "32 A" A --batch 32; cb "32 C" C --batch 32
say done
