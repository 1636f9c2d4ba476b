// Gated full-attention kernels of the model (qwen35-spec.md §5).
// qk_norm_rope_store: one block per (head, token) over the nh q heads, nkv k heads and nkv v heads, one thread
//   per head dim: q/k RMSNorm (one block reduction), NEOX RoPE on the first n_rot dims, then q to a packed
//   buffer and k, v to the sequence's caches at row pos[t].
// attention: flash-decoding. attn_partial: one block per (position split, kv head, token), 4 warps taking
//   positions in turn; a lane holds hd/32 dims of every q head of the kv group (G <= 8) and keeps an online
//   softmax per head; the warps merge in shared memory and the block writes (max, sum, weighted V) per head.
//   attn_combine: one block per (q head, token), one thread per dim: merges the splits, applies the sigmoid
//   output gate.
// attn_fused (attn9, DS_ATTN_FUSED; issue 5: batch-1 decode is launch-latency bound, so fewer kernels per
//   layer): attn_partial's grid and position loop with
//   - the combine folded in (level >= 1): every block writes its split's (max, sum, weighted V) as before, then
//     (threadfence + an atomic counter per (kv head, token)) the last block of a (kv head, token) to finish
//     merges the splits in attn_combine's order and applies the gate, and puts the counter back to 0 for the
//     next launch (CUDA graph replays). With one split it divides its own sums (attn_combine's arithmetic
//     reduces to A / L there, the same bits) and writes no partials.
//   - qk_norm_rope_store folded in (level 2): each block normalises and ropes the q heads of its kv group
//     itself (one warp per head); rows of the sequence's positions before this step's first token come from
//     the caches (written by earlier steps), this step's rows (pos[start[s]] .. pos[t]) are computed from the
//     k / v projections by the warp that takes them, and the row pos[t] is also stored to the caches by it (so
//     the block whose position range holds pos[t] writes it). No block reads a row that another block of the
//     same launch writes, so no grid-wide ordering is needed. Norm and RoPE in qk_kernel's arithmetic order.
// ring (attn13, DS_ATTN_RING; default from 32 tokens per step): attn_partial's / attn_fused's position loop with
//   the cached rows copied by cp.async into a per-warp ring of 2 or 4 rows in shared memory (ring_rows): kR rows in
//   flight per warp at ~120 registers instead of one memory round trip per row; same rows, same order, same bits.
// attn16: fewer instructions per row (the kernels are issue-bound at B = 64): scores in log2 units with ex2.approx,
//   the group's dot products by one multi-value butterfly, one exponential per head and row (the rescale only when
//   a max moves), the merges' weights once per block / per (q head, token). Every kernel shares attend_row and the
//   merges, so a sequence's bits do not depend on the loader or the batch.
// attn17 (DS_ATTN_SKIP_EMPTY, on by default; =0 turns it off): the blocks of splits without rows write only (M, L) and the
//   combine skips the A of weight-0 splits (the same bits).
// attn18 (DS_ATTN_EVICT, on by default; =0 turns it off): the ring kernel's cached rows with L2 evict_first (the same bits).
// kv19 (AttnArgs / QkArgs kv_half; the model's --kv-f16): the caches hold f16 rows (half the bytes the decode attention
//   reads); every kernel is built for both (KV = float / __half), converts on load and rounds on store; rows that
//   attn_fused_kernel's QK path computes are rounded as stored, so every path reads the same values.
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "cuda/cuda_util.h"
#include "cuda/model/device_util.cuh"

