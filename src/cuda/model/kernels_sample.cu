// Device-side row selection for sampling (CudaModel::decode_select, issue 7): per row of B x V logits the
// argmax (ties: the lowest id, as sampler::argmax), the row max, log(sum exp(l - max)) summed in double, and
// the k best (logit, id) pairs, most likely first with ties lower id first (the order of sampler::summarize).
// A step then downloads a few hundred bytes per row instead of V floats (1 MB for Qwen3.5's 248,320).
//
// Every element becomes one 64-bit key whose unsigned order is the sampler's order: the high word is the
// float's bits mapped to an increasing unsigned (NaN lowest), the low word 0xFFFFFFFF - id (so among equal
// logits the lower id is larger). Key 0 means "no element". Two kernels:
//   1. one block per (row, chunk of <= kThreads * kPer elements): each thread holds kPer keys in registers;
//      k rounds of a block max take the chunk's k best; the chunk's max and sum exp(l - chunk max) in double.
//   2. one block per row: the chunks' candidates (n_chunks * k <= kThreads * kPer keys) go through the same
//      k rounds; the chunk sums are rescaled to the row max and added (in chunk order).
// The lse differs from the host's index-order sum by rounding only (~1e-16 relative, before the float
// conversion of a logprob). Both kernels also count the row's NaN / +-inf logits (kernel 1 per chunk, kernel 2 their
// sum): a row that holds any makes the engine fail its request instead of sampling it.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <algorithm>

#include "cuda/cuda_util.h"
#include "cuda/matvec.h"
#include "cuda/model/model_impl.cuh"
#include "cuda/model/qwen35_cuda.cuh"

namespace ds::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kPer = 16;  // keys per thread
constexpr int kChunk = kThreads * kPer;

__device__ __forceinline__ uint32_t order_bits(float x) {
  const uint32_t u = __float_as_uint(x);
  if (isnan(x)) return 0;
  if (x == 0.0f) return 0x80000000u;  // -0 ties with +0, as in the host's comparisons
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ float from_order_bits(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k ^ 0x80000000u) : ~k);
}

__device__ __forceinline__ uint64_t make_key(float x, int32_t id) {
  return ((uint64_t)order_bits(x) << 32) | (uint64_t)(0xFFFFFFFFu - (uint32_t)id);
}

__device__ __forceinline__ int32_t key_id(uint64_t key) { return (int32_t)(0xFFFFFFFFu - (uint32_t)key); }
__device__ __forceinline__ float key_logit(uint64_t key) { return from_order_bits((uint32_t)(key >> 32)); }

