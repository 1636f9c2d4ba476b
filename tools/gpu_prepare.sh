#!/usr/bin/env bash
# Makes the folder a device call carries (the `device` tool's run, carry ["devf16"]): the CUDA build's binaries
# packed by tools/gpu_bundle.sh, cut to what the call scripts use (deltaserve, test_cuda_model, the fixture models
# and the Qwen3 vocabulary; the GPU machine has its own cuBLAS / cudart in /usr/local/cuda/lib64), stripped and
# xz'd as b.tar.xz (bench/cuda/calls/prelude.sh unpacks it), beside the call scripts of CALLS.
# A carry is at most 64 MiB with the tracked tree (~15 MB), so one build (~14 MB xz'd) leaves room; more builds
# for an A/B go into the same tar, each under its own folder (see bench/cuda/calls/s40/go1.sh).
# SYM=1 also packs the tiny-sym fixture models as f.tar.xz (~17 MB: all of test_cuda_model needs them; s42/go1.sh unpacks it).
# Usage (repository root, after scripts/build.sh with nvcc): [SYM=1] tools/gpu_prepare.sh [BUILD=build] [CALLS=bench/cuda/calls/s40]
# Then: run(command="cd devf16 && OUT=$OUT LIM=300 timeout 310 bash go3.sh", carry=["devf16"], kind=...)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
CALLS=${2:-bench/cuda/calls/s40}
DEST=devf16
[ -x "$BUILD/apps/deltaserve" ] && [ -x "$BUILD/tests/cuda_model/test_cuda_model" ] ||
  { echo "gpu_prepare: $BUILD has no CUDA build (apps/deltaserve, tests/cuda_model/test_cuda_model); run scripts/build.sh on a machine with nvcc" >&2; exit 1; }
rm -rf "$DEST" && mkdir -p "$DEST"
bash tools/gpu_bundle.sh "$BUILD" "$DEST/gpu-bundle" > /dev/null
(
  cd "$DEST/gpu-bundle"
  rm -f test_cuda test_cuda_prefill test_engine
  [ "${SYM:-0}" = 1 ] && tar cf - -C .. gpu-bundle/fixtures/models/tiny-sym | xz -6 -T2 > ../f.tar.xz
  rm -rf fixtures/models/tiny-sym fixtures/quant lib/libcublas* lib/libcudart*
  strip deltaserve test_cuda_model
)
echo "gpu_prepare: packing (xz -9e, a few minutes)"
(cd "$DEST" && tar cf - gpu-bundle | xz -9e -T1 > b.tar.xz && rm -rf gpu-bundle)
cp "$CALLS"/go*.sh "$DEST/"
size=$(du -k "$DEST" | tail -1 | cut -f1)
echo "gpu_prepare: $DEST = ${size} KiB ($(ls "$DEST" | tr '\n' ' ')); carry limit 64 MiB with the tracked tree"
[ "$size" -lt 48000 ] || echo "gpu_prepare: WARNING: over ~47 MiB; with the tracked tree the carry may pass 64 MiB" >&2