namespace ds::cuda::mk {
namespace {

constexpr int kAttnWarps = 4;

// attn16: scores in log2 units (q pre-multiplied by scale * log2(e) in each kernel's prologue), so every
// exponential of the online softmax and of the merges is one ex2.approx; the split maxima M in the partials are
// log2 units too.
constexpr float kLog2e = 1.4426950408889634f;
static_assert(kMaxAttnSplits <= 32, "split_weights: one split per lane");

// 2^x by the SFU (PTX ex2.approx.ftz: ~2^-22 relative error; 2^-inf = 0).
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// The warp sums of kG values (v[j] = this lane's part of value j), all of them in every lane (s). A multi-value
// butterfly: each exchange sends half of the values a lane still holds and keeps the other half (lanes with
// the offset's bit set keep the upper half), so log2(kG) exchanges leave one value per lane (value
// lane / (32 / kG)), reduced over the lanes that differ in those bits; single exchanges finish the sum over
// the rest; one broadcast per value. kG = 4: 10 shuffles and 6 adds instead of 20 and 20.
template <int kG>
__device__ __forceinline__ void warp_sums(float (&v)[kG], int lane, float (&s)[kG]) {
  static_assert((kG & (kG - 1)) == 0 && kG <= 32, "kG: a power of two");
#pragma unroll
  for (int n = kG, o = 16; n > 1; n /= 2, o /= 2) {
    const bool up = lane & o;
#pragma unroll
    for (int j = 0; j < n / 2; j++) {
      const float keep = up ? v[j + n / 2] : v[j];
      const float send = up ? v[j] : v[j + n / 2];
      v[j] = keep + __shfl_xor_sync(0xffffffffu, send, o);
    }
  }
#pragma unroll
  for (int o = 16 / kG; o > 0; o >>= 1) v[0] += __shfl_xor_sync(0xffffffffu, v[0], o);
#pragma unroll
  for (int j = 0; j < kG; j++) s[j] = __shfl_sync(0xffffffffu, v[0], j * (32 / kG));
}

// One key row's step of the online softmax for the G q heads of a kv group (lane holds dims lane + 32 i):
// score, running max, sum and weighted V, in the CPU reference's per-position order (qv pre-scaled: scores and
// mx in log2 units). attn16: the kG dot products reduced together (warp_sums); one exponential per head and
// row while no score raises its running max (a warp-uniform branch: every lane has the same scores): only
// p = 2^(s - m); else first the state is rescaled by 2^(m_old - m_new).
template <int HPL, int kG>
__device__ __forceinline__ void attend_row(const float (&qv)[kG][HPL], const float (&kx)[HPL], const float (&vx)[HPL],
                                           int G, int lane, float (&mx)[kG], float (&l)[kG],
                                           float (&acc)[kG][HPL]) {
  float dot[kG], sc[kG];
#pragma unroll
  for (int gi = 0; gi < kG; gi++) {  // heads gi >= G have q = 0: summed, not used
    dot[gi] = 0.f;
#pragma unroll
    for (int i = 0; i < HPL; i++) dot[gi] += qv[gi][i] * kx[i];
  }
  warp_sums<kG>(dot, lane, sc);
  bool moved = false;
#pragma unroll
  for (int gi = 0; gi < kG; gi++) moved |= gi < G && sc[gi] > mx[gi];
  // Uniform over the warp (every lane has the same scores); rare once the maxima have settled. One branch for
  // the group (a block the compiler keeps as a branch, not predicated): heads whose max did not move get
  // corr = 2^0 = 1 exactly.
  if (moved) {
#pragma unroll
    for (int gi = 0; gi < kG; gi++) {
      if (gi >= G) continue;
      const float mn = fmaxf(mx[gi], sc[gi]);
      const float corr = ex2(mx[gi] - mn);  // 0 while mx is -inf
      l[gi] *= corr;
#pragma unroll
      for (int i = 0; i < HPL; i++) acc[gi][i] *= corr;
      mx[gi] = mn;
    }
  }
#pragma unroll
  for (int gi = 0; gi < kG; gi++) {
    if (gi >= G) continue;  // uniform over the warp
    const float pe = ex2(sc[gi] - mx[gi]);
    l[gi] += pe;
#pragma unroll
    for (int i = 0; i < HPL; i++) acc[gi][i] = fmaf(pe, vx[i], acc[gi][i]);
  }
}

// A cached key / value row of kv head g at position p (lane's dims lane + 32 i); KV: the caches' element (float, or
// __half for kv19's f16 caches).
template <int HPL, class KV>
__device__ __forceinline__ void load_kv_row(const KV* Kc, const KV* Vc, int p, int nkv, int g, int lane,
                                            float (&kx)[HPL], float (&vx)[HPL]) {
  const KV* kr = Kc + ((int64_t)p * nkv + g) * (32 * HPL);
  const KV* vr = Vc + ((int64_t)p * nkv + g) * (32 * HPL);
#pragma unroll
  for (int i = 0; i < HPL; i++) {
    kx[i] = kv_ld(kr + lane + 32 * i);
    vx[i] = kv_ld(vr + lane + 32 * i);
  }
}

// cp.async of 16 / 4 bytes into shared memory (attn13's ring); one commit group per call of ring_issue.
__device__ __forceinline__ void attn_cp16(void* dst, const void* src) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
}
// attn18 (DS_ATTN_EVICT, on by default): the cached rows are read once per step, so with L2 evict_first they leave the L2 to
// the partials the combine reads back (18 MB at B = 64 x 512+; ncu: 25% L2 hits in the combine without it).
__device__ __forceinline__ void attn_cp16_ef(void* dst, const void* src, uint64_t pol) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "l"(pol) : "memory");
}
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t pol;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  return pol;
}
__device__ __forceinline__ void attn_cp4(void* dst, const void* src) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(d), "l"(src) : "memory");
}
template <int N>
__device__ __forceinline__ void attn_cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Row p (K then V) of kv head g into the slot [K row | V row] (HD elements of KV each) by the warp's lanes; one
// commit group per call, empty when p >= k1 (so the group count per warp is the same for every row index). al16:
// every row is 16-byte aligned (the caches' bases are), else 4-byte copies. kEF: the 16-byte copies with the L2
// policy pol.
template <int HPL, bool kEF = false, class KV>
__device__ __forceinline__ void ring_issue(const KV* Kc, const KV* Vc, int p, int k1, int nkv, int g,
                                           int lane, bool al16, float* slot, uint64_t pol = 0) {
  constexpr int HD = 32 * HPL, kRow = HD * (int)sizeof(KV);  // bytes of a row
  if (p < k1) {
    const char* kr = reinterpret_cast<const char*>(Kc + ((int64_t)p * nkv + g) * HD);
    const char* vr = reinterpret_cast<const char*>(Vc + ((int64_t)p * nkv + g) * HD);
    char* sl = reinterpret_cast<char*>(slot);
    if (al16) {
#pragma unroll
      for (int c = lane; c < 2 * kRow / 16; c += 32) {  // 16-byte chunks: K's, then V's
        const char* src = c < kRow / 16 ? kr + 16 * c : vr + 16 * c - kRow;
        if constexpr (kEF) attn_cp16_ef(sl + 16 * c, src, pol);
        else attn_cp16(sl + 16 * c, src);
      }
    } else {
#pragma unroll
      for (int i = lane; i < kRow / 4; i += 32) {
        attn_cp4(sl + 4 * i, kr + 4 * i);
        attn_cp4(sl + kRow + 4 * i, vr + 4 * i);
      }
    }
  }
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// A ring slot [K row | V row] of KV elements, in floats (s33: sized by the element; f16 caches use half the shared
// memory per row in flight).
template <int HPL, class KV>
constexpr int ring_slot_floats() {
  return 2 * 32 * HPL * (int)sizeof(KV) / 4;
}

// attn13: the warp's rows k0 + warp, + kAttnWarps, ... < k1 through a ring of kS slots in shared memory
// (`ring`: this warp's kS slots of ring_slot_floats) filled by cp.async, kS rows in flight per warp; attend_row on each in
// order, so the same arithmetic in the same order as the register loops (the same bits). The registers hold
// one row (read from the slot), not the rows in flight: with loads into registers a warp waited a memory round
// trip per row (the rotation of prefetched registers waits for the newest load).
template <int HPL, int kG, int kS, bool kEF = false, class KV>
__device__ __forceinline__ void ring_rows(const KV* Kc, const KV* Vc, int k0, int k1, int nkv, int g,
                                          int warp, int lane, float* ring, const float (&qv)[kG][HPL], int G,
                                          float (&mx)[kG], float (&l)[kG], float (&acc)[kG][HPL]) {
  constexpr int HD = 32 * HPL, kW = kAttnWarps, kSlot = ring_slot_floats<HPL, KV>();
  const bool al16 = (((uintptr_t)Kc | (uintptr_t)Vc) & 15) == 0;  // rows are HD * 4 bytes: all alike
  const uint64_t pol = kEF ? evict_first_policy() : 0;
  const int p0 = k0 + warp;
  const int n_rows = p0 < k1 ? (k1 - p0 + kW - 1) / kW : 0;
#pragma unroll
  for (int j = 0; j < kS; j++)
    ring_issue<HPL, kEF>(Kc, Vc, p0 + j * kW, k1, nkv, g, lane, al16, ring + j * kSlot, pol);
  for (int j = 0; j < n_rows; j++) {
    attn_cp_wait<kS - 1>();  // this lane's copies of row j (group j of j + kS) have landed
    __syncwarp();            // ... and every lane's
    const KV* slot = reinterpret_cast<const KV*>(ring + (j % kS) * kSlot);  // [K row | V row] of KV
    float kx[HPL], vx[HPL];
#pragma unroll
    for (int i = 0; i < HPL; i++) {
      kx[i] = kv_ld(slot + lane + 32 * i);
      vx[i] = kv_ld(slot + HD + lane + 32 * i);
    }
    __syncwarp();  // every lane has read the slot: refill it with row j + kS
    ring_issue<HPL, kEF>(Kc, Vc, p0 + (j + kS) * kW, k1, nkv, g, lane, al16, ring + (j % kS) * kSlot, pol);
    attend_row<HPL, kG>(qv, kx, vx, G, lane, mx, l, acc);
  }
  attn_cp_wait<0>();  // only empty groups remain; none in flight when the block exits
}

// The warps' online-softmax states (max, sum, weighted V per q head) into the block's shared arrays, then
// __syncthreads. Reached by every thread of the block.
template <int HPL, int kG>
__device__ __forceinline__ void stash_warps(int G, int warp, int lane, const float (&mx)[kG], const float (&l)[kG],
                                            const float (&acc)[kG][HPL], float (&sm_m)[kAttnWarps][kG],
                                            float (&sm_l)[kAttnWarps][kG],
                                            float (&sm_acc)[kAttnWarps][kG][32 * HPL]) {
#pragma unroll
  for (int gi = 0; gi < kG; gi++) {
    if (gi >= G) continue;
    if (lane == 0) {
      sm_m[warp][gi] = mx[gi];
      sm_l[warp][gi] = l[gi];
    }
#pragma unroll
    for (int i = 0; i < HPL; i++) sm_acc[warp][gi][lane + 32 * i] = acc[gi][i];
  }
  __syncthreads();
}

// The block's merge of the stashed warp states, per q head: M = the max of the warps' maxima, the weights and L
// once per (block, q head) (attn16; they were computed per (head, dim) item): thread gi < G writes sm_w[w][gi] =
// 2^(m_w - M) (0 for a warp without rows; all 0 for an empty split), sm_w[kW][gi] = M and sm_w[kW + 1][gi] = L
// (warp order), then __syncthreads (reached by every thread of the block).
template <int kG>
__device__ __forceinline__ void warp_weights(int G, const float (&sm_m)[kAttnWarps][kG],
                                             const float (&sm_l)[kAttnWarps][kG],
                                             float (&sm_w)[kAttnWarps + 2][kG]) {
  const int gi = threadIdx.x;
  if (gi < G) {
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < kAttnWarps; w++) M = fmaxf(M, sm_m[w][gi]);
    float L = 0.f;
#pragma unroll
    for (int w = 0; w < kAttnWarps; w++) {
      const float e = M == -INFINITY ? 0.f : ex2(sm_m[w][gi] - M);
      sm_w[w][gi] = e;
      L += sm_l[w][gi] * e;
    }
    sm_w[kAttnWarps][gi] = M;
    sm_w[kAttnWarps + 1][gi] = L;
  }
  __syncthreads();
}