// Block-wide max of one key per thread; every thread gets the result. `red` holds kThreads / 32 keys.
__device__ uint64_t block_max(uint64_t v, uint64_t* red) {
  for (int o = 16; o > 0; o >>= 1) {
    const uint64_t w = __shfl_xor_sync(0xFFFFFFFFu, v, o);
    v = w > v ? w : v;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // `red` may still be read from the previous call
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = red[lane % (kThreads / 32)];  // every group of 8 lanes reduces the same 8 values: all threads agree
  for (int o = 4; o > 0; o >>= 1) {
    const uint64_t w = __shfl_xor_sync(0xFFFFFFFFu, v, o);
    v = w > v ? w : v;
  }
  return v;
}

__device__ double block_sum(double v, double* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = 0;
  if (lane == 0 && warp == 0)
    for (int i = 0; i < kThreads / 32; i++) v += red[i];  // a fixed order: the same sum every run
  return v;  // valid in thread 0
}

// Takes the k best of the keys held by the block (kPer per thread, 0 = none), in order; thread 0 writes key i
// to out[i] (0 when fewer exist). Returns the best key (every thread).
__device__ uint64_t take_best(uint64_t (&v)[kPer], int k, uint64_t* out, uint64_t* red) {
  uint64_t first = 0;
  for (int i = 0; i < (k > 0 ? k : 1); i++) {
    uint64_t mine = 0;
#pragma unroll
    for (int j = 0; j < kPer; j++) mine = v[j] > mine ? v[j] : mine;
    const uint64_t best = block_max(mine, red);
    if (i == 0) first = best;
    if (k > 0 && threadIdx.x == 0) out[i] = best;
    if (best == 0) {  // nothing left: the rest are empty
      if (threadIdx.x == 0)
        for (int r = i + 1; r < k; r++) out[r] = 0;
      break;
    }
#pragma unroll
    for (int j = 0; j < kPer; j++)
      if (v[j] == best) v[j] = 0;
  }
  return first;
}

__global__ void __launch_bounds__(kThreads)
    select_chunks(const float* __restrict__ logits, int V, int n_chunks, int k, bool want_lse,
                  uint64_t* __restrict__ part_keys, uint64_t* __restrict__ part_best, double* __restrict__ part_sum,
                  int32_t* __restrict__ part_bad) {
  __shared__ uint64_t red[kThreads / 32];
  __shared__ double redd[kThreads / 32];
  const int row = blockIdx.y, c = blockIdx.x;
  const int chunk = (V + n_chunks - 1) / n_chunks;
  const int begin = c * chunk, end = min(V, begin + chunk);
  const float* x = logits + (int64_t)row * V;
  uint64_t v[kPer];
  int bad = 0;
#pragma unroll
  for (int j = 0; j < kPer; j++) {
    const int i = begin + j * kThreads + (int)threadIdx.x;
    const float xi = i < end ? x[i] : 0.0f;
    bad += !isfinite(xi);
    v[j] = i < end ? make_key(xi, i) : 0;
  }
  const double n_bad = block_sum((double)bad, redd);  // exact: at most kChunk
  uint64_t keep[kPer];
  if (want_lse) {
#pragma unroll
    for (int j = 0; j < kPer; j++) keep[j] = v[j];
  }
  const size_t pc = (size_t)row * n_chunks + c;
  const uint64_t best = take_best(v, k, part_keys + pc * k, red);
  if (threadIdx.x == 0) {
    part_best[pc] = best;
    part_bad[pc] = (int32_t)n_bad;
  }
  if (want_lse) {
    const float m = best ? key_logit(best) : -INFINITY;
    double s = 0;
#pragma unroll
    for (int j = 0; j < kPer; j++)
      if (keep[j]) s += exp((double)key_logit(keep[j]) - (double)m);
    s = block_sum(s, redd);
    if (threadIdx.x == 0) part_sum[pc] = s;
  }
}

__global__ void __launch_bounds__(kThreads)
    select_merge(int n_chunks, int k, bool want_lse, const uint64_t* __restrict__ part_keys,
                const uint64_t* __restrict__ part_best, const double* __restrict__ part_sum,
                const int32_t* __restrict__ part_bad, SelectResultDev out) {
  __shared__ uint64_t red[kThreads / 32];
  __shared__ double redd[kThreads / 32];
  __shared__ uint64_t top[kMaxSelect];
  const int row = blockIdx.x;
  // The row's argmax: the best of the chunks' bests.
  uint64_t b = 0;
  int bad = 0;
  for (int c = threadIdx.x; c < n_chunks; c += kThreads) {
    const uint64_t w = part_best[(size_t)row * n_chunks + c];
    b = w > b ? w : b;
    bad += part_bad[(size_t)row * n_chunks + c];
  }
  const uint64_t best = block_max(b, red);
  const double n_bad = block_sum((double)bad, redd);
  const float mx = key_logit(best);
  if (threadIdx.x == 0) {
    out.argmax[row] = key_id(best);
    out.max[row] = mx;
    out.nonfinite[row] = (int32_t)n_bad;
  }
  if (want_lse) {
    double s = 0;
    for (int c = threadIdx.x; c < n_chunks; c += kThreads) {
      const uint64_t cb = part_best[(size_t)row * n_chunks + c];
      if (!cb) continue;
      const float cm = key_logit(cb);
      if (cm == -INFINITY) continue;  // a chunk of -inf only adds nothing
      s += part_sum[(size_t)row * n_chunks + c] * exp((double)cm - (double)mx);
    }
    s = block_sum(s, redd);
    if (threadIdx.x == 0) out.lse[row] = log(s);
  }
  if (k == 0) return;
  const int n = n_chunks * k;
  const uint64_t* pk = part_keys + (size_t)row * n;
  uint64_t v[kPer];
#pragma unroll
  for (int j = 0; j < kPer; j++) {
    const int i = j * kThreads + (int)threadIdx.x;
    v[j] = i < n ? pk[i] : 0;
  }
  take_best(v, k, top, red);
  __syncthreads();
  for (int i = threadIdx.x; i < k; i += kThreads) {
    const uint64_t key = top[i];
    out.top_id[(size_t)row * kMaxSelect + i] = key ? key_id(key) : -1;
    out.top_logit[(size_t)row * kMaxSelect + i] = key ? key_logit(key) : -INFINITY;
  }
}

}  // namespace

bool select_supported(int64_t V) { return V >= 1 && (V + kChunk - 1) / kChunk * kMaxSelect <= kChunk; }

size_t select_scratch_bytes(int B, int64_t V) {
  const int64_t n_chunks = (V + kChunk - 1) / kChunk;
  return (size_t)B * n_chunks * ((kMaxSelect + 2) * 8 + 4);
}

