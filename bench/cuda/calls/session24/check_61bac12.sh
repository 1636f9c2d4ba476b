#!/bin/bash
# Check of 61bac12 (the lazy rule with one persistent state kernel; bundle of main 33f38a1): GdnLazy, test_cuda_model with DS_GDN_LAZY=8, GdnBench B 64 lines. Run: cd devlz28 && timeout 150 bash go.sh with carry ["devlz28"]
set -u
cd "$(dirname "$0")"; tar xJf b.tar.xz; B=$PWD/gpu-bundle
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64" DS_FIXTURES="$B/fixtures"
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 30 "$B/test_cuda_model" --gtest_filter='GdnLazy.*' 2>&1 | grep -E "\[lz23\]|OK|FAILED|PASSED|Failure" | cut -c1-160
DS_GDN_LAZY=8 timeout 60 "$B/test_cuda_model" --gtest_brief=1 2>&1 | grep -E "PASSED|FAILED" | cut -c1-160
DS_GDN_BENCH=1 timeout 30 "$B/test_cuda_model" --gtest_filter='GdnBench.Time' 2>&1 | grep -E "\[lz24\].*B 64|B 64 tma-out-smem-in " | cut -c1-160
timeout 40 compute-sanitizer --tool memcheck "$B/test_cuda_model" --gtest_filter='GdnLazy.*' 2>&1 | grep -E "ERROR SUMMARY|PASSED|FAILED" | tail -2
