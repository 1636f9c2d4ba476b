#!/bin/bash
# Builds the standalone matvec_batched checker/bench (matvec_batched_bench_standalone.cu) with nvcc in
# several compile-time variants of the tensor-core kernel (src/cuda/matvec_mma.cuh macros) and runs
# them: accuracy checks for the 3- and 2-term splits and both kernels, then timings at the 9B shapes.
# Run from the repository root on a GPU machine; everything goes to ${OUT:-/tmp/mvb_out}/summary.txt.
#   bash bench/cuda/matvec_batched_variants.sh
set -u
O=${OUT:-/tmp/mvb_out}; mkdir -p "$O"; S=$O/summary.txt; : > "$S"
B=$(mktemp -d)
F="-O3 -std=c++20 -arch=sm_90 --expt-relaxed-constexpr -DFMT_USE_CONSTEXPR=1 -DFMT_CONSTEVAL= -DFMT_HEADER_ONLY -I src"
V="b3: b2:-DDS_MMA_TERMS=2 b3pf0:-DDS_MMA_PF=0 b3mt2:-DDS_MMA_MT1_MAX_BATCH=8"
for v in $V; do n=${v%%:*}; d=${v#*:}; nvcc $F ${d//,/ } -c src/cuda/matvec_batched.cu -o $B/mb_$n.o 2>> $B/build.txt & done
nvcc $F -c src/cuda/matvec.cu -o $B/matvec.o 2>> $B/build.txt &
nvcc $F -c bench/cuda/matvec_batched_bench_standalone.cu -o $B/bench.o 2>> $B/build.txt &
for f in src/cuda/cuda_util.cpp src/core/ggml_type.cpp src/quant/*.cpp; do
  nvcc $F -Xcompiler -mavx2,-mfma,-mf16c -c $f -o $B/$(basename $f).o 2>> $B/build.txt &
done
wait
for v in $V; do n=${v%%:*}; nvcc -arch=sm_90 $B/bench.o $B/mb_$n.o $B/matvec.o $B/*.cpp.o -o $B/$n 2>> $B/build.txt; done
grep -i -E " error|undefined" $B/build.txt >> "$S"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader >> "$S"
for n in b3 b2 xs3 xs2; do echo "== $n check" >> "$S"; timeout 60 $B/$n check >> "$S" 2>&1; echo "rc $?" >> "$S"; done
echo "== b3 checkfold (Q4_K: fold off, modes 0 1 2)" >> "$S"; timeout 60 $B/b3 checkfold >> "$S" 2>&1
echo "== b3 time (with the FMA kernel)" >> "$S"; timeout 40 $B/b3 time >> "$S" 2>&1
for v in $V; do n=${v%%:*}; [ $n = b3 ] && continue
  echo "== $n timeq" >> "$S"; timeout 25 $B/$n timeq >> "$S" 2>&1; echo "rc $?" >> "$S"; done
rm -rf "$B"
