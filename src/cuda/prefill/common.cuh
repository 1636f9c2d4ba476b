// Shared pieces of the prefill kernels: the device-side tile table that splits packed sequences into
// tiles of at most `tile` tokens (a tile never straddles two sequences), and the dynamic shared memory
// opt-in. The table lives in device memory because seq_starts does: no host synchronization.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/error.h"
#include "cuda/cuda_util.h"

namespace ds::cuda::prefill {

// Upper bound of the tiles of n_tokens tokens in n_seqs sequences: sum ceil(len_s / tile) <= ceil(T / tile) + S.
inline int64_t max_tiles(int64_t n_tokens, int64_t n_seqs, int64_t tile) {
  return (n_tokens + tile - 1) / tile + n_seqs;
}

// tiles[c] = {sequence, first token, tokens, tile index inside the sequence} for c < count, {0, 0, 0, 0}
// for count <= c < n_max; seq_first[s] = first tile of sequence s, seq_first[n_seqs] = count (seq_first may
// be null). seq_starts == nullptr: one sequence of n_tokens. Start/end values are clamped into
// [0, n_tokens] so a bad index array cannot send a kernel out of bounds.
Status launch_tile_table(const int32_t* seq_starts, int64_t n_seqs, int64_t n_tokens, int tile, int64_t n_max,
                         int4* tiles, int32_t* seq_first, cudaStream_t stream);

// Raises a kernel's dynamic shared memory limit to `bytes` (needed above 48 KB); an Error if the device
// cannot give that much.
Status allow_smem(const void* kernel, size_t bytes);

inline size_t align256(size_t n) { return (n + 255) / 256 * 256; }

}  // namespace ds::cuda::prefill
