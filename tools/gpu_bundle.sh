#!/usr/bin/env bash
# Packs what tools/gpu_full_check.sh needs on a GPU machine that has the CUDA runtime but none of Debian's
# development packages: the built binaries (deltaserve, test_cuda_model, test_cuda if built), the shared
# libraries they load that are not part of glibc or the NVIDIA driver (lib/), and the fixture models and
# tokenizer vocabulary (fixtures/). Run here after building with CUDA; carry the folder (add it to
# .git/info/exclude) and run: OUT=$OUT BIN_DIR=<folder> tools/gpu_full_check.sh
# Usage: tools/gpu_bundle.sh [BUILD_DIR=build] [DEST=gpu-bundle]
set -eu
BUILD=${1:-build}
DEST=${2:-gpu-bundle}
FIX=${DS_FIXTURES:-$(dirname "$0")/../../shared/fixtures}
rm -rf "$DEST"; mkdir -p "$DEST/lib" "$DEST/fixtures/tokenizer"
for b in apps/deltaserve tests/cuda_model/test_cuda_model tests/cuda/test_cuda tests/cuda_prefill/test_cuda_prefill \
         tests/engine/test_engine; do
  [ -x "$BUILD/$b" ] && cp "$BUILD/$b" "$DEST/"
done
# Shared libraries outside glibc and the driver (libcuda comes with the GPU machine's driver).
for b in "$DEST"/deltaserve "$DEST"/test_*; do
  ldd "$b" | awk '/=> \// {print $3}'
done | sort -u | grep -vE '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*|libcuda)\.so' | while read -r so; do
  cp -L "$so" "$DEST/lib/"
done
cp -r "$FIX/models" "$DEST/fixtures/"
cp "$FIX/tokenizer/vocab-qwen3.gguf.xz" "$DEST/fixtures/tokenizer/"
cp -r "$FIX/quant" "$DEST/fixtures/"  # dequantization goldens (test_cuda)
du -sh "$DEST" "$DEST"/*
