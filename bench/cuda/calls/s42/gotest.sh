#!/bin/bash
# Session 42, call 2: test_cuda's batched-product tests (the Q6_K ring's kept forms after 326bb9d) on the GPU.
# Run as: cd devf16 && OUT=$OUT timeout 280 bash gotest.sh
set -u
cd "$(dirname "$0")"
tar xJf b.tar.xz && xz -dc t/test_cuda.xz > gpu-bundle/test_cuda && chmod +x gpu-bundle/test_cuda
export LD_LIBRARY_PATH="$PWD/gpu-bundle/lib:/usr/local/cuda/lib64" DS_FIXTURES="$PWD/gpu-bundle/fixtures"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/steps.log"
timeout 250 gpu-bundle/test_cuda --gtest_filter='CudaMatvecBatched.*:CudaMatvec.*' > "$OUT/test_cuda.log" 2>&1
echo "rc=$?" | tee -a "$OUT/steps.log"
grep -E '^\[  (PASSED|FAILED) |tests ran|^\[  FAILED|Failure' "$OUT/test_cuda.log" | head -30 | tee -a "$OUT/steps.log"
grep -E 'odd large scales' "$OUT/test_cuda.log" | head -8 | tee -a "$OUT/steps.log"