Status select_rows(const float* logits, int B, int64_t V, int k, bool want_lse, void* scratch, size_t scratch_bytes,
                   const SelectResultDev& out, cudaStream_t st) {
  if (!select_supported(V)) return cu_err("cuda: select: a vocabulary of {} is beyond the selection kernels", V);
  if (B < 1 || k < 0 || k > kMaxSelect) return cu_err("cuda: select: B = {}, k = {} (at most {})", B, k, kMaxSelect);
  if (scratch_bytes < select_scratch_bytes(B, V)) return cu_err("cuda: select: scratch too small");
  const int n_chunks = (int)((V + kChunk - 1) / kChunk);
  uint64_t* part_keys = static_cast<uint64_t*>(scratch);
  uint64_t* part_best = part_keys + (size_t)B * n_chunks * kMaxSelect;
  double* part_sum = reinterpret_cast<double*>(part_best + (size_t)B * n_chunks);
  int32_t* part_bad = reinterpret_cast<int32_t*>(part_sum + (size_t)B * n_chunks);
  select_chunks<<<dim3(n_chunks, B), kThreads, 0, st>>>(logits, (int)V, n_chunks, k, want_lse, part_keys, part_best,
                                                        part_sum, part_bad);
  CUDA_TRY_LAUNCH("select_chunks", st);
  select_merge<<<B, kThreads, 0, st>>>(n_chunks, k, want_lse, part_keys, part_best, part_sum, part_bad, out);
  CUDA_TRY_LAUNCH("select_merge", st);
  return {};
}

namespace {

// The results of R rows in one buffer: lse | max | argmax | top_id | top_logit | nonfinite (same layout on the host).
SelectResultDev result_view(void* base, int R) {
  char* p = static_cast<char*>(base);
  SelectResultDev r;
  r.lse = reinterpret_cast<double*>(p);
  r.max = reinterpret_cast<float*>(p + (size_t)R * 8);
  r.argmax = reinterpret_cast<int32_t*>(p + (size_t)R * 12);
  r.top_id = reinterpret_cast<int32_t*>(p + (size_t)R * 16);
  r.top_logit = reinterpret_cast<float*>(p + (size_t)R * (16 + 4 * kMaxSelect));
  r.nonfinite = reinterpret_cast<int32_t*>(p + (size_t)R * (16 + 8 * kMaxSelect));
  return r;
}

size_t result_bytes(int R) { return (size_t)R * (20 + 8 * kMaxSelect); }

}  // namespace

CudaModel::SelectBuffers::~SelectBuffers() {
  if (host) cudaFreeHost(host);
}

Status CudaModel::decode_select(std::span<CudaSeqState* const> seqs, std::span<const int32_t> tokens, int k,
                                bool want_lse, std::span<const int32_t> full_rows, float* full_out,
                                SelectResultDev& sel) {
  if (!full_rows.empty() && !full_out) return cu_err("cuda: decode_select: full rows but no buffer");
  DS_TRY(decode_select_begin(seqs, tokens, k, want_lse, full_rows));
  return decode_select_end(full_out, sel);
}

