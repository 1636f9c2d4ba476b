// Tile table (one thread walks the sequences: a few hundred tiles at most per call, microseconds), the
// shared-memory opt-in and the Scratch owner.
#include "cuda/prefill/common.cuh"
#include "cuda/prefill/prefill.cuh"

namespace ds::cuda::prefill {
namespace {

__global__ void tile_table_kernel(const int32_t* __restrict__ seq_starts, int n_seqs, int n_tokens, int tile,
                                  int n_max, int4* __restrict__ tiles, int32_t* __restrict__ seq_first) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  int c = 0;
  for (int s = 0; s < n_seqs; s++) {
    int t0 = seq_starts ? seq_starts[s] : 0;
    int t1 = seq_starts ? seq_starts[s + 1] : n_tokens;
    t0 = max(0, min(t0, n_tokens));
    t1 = max(t0, min(t1, n_tokens));
    if (seq_first) seq_first[s] = c;
    for (int t = t0, i = 0; t < t1 && c < n_max; t += tile, i++) tiles[c++] = make_int4(s, t, min(tile, t1 - t), i);
  }
  if (seq_first) seq_first[n_seqs] = c;
  for (int i = c; i < n_max; i++) tiles[i] = make_int4(0, 0, 0, 0);
}

}  // namespace

Status launch_tile_table(const int32_t* seq_starts, int64_t n_seqs, int64_t n_tokens, int tile, int64_t n_max,
                         int4* tiles, int32_t* seq_first, cudaStream_t stream) {
  if (n_seqs < 1 || n_tokens < 0 || tile < 1 || n_max < 0 || n_tokens > INT32_MAX || n_max > INT32_MAX)
    return cu_err("cuda prefill: tile table: bad sizes (sequences {}, tokens {}, tile {}, max tiles {})", n_seqs,
                  n_tokens, tile, n_max);
  tile_table_kernel<<<1, 32, 0, stream>>>(seq_starts, (int)n_seqs, (int)n_tokens, tile, (int)n_max, tiles,
                                          seq_first);
  CUDA_TRY_LAUNCH("prefill tile table", stream);
  return {};
}

Status allow_smem(const void* kernel, size_t bytes) {
  if (bytes <= 48 * 1024) return {};
  int dev = 0, optin = 0;
  CUDA_TRY(cudaGetDevice(&dev));
  CUDA_TRY(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  if ((size_t)optin < bytes)
    return cu_err("cuda prefill: a kernel needs {} bytes of shared memory, the device allows {}", bytes, optin);
  CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
  return {};
}

Result<void*> Scratch::get(size_t bytes) {
  if (buf_.size() < bytes || buf_.empty()) {
    buf_.reset();
    auto b = DeviceBuffer::alloc(bytes < 256 ? 256 : bytes);
    if (!b.ok()) return b.error();
    buf_ = std::move(b).value();
  }
  return buf_.data();
}

}  // namespace ds::cuda::prefill