// The weighted V of q head gi at dim d over the stashed warp states (warp_weights' weights, warp order).
template <int HPL, int kG>
__device__ __forceinline__ float merged_acc(int gi, int d, const float (&sm_acc)[kAttnWarps][kG][32 * HPL],
                                            const float (&sm_w)[kAttnWarps + 2][kG]) {
  float A = 0.f;
#pragma unroll
  for (int w = 0; w < kAttnWarps; w++) A += sm_acc[w][gi][d] * sm_w[w][gi];
  return A;
}

// Split sp's merged (A[HD], M, L) per q head from the stashed warp states to base + (gi * ns + sp) * (HD + 2)
// (attn_combine's layout: base = the partials of token t's heads g * G .. in a.part); an empty split writes
// (0, -inf, 0). warp_weights' __syncthreads is reached by every thread.
template <int HPL, int kG>
__device__ __forceinline__ void write_merged(float* base, int ns, int sp, int G, const float (&sm_m)[kAttnWarps][kG],
                                             const float (&sm_l)[kAttnWarps][kG],
                                             const float (&sm_acc)[kAttnWarps][kG][32 * HPL],
                                             float (&sm_w)[kAttnWarps + 2][kG]) {
  constexpr int HD = 32 * HPL;
  warp_weights<kG>(G, sm_m, sm_l, sm_w);
  for (int idx = threadIdx.x; idx < G * HD; idx += blockDim.x) {
    const int gi = idx / HD, d = idx % HD;
    const float A = merged_acc<HPL, kG>(gi, d, sm_acc, sm_w);
    const float M = sm_w[kAttnWarps][gi], L = sm_w[kAttnWarps + 1][gi];
    float* out = base + ((int64_t)gi * ns + sp) * (HD + 2);
    out[d] = A;
    if (d == 0) {
      out[HD] = M;
      out[HD + 1] = L;
    }
  }
}

// stash_warps + write_merged: the block's split written (attn_partial_kernel, attn_ring_kernel; attn_fused_kernel
// calls the two parts itself, its one-split path between them).
template <int HPL, int kG>
__device__ __forceinline__ void write_split(float* base, int ns, int sp, int G, int warp, int lane,
                                            const float (&mx)[kG], const float (&l)[kG],
                                            const float (&acc)[kG][HPL], float (&sm_m)[kAttnWarps][kG],
                                            float (&sm_l)[kAttnWarps][kG],
                                            float (&sm_acc)[kAttnWarps][kG][32 * HPL],
                                            float (&sm_w)[kAttnWarps + 2][kG]) {
  stash_warps<HPL, kG>(G, warp, lane, mx, l, acc, sm_m, sm_l, sm_acc);
  write_merged<HPL, kG>(base, ns, sp, G, sm_m, sm_l, sm_acc, sm_w);
}

// Token t's partials of kv group g in a.part ([T][nh][n_splits][HD + 2]).
__device__ __forceinline__ float* part_base(const AttnArgs& a, int t, int g) {
  const int G = a.n_head / a.n_head_kv;
  return a.part + ((int64_t)t * a.n_head + (int64_t)g * G) * a.n_splits * (a.head_dim + 2);
}

// attn_combine's weights of one q head's ns <= 32 splits (ph: split sp's (A[HD], M, L) at ph + sp * (HD + 2)) by
// one warp (attn16; every thread computed them for itself before): M = the max of the split maxima, e[sp] =
// 2^(m - M) (0 for an empty split: its A and l are 0), L = the warp sum of l e; every lane returns L, lanes < ns
// write e[lane]. Then O = the sum over sp in order of A e, the output O / L (attn_combine_kernel, and
// attn_fused_kernel's last block).
__device__ __forceinline__ float split_weights(const float* ph, int ns, int HD, int lane, float* e) {
  const float m = lane < ns ? __ldcg(ph + lane * (HD + 2) + HD) : -INFINITY;
  const float l = lane < ns ? __ldcg(ph + lane * (HD + 2) + HD + 1) : 0.f;
  const float M = warp_max(m);
  const float w = m == -INFINITY ? 0.f : ex2(m - M);
  if (lane < ns) e[lane] = w;
  return warp_sum(l * w);
}

// The pre-gate output O of (token t, q head h, dim d) to a.dbg_core (if set) and O * sigmoid(gate) to a.out.
__device__ __forceinline__ void store_gated(const AttnArgs& a, int t, int h, int d, float O) {
  const int HD = a.head_dim;
  const int64_t oi = (int64_t)t * a.n_head * HD + (int64_t)h * HD + d;
  if (a.dbg_core) a.dbg_core[oi] = O;
  a.out[oi] = O * sigmoid_f(a.gate[(int64_t)t * a.ld_gate + (int64_t)h * 2 * HD + d]);
}

// A split's positions k0 .. k1 - 1 of token t's sequence (the context cut into n_splits equal chunks) and its
// caches (of KV elements).
template <class KV>
struct SplitRange {
  int k0, k1;
  const KV* Kc;
  const KV* Vc;
};
template <class KV>
__device__ __forceinline__ SplitRange<KV> split_range(const AttnArgs& a, const StepIO* __restrict__ io, int sp, int t) {
  const int s = io->seq[t], n_keys = io->pos[t] + 1;
  const int chunk = (n_keys + a.n_splits - 1) / a.n_splits;
  const int k0 = sp * chunk;
  return {k0, min(k0 + chunk, n_keys), reinterpret_cast<const KV*>(state_ptr(io, s, a.k_off)),
          reinterpret_cast<const KV*>(state_ptr(io, s, a.v_off))};
}

// qv = the kv group g's q heads (heads gi >= G zero), the running max / sum / accumulators reset. The prologue
// of attn_partial_kernel and attn_ring_kernel (the same loads, so the same bits).
template <int HPL, int kG>
__device__ __forceinline__ void split_begin(const AttnArgs& a, int g, int t, int lane, float (&qv)[kG][HPL],
                                            float (&acc)[kG][HPL], float (&mx)[kG], float (&l)[kG]) {
  constexpr int HD = 32 * HPL;
  const int nh = a.n_head, G = nh / a.n_head_kv;
  const float qs = a.scale * kLog2e;  // attn16: the scores in log2 units
#pragma unroll
  for (int gi = 0; gi < kG; gi++) {
    mx[gi] = -INFINITY;
    l[gi] = 0.f;
#pragma unroll
    for (int i = 0; i < HPL; i++) {
      qv[gi][i] = gi < G ? a.q[((int64_t)t * nh + g * G + gi) * HD + lane + 32 * i] * qs : 0.f;
      acc[gi][i] = 0.f;
    }
  }
}

// attn17 (DS_ATTN_SKIP_EMPTY, default on since session 14's coordinator: tg128 +0.5%, B 64 short a little faster,
// 64 x 512+ unchanged; =0 the old path): a split without rows (short contexts: a token with fewer than
// ~16 x n_splits keys has empty splits) writes only its (M, L) = (-inf, 0) per q head, without the q loads, the
// warps' merge or its A; attn_combine_kernel loads no A of a split whose weight is 0 (an empty split's is; A * 0
// added to the sum is +0 either way, so the same bits). Block-uniform: every thread returns after it.
__device__ __forceinline__ void write_empty(float* base, int ns, int sp, int G, int HD) {
  for (int gi = threadIdx.x; gi < G; gi += blockDim.x) {
    float* out = base + ((int64_t)gi * ns + sp) * (HD + 2);
    out[HD] = -INFINITY;
    out[HD + 1] = 0.f;
  }
}

#include "cuda/model/attn_mma.cuh"