Status CudaModel::decode_select_begin(std::span<CudaSeqState* const> seqs, std::span<const int32_t> tokens, int k,
                                      bool want_lse, std::span<const int32_t> full_rows) {
  const int64_t V = cfg_.n_vocab;
  if (sel_.pending) return cu_err("cuda: decode_select_begin: a step is already in flight");
  const int B = (int)seqs.size(), R = opt_.max_tokens;
  if (seqs.size() != tokens.size())
    return cu_err("cuda: decode_select: {} sequences but {} tokens", seqs.size(), tokens.size());
  if (k < 0 || k > kMaxSelect) return cu_err("cuda: decode_select: k = {} outside [0, {}]", k, kMaxSelect);
  for (size_t i = 0; i < full_rows.size(); i++)
    if (full_rows[i] < 0 || full_rows[i] >= B || (i > 0 && full_rows[i] <= full_rows[i - 1]))
      return cu_err("cuda: decode_select: full rows must be increasing rows of the batch of {}", B);
  const std::vector<int32_t> ones(seqs.size(), 1);
  DS_TRY(check_step(seqs, tokens, ones));
  CUDA_TRY(cudaSetDevice(opt_.device));
  SelectBuffers& b = sel_;
  if (b.result.empty()) {
    DS_ASSIGN(b.scratch, DeviceBuffer::alloc(select_scratch_bytes(R, V)));
    DS_ASSIGN(b.result, DeviceBuffer::alloc(result_bytes(R)));
    CUDA_TRY(cudaMallocHost(&b.host, result_bytes(R)));
  }
  b.rows = 0;
  Impl& I = *impl_;
  const bool cert = k == 0 && !want_lse && full_rows.empty() && !I.head_l1.empty() && certify_takes(B);
  const AfterStep after = [&](cudaStream_t st) -> Status {
    if (cert)
      DS_TRY(certified_argmax(I.output.type, I.logits.as<float>(), I.y.as<float>(), I.output.w, I.head_l1.as<float>(),
                              B, V, cfg_.n_embd, b.cert_scratch.data(), b.cert_scratch.size(),
                              result_view(b.result.data(), R), st));
    else
      DS_TRY(select_rows(I.logits.as<float>(), B, V, k, want_lse, b.scratch.data(), b.scratch.size(),
                         result_view(b.result.data(), R), st));
    CUDA_TRY(cudaMemcpyAsync(b.host, b.result.data(), result_bytes(R), cudaMemcpyDeviceToHost, st));
    // Full rows: straight into the caller's memory when it is pinned or not, one copy per row (few rows).
    for (size_t j = 0; j < full_rows.size(); j++)
      CUDA_TRY(cudaMemcpyAsync(I.logits_host + j * V, I.logits.as<float>() + (size_t)full_rows[j] * V,
                               (size_t)V * sizeof(float), cudaMemcpyDeviceToHost, st));
    return {};
  };
  DS_TRY(run_step(seqs, tokens, ones, true, nullptr, {}, nullptr, opt_.use_graphs, &after, /*wait=*/false, cert));
  b.pending_hi = cert;
  b.pending = B;
  b.pending_full = (int)full_rows.size();
  return {};
}

Status CudaModel::decode_select_end(float* full_out, SelectResultDev& sel) {
  SelectBuffers& b = sel_;
  if (!b.pending) return cu_err("cuda: decode_select_end: no step in flight");
  const int B = b.pending, n_full = b.pending_full, R = opt_.max_tokens;
  b.pending = b.pending_full = 0;
  if (n_full > 0 && !full_out) return cu_err("cuda: decode_select_end: full rows but no buffer");
  CUDA_TRY(cudaSetDevice(opt_.device));
  CUDA_TRY(cudaStreamSynchronize(impl_->stream));  // the one host synchronisation of a step
  if (n_full > 0) std::memcpy(full_out, impl_->logits_host, (size_t)n_full * cfg_.n_vocab * sizeof(float));
  b.head_hi = b.pending_hi;
  b.rows = B;
  sel = result_view(b.host, R);
  return {};
}

bool CudaModel::certify_takes(int B) const {
  const Impl& I = *impl_;
  const DevMat& o = I.output;
  return I.certify && o.rows == cfg_.n_vocab && o.cols == cfg_.n_embd &&
         certify_supported(o.type, cfg_.n_vocab, cfg_.n_embd) && matvec_batched_hi_supported(o.type, o.rows, o.cols, B);
}

Status CudaModel::exact_row(int row) const {
  if (!sel_.head_hi) return {};
  const Impl& I = *impl_;
  const DevMat& o = I.output;
  const int64_t H = cfg_.n_embd, V = cfg_.n_vocab;
  return matvec(o.type, o.w, o.rows, o.cols, I.y.as<float>() + (size_t)row * H, I.logits.as<float>() + (size_t)row * V,
                I.stream);
}

Status CudaModel::copy_last_row(int row, float* dst) const {
  if (row < 0 || row >= sel_.rows) return cu_err("cuda: copy_last_row: row {} of a step of {}", row, sel_.rows);
  CUDA_TRY(cudaSetDevice(opt_.device));
  DS_TRY(exact_row(row));
  CUDA_TRY(cudaMemcpyAsync(dst, impl_->logits.as<float>() + (size_t)row * cfg_.n_vocab,
                           (size_t)cfg_.n_vocab * sizeof(float), cudaMemcpyDefault, impl_->stream));
  return {};
}

Status CudaModel::last_row(int row, float* out) const {
  if (row < 0 || row >= sel_.rows) return cu_err("cuda: last_row: row {} of a step of {}", row, sel_.rows);
  CUDA_TRY(cudaSetDevice(opt_.device));
  DS_TRY(exact_row(row));
  if (sel_.head_hi) CUDA_TRY(cudaStreamSynchronize(impl_->stream));
  CUDA_TRY(cudaMemcpy(out, impl_->logits.as<float>() + (size_t)row * cfg_.n_vocab, (size_t)cfg_.n_vocab * sizeof(float),
                      cudaMemcpyDeviceToHost));
  return {};
}

}  // namespace ds::cuda