// attn_partial_kernel's grid, position split and output with the rows through ring_rows (attn13,
// DS_ATTN_RING = kS). The ring is dynamic shared memory: kAttnWarps * kS slots (ring_smem_floats).
// attn16: the warp states are stashed into the ring's memory once every warp is done with it (16 KB less per
// block at the 9B's shape: shared memory no longer limits the blocks per SM; registers do, 4 at ~122: 5 blocks
// at <= 96 registers with __launch_bounds__ measured slower, 88.5 vs 85.0 us per op at B = 64 x 528).
template <int HPL, int kG, int kS, class KV>
constexpr int ring_smem_floats() {
  return kAttnWarps * std::max(kS * ring_slot_floats<HPL, KV>(), kG * 32 * HPL);
}
// kEF: the cached rows with L2 evict_first (attn18, DS_ATTN_EVICT, the default; a template so the form without it
// stays as it was for the A/B).
template <int HPL, int kG, int kS, bool kEF, class KV>
__global__ void __launch_bounds__(32 * kAttnWarps) attn_ring_kernel(const AttnArgs a, const StepIO* __restrict__ io,
                                                        bool skip_empty) {
  constexpr int HD = 32 * HPL;
  extern __shared__ __align__(16) float attn_ring_smem[];
  __shared__ float sm_m[kAttnWarps][kG], sm_l[kAttnWarps][kG];
  __shared__ float sm_w[kAttnWarps + 2][kG];
  auto& sm_acc = *reinterpret_cast<float (*)[kAttnWarps][kG][HD]>(attn_ring_smem);
  const int sp = blockIdx.x, g = blockIdx.y, t = blockIdx.z;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int nkv = a.n_head_kv, G = a.n_head / nkv;
  pdl_wait();
  pdl_trigger();
  const SplitRange<KV> r = split_range<KV>(a, io, sp, t);
  const int k0 = r.k0, k1 = r.k1;
  if (skip_empty && k0 >= k1) return write_empty(part_base(a, t, g), a.n_splits, sp, G, HD);
  float qv[kG][HPL], acc[kG][HPL], mx[kG], l[kG];
  split_begin<HPL, kG>(a, g, t, lane, qv, acc, mx, l);
  const KV *Kc = r.Kc, *Vc = r.Vc;
  ring_rows<HPL, kG, kS, kEF>(Kc, Vc, k0, k1, nkv, g, warp, lane,
                              attn_ring_smem + warp * kS * ring_slot_floats<HPL, KV>(), qv, G, mx, l, acc);
  __syncthreads();  // every warp is done with its ring: the stash may overwrite it
  write_split<HPL, kG>(part_base(a, t, g), a.n_splits, sp, G, warp, lane, mx, l, acc, sm_m, sm_l, sm_acc, sm_w);
}

template <class KV>
__global__ void __launch_bounds__(1024) qk_kernel(const QkArgs a, const StepIO* __restrict__ io) {
  extern __shared__ float xs[];  // head_dim floats
  __shared__ float red[32];
  const int t = blockIdx.y, hb = blockIdx.x, d = threadIdx.x;
  const int hd = a.head_dim, nh = a.n_head, nkv = a.n_head_kv;
  pdl_wait();
  pdl_trigger();
  const int s = io->seq[t], p = io->pos[t];
  if (hb >= nh + nkv) {  // a v head: store only (uniform over the block)
    const int g = hb - nh - nkv;
    KV* vc = reinterpret_cast<KV*>(state_ptr(io, s, a.v_off));
    kv_st(vc + ((int64_t)p * nkv + g) * hd + d, a.v[(int64_t)t * a.ldv + (int64_t)g * hd + d]);
    return;
  }
  const bool is_q = hb < nh;
  const int h = is_q ? hb : hb - nh;
  const float x = is_q ? a.q[(int64_t)t * a.ldq + (int64_t)h * 2 * hd + d] : a.k[(int64_t)t * a.ldk + (int64_t)h * hd + d];
  const float ss = block_sum(x * x, red);
  const float scale = 1.0f / sqrtf(ss / (float)hd + a.eps);
  const float y = x * scale * (is_q ? a.q_norm[d] : a.k_norm[d]);
  if (is_q && a.dbg_qn) a.dbg_qn[((int64_t)t * nh + h) * hd + d] = y;
  if (!is_q && a.dbg_kn) a.dbg_kn[((int64_t)t * nkv + h) * hd + d] = y;
  xs[d] = y;
  __syncthreads();
  const int half = a.n_rot / 2;
  float r = y;
  if (d < half) {
    const float th = (float)p * a.inv_freq[d];
    r = xs[d] * cosf(th) - xs[d + half] * sinf(th);
  } else if (d < a.n_rot) {
    const int i = d - half;
    const float th = (float)p * a.inv_freq[i];
    r = xs[i] * sinf(th) + xs[d] * cosf(th);
  }
  if (is_q) {
    a.q_out[((int64_t)t * nh + h) * hd + d] = r;
  } else {
    KV* kc = reinterpret_cast<KV*>(state_ptr(io, s, a.k_off));
    kv_st(kc + ((int64_t)p * nkv + h) * hd + d, r);
    if (a.dbg_kr) a.dbg_kr[((int64_t)t * nkv + h) * hd + d] = r;
  }
}

// HPL: head dims per lane (hd = 32 * HPL); kG: q heads per kv head the registers and shared arrays hold (>= G;
// the heads gi >= G are skipped, so any kG >= G gives the same bits); kPF: rows a warp loads ahead (1 or 2; the
// same rows in the same order either way, so the same bits).
template <int HPL, int kG, int kPF, class KV>
__global__ void __launch_bounds__(32 * kAttnWarps) attn_partial_kernel(const AttnArgs a, const StepIO* __restrict__ io,
                                                        bool skip_empty) {
  constexpr int HD = 32 * HPL;
  __shared__ float sm_m[kAttnWarps][kG], sm_l[kAttnWarps][kG];
  __shared__ float sm_w[kAttnWarps + 2][kG];
  __shared__ float sm_acc[kAttnWarps][kG][HD];
  const int sp = blockIdx.x, g = blockIdx.y, t = blockIdx.z;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int nkv = a.n_head_kv, G = a.n_head / nkv;
  pdl_wait();
  pdl_trigger();
  const SplitRange<KV> r = split_range<KV>(a, io, sp, t);
  const int k0 = r.k0, k1 = r.k1;
  if (skip_empty && k0 >= k1) return write_empty(part_base(a, t, g), a.n_splits, sp, G, HD);
  float qv[kG][HPL], acc[kG][HPL], mx[kG], l[kG];
  split_begin<HPL, kG>(a, g, t, lane, qv, acc, mx, l);
  const KV *Kc = r.Kc, *Vc = r.Vc;
  // The warp's positions k0 + warp, + kAttnWarps, ...: the next row is loaded while this one is used (the
  // loop was one dependent cache round trip per position).
  // kPF = 2 keeps two rows in flight per warp (the long contexts of a serving batch: with one, a warp waits a
  // full memory round trip per row).
  float kx[HPL], vx[HPL], k2[HPL], v2[HPL];
  if (k0 + warp < k1) load_kv_row<HPL>(Kc, Vc, k0 + warp, nkv, g, lane, kx, vx);
  if (kPF == 2 && k0 + warp + kAttnWarps < k1) load_kv_row<HPL>(Kc, Vc, k0 + warp + kAttnWarps, nkv, g, lane, k2, v2);
  for (int p = k0 + warp; p < k1; p += kAttnWarps) {
    float kn[HPL], vn[HPL];
    if (p + kPF * kAttnWarps < k1) load_kv_row<HPL>(Kc, Vc, p + kPF * kAttnWarps, nkv, g, lane, kn, vn);
    attend_row<HPL, kG>(qv, kx, vx, G, lane, mx, l, acc);
#pragma unroll
    for (int i = 0; i < HPL; i++) {
      if (kPF == 2) {
        kx[i] = k2[i];
        vx[i] = v2[i];
        k2[i] = kn[i];
        v2[i] = vn[i];
      } else {
        kx[i] = kn[i];
        vx[i] = vn[i];
      }
    }
  }
  write_split<HPL, kG>(part_base(a, t, g), a.n_splits, sp, G, warp, lane, mx, l, acc, sm_m, sm_l, sm_acc, sm_w);
}

// The split weights once per block (split_weights by warp 0; attn16), then each thread's sum over the splits
// (loads independent of each other instead of a chain through M and the weights: 13.7 -> 8.4 us per layer).
__global__ void __launch_bounds__(1024) attn_combine_kernel(const AttnArgs a) {
  __shared__ float sm_e[kMaxAttnSplits], sm_L;
  const int h = blockIdx.x, t = blockIdx.y, d = threadIdx.x;
  const int HD = a.head_dim, ns = a.n_splits;
  pdl_wait();
  pdl_trigger();
  const float* ph = a.part + ((int64_t)t * a.n_head + h) * ns * (HD + 2);
  if (d < 32) {  // head_dim >= 32: warp 0 is whole
    const float L = split_weights(ph, ns, HD, d, sm_e);
    if (d == 0) sm_L = L;
  }
  __syncthreads();
  float v[kMaxAttnSplits];
#pragma unroll
  for (int sp = 0; sp < kMaxAttnSplits; sp++)  // attn17: no A of a split of weight 0 (write_empty)
    v[sp] = sp < ns && sm_e[sp] != 0.f ? __ldcg(ph + sp * (HD + 2) + d) : 0.f;
  float O = 0.f;
#pragma unroll
  for (int sp = 0; sp < kMaxAttnSplits; sp++)
    if (sp < ns) O += v[sp] * sm_e[sp];
  store_gated(a, t, h, d, O / sm_L);
}

// RMSNorm of one head row x (hd = 32 * HPL, lane holds dims lane + 32 i) by one warp, with qk_kernel's
// arithmetic: the sum of squares as block_sum adds it (dims 32 i .. 32 i + 31 by a warp sum, in turn).
template <int HPL>
__device__ __forceinline__ void warp_rms_row(const float* __restrict__ x, const float* __restrict__ w, float eps,
                                             int lane, float (&y)[HPL]) {
  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < HPL; i++) {
    y[i] = x[lane + 32 * i];
    ss += warp_sum(y[i] * y[i]);
  }
  const float scale = 1.0f / sqrtf(ss / (float)(32 * HPL) + eps);
#pragma unroll
  for (int i = 0; i < HPL; i++) y[i] = y[i] * scale * w[lane + 32 * i];
}

// NEOX RoPE of the warp's row y at position p, in place, through the warp's shared row `row` (the pairs
// (j, j + half) sit in other lanes unless half is a multiple of 32). cs / sn: the table at the block's
// position pt (used when p == pt), else cos / sin computed as the table is. Warp-uniform call.
template <int HPL>
__device__ __forceinline__ void warp_rope_row(float (&y)[HPL], float* row, int lane, int p, int pt, int n_rot,
                                              const float* __restrict__ inv_freq, const float* cs,
                                              const float* sn) {
  const int half = n_rot / 2;
  __syncwarp();  // the warp's earlier reads of row are done
#pragma unroll
  for (int i = 0; i < HPL; i++) row[lane + 32 * i] = y[i];
  __syncwarp();
#pragma unroll
  for (int i = 0; i < HPL; i++) {
    const int d = lane + 32 * i;
    if (d >= n_rot) continue;
    const int j = d < half ? d : d - half;
    float c, s;
    if (p == pt) {
      c = cs[j];
      s = sn[j];
    } else {
      const float th = (float)p * inv_freq[j];
      c = cosf(th);
      s = sinf(th);
    }
    if (d < half) y[i] = row[d] * c - row[d + half] * s;
    else y[i] = row[j] * s + row[d] * c;
  }
}

// See the file comment. QK: level 2 (q from the projection, this step's k / v rows computed and stored);
// else q from a.q and every row from the caches (qk_kernel ran before).
// kR > 0 (attn13, level 1 only): the rows through ring_rows (a ring of kR rows per warp in dynamic shared memory).
template <int HPL, bool QK, int kG, int kR, class KV>
__global__ void __launch_bounds__(32 * kAttnWarps)
    attn_fused_kernel(const QkArgs qa, const AttnArgs a, const StepIO* __restrict__ io) {
  static_assert(kR == 0 || !QK, "the ring reads every row from the caches");
  constexpr int HD = 32 * HPL, kW = kAttnWarps, kS = kMaxAttnSplits;
  __shared__ float sm_m[kW][kG], sm_l[kW][kG], sm_w[kW + 2][kG];
  __shared__ float sm_acc[kW][kG][HD];  // QK: sm_acc[0] holds the roped q heads before the position loop
  __shared__ float sm_row[QK ? kW : 1][HD];            // QK: a warp's row for the RoPE pairs
  __shared__ float sm_cos[QK ? HD / 2 : 1], sm_sin[QK ? HD / 2 : 1];  // QK: RoPE at pos[t]
  __shared__ float sm_e[kG][kS], sm_L[kG];                           // the merge's split weights
  __shared__ bool sm_last;
  const int sp = blockIdx.x, g = blockIdx.y, t = blockIdx.z;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int nh = a.n_head, nkv = a.n_head_kv, G = nh / nkv, ns = a.n_splits;
  // StepIO and inv_freq are not written by the step's kernels: read before pdl_wait.
  const int s = io->seq[t], pt = io->pos[t], n_keys = pt + 1;
  if (QK) {
    for (int j = threadIdx.x; j < qa.n_rot / 2; j += blockDim.x) {
      const float th = (float)pt * qa.inv_freq[j];
      sm_cos[j] = cosf(th);
      sm_sin[j] = sinf(th);
    }
  }
  // QK: this step's rows of sequence s are positions p_step .. pt (tokens t_first .., consecutive positions).
  const int t_first = QK ? io->start[s] : 0;
  const int p_step = QK ? io->pos[t_first] : n_keys;
  pdl_wait();
  pdl_trigger();
  const int chunk = (n_keys + ns - 1) / ns;
  const int k0 = sp * chunk, k1 = min(k0 + chunk, n_keys);
  KV* Kc = reinterpret_cast<KV*>(state_ptr(io, s, a.k_off));
  KV* Vc = reinterpret_cast<KV*>(state_ptr(io, s, a.v_off));

  const float qs = a.scale * kLog2e;  // attn16: the scores in log2 units
  float qv[kG][HPL], acc[kG][HPL], mx[kG], l[kG];
#pragma unroll
  for (int gi = 0; gi < kG; gi++) {
    mx[gi] = -INFINITY;
    l[gi] = 0.f;
#pragma unroll
    for (int i = 0; i < HPL; i++) {
      qv[gi][i] = (!QK && gi < G) ? a.q[((int64_t)t * nh + g * G + gi) * HD + lane + 32 * i] * qs : 0.f;
      acc[gi][i] = 0.f;
    }
  }
  if (QK && k0 < k1) {  // uniform over the block; an empty split needs no q (split 0 is never empty)
    __syncthreads();    // sm_cos / sm_sin
    for (int gi = warp; gi < G; gi += kW) {
      const int h = g * G + gi;
      float y[HPL];
      warp_rms_row<HPL>(qa.q + (int64_t)t * qa.ldq + (int64_t)h * 2 * HD, qa.q_norm, qa.eps, lane, y);
      if (qa.dbg_qn && sp == 0) {
#pragma unroll
        for (int i = 0; i < HPL; i++) qa.dbg_qn[((int64_t)t * nh + h) * HD + lane + 32 * i] = y[i];
      }
      warp_rope_row<HPL>(y, sm_row[warp], lane, pt, pt, qa.n_rot, qa.inv_freq, sm_cos, sm_sin);
#pragma unroll
      for (int i = 0; i < HPL; i++) {
        sm_acc[0][gi][lane + 32 * i] = y[i];
        if (qa.q_out && sp == 0) qa.q_out[((int64_t)t * nh + h) * HD + lane + 32 * i] = y[i];
      }
    }
    __syncthreads();
#pragma unroll
    for (int gi = 0; gi < kG; gi++) {
      if (gi >= G) continue;
#pragma unroll
      for (int i = 0; i < HPL; i++) qv[gi][i] = sm_acc[0][gi][lane + 32 * i] * qs;
    }
    __syncthreads();  // sm_acc is written again after the loop
  }

  if constexpr (kR > 0) {
    extern __shared__ __align__(16) float attn_ring_smem[];
    ring_rows<HPL, kG, kR>(Kc, Vc, k0, k1, nkv, g, warp, lane, attn_ring_smem + warp * kR * ring_slot_floats<HPL, KV>(),
                           qv, G, mx, l, acc);
  } else {
  for (int p = k0 + warp; p < k1; p += kW) {
    float kx[HPL], vx[HPL];
    if (!QK || p < p_step) {  // a row of an earlier step
      load_kv_row<HPL>(Kc, Vc, p, nkv, g, lane, kx, vx);
    } else {  // this step's row of token tp (uniform over the warp)
      const int tp = t_first + (p - p_step);
      warp_rms_row<HPL>(qa.k + (int64_t)tp * qa.ldk + (int64_t)g * HD, qa.k_norm, qa.eps, lane, kx);
      const bool own = p == pt;  // the row this (kv head, token) stores
      if (own && qa.dbg_kn) {
#pragma unroll
        for (int i = 0; i < HPL; i++) qa.dbg_kn[((int64_t)t * nkv + g) * HD + lane + 32 * i] = kx[i];
      }
      warp_rope_row<HPL>(kx, sm_row[warp], lane, p, pt, qa.n_rot, qa.inv_freq, sm_cos, sm_sin);
      const float* vp = qa.v + (int64_t)tp * qa.ldv + (int64_t)g * HD;
#pragma unroll
      for (int i = 0; i < HPL; i++) vx[i] = vp[lane + 32 * i];
      if (own && qa.dbg_kr) {
#pragma unroll
        for (int i = 0; i < HPL; i++) qa.dbg_kr[((int64_t)t * nkv + g) * HD + lane + 32 * i] = kx[i];
      }
#pragma unroll
      for (int i = 0; i < HPL; i++) {  // kv19: the row as the caches keep it (f16: rounded), as later steps read it
        kx[i] = kv_round<KV>(kx[i]);
        vx[i] = kv_round<KV>(vx[i]);
      }
      if (own) {
        KV* kw = Kc + ((int64_t)p * nkv + g) * HD;
        KV* vw = Vc + ((int64_t)p * nkv + g) * HD;
#pragma unroll
        for (int i = 0; i < HPL; i++) {
          kv_st(kw + lane + 32 * i, kx[i]);
          kv_st(vw + lane + 32 * i, vx[i]);
        }
      }
    }
    attend_row<HPL, kG>(qv, kx, vx, G, lane, mx, l, acc);
  }
  }
  stash_warps<HPL, kG>(G, warp, lane, mx, l, acc, sm_m, sm_l, sm_acc);

  if (ns == 1) {  // attn_combine of one split: M = m, L = 0 + l * 1, O = (0 + A * 1) / L, i.e. A / L exactly
    warp_weights<kG>(G, sm_m, sm_l, sm_w);
    for (int idx = threadIdx.x; idx < G * HD; idx += blockDim.x) {
      const int gi = idx / HD, d = idx % HD;
      store_gated(a, t, g * G + gi, d, merged_acc<HPL, kG>(gi, d, sm_acc, sm_w) / sm_w[kW + 1][gi]);
    }
    return;
  }

  // This split's (max, sum, weighted V) per q head, as attn_partial_kernel writes them.
  write_merged<HPL, kG>(part_base(a, t, g), ns, sp, G, sm_m, sm_l, sm_acc, sm_w);
  // The last block of (kv head, token) to get here merges: each thread's partials are ordered before its
  // fence, the block's before thread 0's count; the merging block reads them from L2 after its own fence.
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned* cnt = a.counters + (int64_t)t * nkv + g;
    const bool last = atomicAdd(cnt, 1u) == (unsigned)(ns - 1);
    if (last) *cnt = 0u;  // every block of (kv head, token) has counted: zero for the next launch
    __threadfence();
    sm_last = last;
  }
  __syncthreads();
  if (!sm_last) return;

  // attn_combine_kernel's merge: split_weights per q head (one warp each), then per (head, dim) item
  // O = the sum over the splits in order of A e, O / L.
  const float* part = a.part + ((int64_t)t * nh + g * G) * ns * (HD + 2);
  for (int gi = warp; gi < G; gi += kW) {
    const float L = split_weights(part + (int64_t)gi * ns * (HD + 2), ns, HD, lane, sm_e[gi]);
    if (lane == 0) sm_L[gi] = L;
  }
  __syncthreads();
  // Two (head, dim) items per thread at a time, every split's value loaded before the sums (up to 2 x 16 L2
  // loads in flight: this block alone reads what attn_combine spread over nh blocks).
  constexpr int kItems = 2;
  for (int base = threadIdx.x; base < G * HD; base += kItems * blockDim.x) {
    float v[kItems][kS];
#pragma unroll
    for (int u = 0; u < kItems; u++) {
      const int idx = min(base + u * (int)blockDim.x, G * HD - 1);
      const float* ph = part + (int64_t)(idx / HD) * ns * (HD + 2) + idx % HD;
#pragma unroll
      for (int j = 0; j < kS; j++) v[u][j] = j < ns ? __ldcg(ph + j * (HD + 2)) : 0.f;
    }
#pragma unroll
    for (int u = 0; u < kItems; u++) {
      const int idx = base + u * blockDim.x;
      if (idx >= G * HD) break;
      const int gi = idx / HD, d = idx % HD, h = g * G + gi;
      float O = 0.f;
#pragma unroll
      for (int j = 0; j < kS; j++) {
        if (j >= ns) break;
        O += v[u][j] * sm_e[gi][j];  // an empty split: e = 0, A = 0
      }
      store_gated(a, t, h, d, O / sm_L[gi]);
    }
  }
}

// The kG the kernels are built for: 4 when the group fits (every Qwen3.5 size but the 27B: half the registers
// and shared memory of 8, so twice the blocks per SM at hd 256: 209 -> ~117 registers), else kMaxAttnGroup.
// DS_ATTN_KG=8: always kMaxAttnGroup (the kernels before serve11; the same bits, for A/B timing).
bool attn_small_group(int group) {
  static const bool on = [] {
    const char* e = std::getenv("DS_ATTN_KG");
    return !(e && std::atoi(e) == kMaxAttnGroup);
  }();
  return on && group <= 4;
}

// Rows a warp of attn_partial_kernel loads ahead: 2 by default (H200, 9B, 64 sequences at 512-544 positions of a
// 1024 context: the 8 attention ops 0.936 ms vs 1.000 with 1, 1.639 before serve11's kG 4; serve11 call 1);
// DS_ATTN_PREFETCH=1: one row (A/B).
int forced_prefetch = 0;  // attn_force_prefetch: 0 = DS_ATTN_PREFETCH
int attn_prefetch_rows() {
  static const int n = [] {
    const char* e = std::getenv("DS_ATTN_PREFETCH");
    return e && std::atoi(e) == 1 ? 1 : 2;
  }();
  return forced_prefetch ? forced_prefetch : n;
}

// Rows in flight per warp through the cp.async ring (attn13; any choice gives the same bits, so it may follow the
// batch). Default: 4 rows from kRingMinTokens tokens per step, else the register loops. H200 (attn13 call 1,
// AttnBench, 9B shape, us per op): B = 64 at 528 positions of 1024 123.1 -> 106.0 (ring 2: 105.1), at 1000
// positions 190.1 -> 161.3, at 16 positions 36.3 -> 33.9; B = 32 at 528 71.2 -> 62.1; B = 1 at 528 14.7 -> 15.2 and
// at 128 of 4096 10.6 -> 10.8 (slower: one block per kv head and split, the ring's fill is not hidden).
// DS_ATTN_RING = 0 / 2 / 4: that many rows at every batch (0 = the register loops: attn_partial_kernel /
// attn_fused_kernel's own).
// (Removed in s33: 8 rows per warp, for f16 caches first (a block of the 16-split plan at 64 x 512+ walks ~9 rows per
// warp: with 4 in flight a warp waits ~3 memory round trips). Same bits, no gain: H200, AttnBench 9B shape, B = 64 at
// 512-639 of 1024, us per launch ring 4 / 8: f16 caches 74.1 / 74.8 (2.0 TB/s), f32 caches 88.9 / 94.9 (3 blocks per
// SM); 9B step at 64 x 512 + tg128 with --kv-f16 8.151 / 8.153 vs ring 4 8.149 / 8.151 ms. Latency is hidden: the
// kernel is bound by its per-row instructions.)
constexpr int kRingMinTokens = 32;
int forced_ring = -1;  // attn_force_ring: -1 = DS_ATTN_RING / the default
int ring_rows_clamped(int v) { return v >= 4 ? 4 : v >= 2 ? 2 : 0; }
int attn_ring_rows(int n_tokens) {
  static const int env = [] {
    const char* e = std::getenv("DS_ATTN_RING");
    return e ? ring_rows_clamped(std::atoi(e)) : -1;
  }();
  if (forced_ring >= 0) return forced_ring;
  if (env >= 0) return env;
  return n_tokens >= kRingMinTokens ? 4 : 0;
}

// attn17: empty splits skipped (write_empty) (DS_ATTN_SKIP_EMPTY=0 or attn_force_skip_empty(0) turns it off). H200 (attn17
// call 2, 9B, on / off interleaved): tg128 433.9 / 433.0 vs 431.1 / 431.3 tok/s, B = 64 short 7.888 / 7.878 vs
// 7.920 / 7.888 ms, B = 64 at 512+ positions 8.458 vs 8.457 ms (no empty splits there); AttnBench B = 64 at 16
// positions 21.9 vs 28.0 us per op. On by default (session 14's coordinator): same bits, faster at batch 1 and short
// contexts, no change at 64 x 512+.
int forced_skip = -1;
bool attn_skip_empty() {
  static const bool env = [] {
    const char* e = std::getenv("DS_ATTN_SKIP_EMPTY");
    return !(e && std::atoi(e) == 0);
  }();
  return forced_skip >= 0 ? forced_skip != 0 : env;
}

// attn18: the ring kernel's cached rows with L2 evict_first (DS_ATTN_EVICT, default on, or attn_force_evict(1); the same bits:
// only a cache policy). H200 (attn18 call 2, B = 64 at 512-639 positions of a 1024 context, ring 4 + combine per
// layer): 89.0 vs 92.6 us. The 9B step at 64 x 512+ with it (and with an early-A combine that alone changed nothing
// and was removed): attention 707.6 vs 724.0 / 725.6 us per step, the step 8.499 vs 8.506 / 8.493 ms (within the
// runs' noise). On by default since session 15's final call (main 38ce26b, interleaved, 9B B = 64 at 512+): step
// 8.375 / 8.349 vs 8.368 / 8.384 ms, attention ~88 vs ~91 us per layer, tg128 9B 433.56 vs 433.53 / 433.74;
// test_cuda_model 58/58 with it on, AttnRing.EvictSameBits under memcheck 0 errors. DS_ATTN_EVICT=0 turns it off.
int forced_evict = -1;
bool attn_evict() {
  static const bool env = [] {
    const char* e = std::getenv("DS_ATTN_EVICT");
    return !(e && std::atoi(e) == 0);
  }();
  return forced_evict >= 0 ? forced_evict != 0 : env;
}

// attn_combine over the partials of n_tokens tokens (after every partial kernel but the fused ones).
Status launch_combine(const AttnArgs& a, int n_tokens, cudaStream_t stream) {
  return launch_step(attn_combine_kernel, dim3(a.n_head, n_tokens), dim3(a.head_dim), 0, stream,
                     "attention (combine)", a);
}

// The ring kernels: attn_ring_kernel + attn_combine (kFused false) or attn_fused_kernel's level 1 with the ring.
template <int HPL, int kG, int kS, bool kFused, class KV>
Status launch_ring(const AttnArgs& a, const StepIO* io, int n_tokens, cudaStream_t stream) {
  const dim3 grid(a.n_splits, a.n_head_kv, n_tokens);
  if constexpr (kFused) {
    constexpr int kSmem = kAttnWarps * kS * ring_slot_floats<HPL, KV>() * (int)sizeof(float);
    static const cudaError_t attr = cudaFuncSetAttribute(attn_fused_kernel<HPL, false, kG, kS, KV>,
                                                         cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
    if (attr != cudaSuccess) return cu_err("cuda attention (ring): cudaFuncSetAttribute: {}", cudaGetErrorString(attr));
    return launch_step(attn_fused_kernel<HPL, false, kG, kS, KV>, grid, dim3(32 * kAttnWarps), kSmem, stream,
                       "attention (ring, fused combine)", QkArgs{}, a, io);
  } else {
    constexpr int kSmem = ring_smem_floats<HPL, kG, kS, KV>() * (int)sizeof(float);
    static const cudaError_t attr = cudaFuncSetAttribute(attn_ring_kernel<HPL, kG, kS, false, KV>,
                                                         cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
    static const cudaError_t attr_ef = cudaFuncSetAttribute(attn_ring_kernel<HPL, kG, kS, true, KV>,
                                                            cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
    if (attr != cudaSuccess || attr_ef != cudaSuccess)
      return cu_err("cuda attention (ring): cudaFuncSetAttribute: {}",
                    cudaGetErrorString(attr != cudaSuccess ? attr : attr_ef));
    DS_TRY(launch_step(attn_evict() ? attn_ring_kernel<HPL, kG, kS, true, KV> : attn_ring_kernel<HPL, kG, kS, false, KV>, grid,
                       dim3(32 * kAttnWarps), kSmem, stream, "attention (ring partial)", a, io, attn_skip_empty()));
    return launch_combine(a, n_tokens, stream);
  }
}

// tca33: f16 caches with G <= 4 and 16-byte aligned cache offsets (a property of the model's state layout, not of
// the batch) through attn_mma_pair_kernel + attn_combine at every batch and fused level 0 / 1 (DS_ATTN_MMA=0 or
// attn_force_mma(0): the scalar loaders).
int forced_mma = -1;
bool attn_mma_on() {
  static const bool env = env_on("DS_ATTN_MMA", true);
  return forced_mma >= 0 ? forced_mma != 0 : env;
}
// DS_ATTN_MMA_ALIGN=1 / DS_ATTN_MMA_ROWS=R (attn_force_mma_rows) round the splits' chunks up to whole tiles of at
// least R rows (other bits; a function of the sequence's length, not of the batch).
int forced_mma_rows = -1;
// The mma kernel's rows argument: 0 = split_range's chunks; R > 0 = chunks of >= R rows in whole tiles.
// DS_ATTN_MMA_ALIGN=1 is R = 16, DS_ATTN_MMA_ROWS=R sets R.
int attn_mma_rows() {
  static const int env = [] {
    const char* e = std::getenv("DS_ATTN_MMA_ROWS");
    const int r = e ? std::max(0, std::atoi(e)) : 0;
    return r > 0 ? r : env_on("DS_ATTN_MMA_ALIGN", false) ? kMmaRows : 0;
  }();
  return forced_mma_rows >= 0 ? forced_mma_rows : env;
}
// s35 / s37: one block of two warps per (token, kv head, split) item (attn_mma.cuh), then attn_combine.
template <int HPL>
Status launch_mma(const AttnArgs& a, const StepIO* io, int n_tokens, cudaStream_t stream) {
  constexpr int kSmem = mma_pair_smem_bytes<HPL>();
  static_assert(kSmem <= 48 * 1024, "no opt-in needed");
  DS_TRY(launch_step(attn_mma_pair_kernel<HPL>, dim3(a.n_splits * a.n_head_kv * n_tokens), dim3(64), kSmem, stream,
                     "attention (mma partial)", a, io, attn_mma_rows()));
  return launch_combine(a, n_tokens, stream);
}

template <int HPL, int kG, class KV>
Status launch_attention_g(const AttnArgs& a, const StepIO* io, int n_tokens, cudaStream_t stream) {
  if constexpr (sizeof(KV) == 2)
    if (attn_mma_on() && a.n_head / a.n_head_kv <= 4 && ((a.k_off | a.v_off) & 15) == 0)  // 16-byte copies
      return launch_mma<HPL>(a, io, n_tokens, stream);
  const bool fused = attn_fused() >= 1 && (a.counters || a.n_splits == 1);
  switch (attn_ring_rows(n_tokens)) {
    case 2: return fused ? launch_ring<HPL, kG, 2, true, KV>(a, io, n_tokens, stream)
                         : launch_ring<HPL, kG, 2, false, KV>(a, io, n_tokens, stream);
    case 4: return fused ? launch_ring<HPL, kG, 4, true, KV>(a, io, n_tokens, stream)
                         : launch_ring<HPL, kG, 4, false, KV>(a, io, n_tokens, stream);
    default: break;
  }
  if (fused)
    return launch_step(attn_fused_kernel<HPL, false, kG, 0, KV>, dim3(a.n_splits, a.n_head_kv, n_tokens),
                       dim3(32 * kAttnWarps), 0, stream, "attention (fused combine)", QkArgs{}, a, io);
  const dim3 grid(a.n_splits, a.n_head_kv, n_tokens);
  if (attn_prefetch_rows() == 2)
    DS_TRY(launch_step(attn_partial_kernel<HPL, kG, 2, KV>, grid, dim3(32 * kAttnWarps), 0, stream,
                       "attention (partial)", a, io, attn_skip_empty()));
  else
    DS_TRY(launch_step(attn_partial_kernel<HPL, kG, 1, KV>, grid, dim3(32 * kAttnWarps), 0, stream,
                       "attention (partial)", a, io, attn_skip_empty()));
  return launch_combine(a, n_tokens, stream);
}

template <int HPL>
Status launch_attention(const AttnArgs& a, const StepIO* io, int n_tokens, cudaStream_t stream) {
  const bool small = attn_small_group(a.n_head / a.n_head_kv);
  if (a.kv_half)
    return small ? launch_attention_g<HPL, 4, __half>(a, io, n_tokens, stream)
                 : launch_attention_g<HPL, kMaxAttnGroup, __half>(a, io, n_tokens, stream);
  return small ? launch_attention_g<HPL, 4, float>(a, io, n_tokens, stream)
               : launch_attention_g<HPL, kMaxAttnGroup, float>(a, io, n_tokens, stream);
}

}  // namespace

Status qk_norm_rope_store(const QkArgs& a, const StepIO* io, int n_tokens, cudaStream_t stream) {
  if (a.head_dim < 32 || a.head_dim > 1024 || a.head_dim % 32 != 0)
    return cu_err("cuda qk_norm_rope_store: head dim {} must be a multiple of 32 <= 1024", a.head_dim);
  if (a.n_rot % 2 != 0 || a.n_rot > a.head_dim)
    return cu_err("cuda qk_norm_rope_store: n_rot {} for head dim {}", a.n_rot, a.head_dim);
  if (n_tokens < 1 || n_tokens > kMaxStepTokens) return cu_err("cuda qk_norm_rope_store: {} tokens", n_tokens);
  return launch_step(a.kv_half ? qk_kernel<__half> : qk_kernel<float>, dim3(a.n_head + 2 * a.n_head_kv, n_tokens),
                     dim3(a.head_dim), a.head_dim * sizeof(float), stream, "qk_norm_rope_store", a, io);
}

bool attention_supports(int head_dim, int group) {
  const bool hd_ok = head_dim == 32 || head_dim == 64 || head_dim == 128 || head_dim == 256;
  return hd_ok && group >= 1 && group <= kMaxAttnGroup;
}

namespace {

Status check_attention(const AttnArgs& a, int n_tokens) {
  if (a.n_head_kv < 1 || a.n_head % a.n_head_kv != 0 || !attention_supports(a.head_dim, a.n_head / a.n_head_kv))
    return cu_err("cuda attention: head dim {} with {} q heads per kv head (supported: 32, 64, 128, 256; <= {})",
                  a.head_dim, a.n_head_kv ? a.n_head / a.n_head_kv : 0, kMaxAttnGroup);
  if (a.n_splits < 1 || a.n_splits > kMaxAttnSplits) return cu_err("cuda attention: {} splits", a.n_splits);
  if (n_tokens < 1 || n_tokens > kMaxStepTokens) return cu_err("cuda attention: {} tokens", n_tokens);
  return {};
}

int& attn_fused_level() {
  static int level = [] {
    const char* e = std::getenv("DS_ATTN_FUSED");
    return e ? std::clamp(std::atoi(e), 0, 2) : 0;
  }();
  return level;
}

template <int HPL, class KV>
Status launch_attention_qk_kv(const QkArgs& q, const AttnArgs& a, const StepIO* io, int n_tokens,
                              cudaStream_t stream) {
  if (attn_small_group(a.n_head / a.n_head_kv))
    return launch_step(attn_fused_kernel<HPL, true, 4, 0, KV>, dim3(a.n_splits, a.n_head_kv, n_tokens),
                       dim3(32 * kAttnWarps), 0, stream, "attention (fused q/k + combine)", q, a, io);
  return launch_step(attn_fused_kernel<HPL, true, kMaxAttnGroup, 0, KV>, dim3(a.n_splits, a.n_head_kv, n_tokens),
                     dim3(32 * kAttnWarps), 0, stream, "attention (fused q/k + combine)", q, a, io);
}
template <int HPL>
Status launch_attention_qk(const QkArgs& q, const AttnArgs& a, const StepIO* io, int n_tokens,
                           cudaStream_t stream) {
  return a.kv_half ? launch_attention_qk_kv<HPL, __half>(q, a, io, n_tokens, stream)
                   : launch_attention_qk_kv<HPL, float>(q, a, io, n_tokens, stream);
}

}  // namespace

int attn_fused() { return attn_fused_level(); }
void attn_force_ring(int rows) { forced_ring = rows < 0 ? -1 : ring_rows_clamped(rows); }
void attn_force_prefetch(int rows) { forced_prefetch = rows == 1 || rows == 2 ? rows : 0; }
void attn_force_skip_empty(int on) { forced_skip = on < 0 ? -1 : on != 0; }
void attn_force_evict(int on) { forced_evict = on < 0 ? -1 : on != 0; }
void attn_force_mma(int on) { forced_mma = on < 0 ? -1 : on != 0; }
void attn_force_mma_rows(int rows) { forced_mma_rows = rows; }
int attn_ring(int n_tokens) { return attn_ring_rows(n_tokens); }
void set_attn_fused(int level) { attn_fused_level() = std::clamp(level, 0, 2); }

Status attention(const AttnArgs& a, const StepIO* io, int n_tokens, cudaStream_t stream) {
  DS_TRY(check_attention(a, n_tokens));
  switch (a.head_dim / 32) {
    case 1: return launch_attention<1>(a, io, n_tokens, stream);
    case 2: return launch_attention<2>(a, io, n_tokens, stream);
    case 4: return launch_attention<4>(a, io, n_tokens, stream);
    default: return launch_attention<8>(a, io, n_tokens, stream);
  }
}

Status attention_qk(const QkArgs& q, const AttnArgs& a, const StepIO* io, int n_tokens, cudaStream_t stream) {
  DS_TRY(check_attention(a, n_tokens));
  if (q.n_head != a.n_head || q.n_head_kv != a.n_head_kv || q.head_dim != a.head_dim || q.k_off != a.k_off ||
      q.v_off != a.v_off || q.kv_half != a.kv_half)
    return cu_err("cuda attention_qk: q/k args ({} heads, {} kv heads, hd {}) differ from the attention's",
                  q.n_head, q.n_head_kv, q.head_dim);
  if (q.n_rot < 0 || q.n_rot % 2 != 0 || q.n_rot > q.head_dim)
    return cu_err("cuda attention_qk: n_rot {} for head dim {}", q.n_rot, q.head_dim);
  if (a.n_splits > 1 && !a.counters) return cu_err("cuda attention_qk: {} splits need counters", a.n_splits);
  switch (a.head_dim / 32) {
    case 1: return launch_attention_qk<1>(q, a, io, n_tokens, stream);
    case 2: return launch_attention_qk<2>(q, a, io, n_tokens, stream);
    case 4: return launch_attention_qk<4>(q, a, io, n_tokens, stream);
    default: return launch_attention_qk<8>(q, a, io, n_tokens, stream);
  }
}

}  // namespace ds::cuda::mk
