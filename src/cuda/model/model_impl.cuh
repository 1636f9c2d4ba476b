// CudaModel's device-side layout, shared by qwen35_cuda.cu (load, states, snapshots) and
// qwen35_cuda_forward.cu (the step). Host code only.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda/cuda_util.h"
#include "cuda/model/model_kernels.cuh"
#include "cuda/prefill/prefill.cuh"
#include "cuda/model/qwen35_cuda.cuh"

namespace ds::cuda {

// A weight matrix on the device, in its GGUF type: rows of cols elements (ggml ne {cols, rows}).
struct DevMat {
  std::string name;  // GGUF name(s), '+'-joined for a concatenation
  GgmlType type = GgmlType::F32;
  int64_t rows = 0, cols = 0;
  const uint8_t* w = nullptr;
  size_t bytes = 0;
};

// Projections of one input: consecutive matrices of one type are stored back to back and run as one
// product (a group). The output of group g is [T][groups[g].rows] at out_off[g] floats into the step's
// projection buffer; matrix i of the input list is a column range of its group's output.
struct Proj {
  struct View {
    int group = 0;
    int64_t row_off = 0;
  };
  std::vector<DevMat> groups;
  std::vector<int64_t> out_off;
  std::vector<View> views;
  std::vector<DevMat> mats;  // matrix i of the input list alone (rows of its group): the prefill GEMM operands
  int64_t total_rows() const {
    int64_t n = 0;
    for (const auto& g : groups) n += g.rows;
    return n;
  }
};

struct DevLayer {
  LayerKind kind = LayerKind::GatedDeltaNet;
  const float* attn_norm = nullptr;  // [H]
  const float* post_norm = nullptr;  // [H]
  Proj in;                           // GDN: qkv, gate (z), beta, alpha; attention: q, k, v
  DevMat out;                        // ssm_out / attn_output
  Proj ffn;                          // ffn_gate, ffn_up
  DevMat down;                       // ffn_down
  const float* conv_w = nullptr;     // GDN [Cc][Kc]
  const float* dt_bias = nullptr;    // GDN [nv]
  const float* ssm_a = nullptr;      // GDN [nv]
  const float* ssm_norm = nullptr;   // GDN [dv]
  const float* q_norm = nullptr;     // attention [hd]
  const float* k_norm = nullptr;     // attention [hd]
  int64_t conv_off = 0, ssm_off = 0;  // GDN: bytes into a sequence state
  int64_t hist_off = 0;               // GDN with the lazy rule (lz23): its history, bytes into a sequence state
  int attn_index = -1;                // attention: index among the attention layers (KV cache slot)
};

// Scratch of the piece prefill (qwen35_cuda_prefill.cu), [piece][...] floats each, allocated on first use.
struct PrefillScratch {
  int64_t piece = 0;  // tokens per piece
  std::unique_ptr<prefill::PrefillGemm> gemm;
  DeviceBuffer h, xn, pa, pb, pc, pd, u, core, ws, io;  // io: int32 ids [piece], pos [piece], seq_starts [2]
  DeviceBuffer state32;  // st20: one GDN layer's state widened to float around the chunked rule (f16 states only)
  size_t ws_bytes = 0;
  int32_t* io_host = nullptr;  // pinned, same layout as io
  ~PrefillScratch() {
    if (io_host) cudaFreeHost(io_host);
  }
};

struct CudaModel::Impl {
  cudaStream_t stream = nullptr;
  DeviceBuffer arena;  // every weight and f32 vector
  std::vector<DevLayer> layers;
  DevMat embd, output;
  const float* output_norm = nullptr;
  const float* inv_freq = nullptr;  // [n_rot/2]
  int64_t kv_row_bytes = 0;         // nkv * hd elements: one position of K (or V) of one layer
  bool kv_half = false;             // kv19: the caches hold f16 elements (else f32)
  bool state_half = false;          // st20: the GDN states hold f16 elements (else f32)
  int gdn_lazy = 0;                 // lz23: the lazy delta rule's length (0 off)
  int max_tokens = kMaxStepTokens;

  // Per-step scratch, [max_tokens][...] each.
  int64_t proj_floats = 0, o_floats = 0;
  DeviceBuffer h, xn, mix, y, proj, u, o, qr, act, logits, part;
  DeviceBuffer attn_cnt;  // [max_tokens][nkv] unsigned zeros: the fused attention's counters (attn9)
  DeviceBuffer io_dev;
  mk::StepIO* io_host = nullptr;  // pinned
  float* logits_host = nullptr;   // pinned [max_tokens][V]
  // Intermediates the fused kernels skip, for the named dumps (allocated on the first dump).
  DeviceBuffer dbg_conv, dbg_core, dbg_g, dbg_beta, dbg_qn, dbg_kn, dbg_kr;

  std::unique_ptr<PrefillScratch> pf;  // the piece prefill's scratch (null until the first one)

  std::map<std::tuple<int, int64_t, bool>, cudaGraphExec_t> graphs;  // (batch, max_ctx, head_hi) -> decode step
  std::vector<cudaEvent_t> events;                            // profiling
  // cg38: the output head's ||w_r||_1 (computed at load where certified steps can run) and whether they may.
  DeviceBuffer head_l1;
  bool certify = false;  // CudaModelOptions::certify_head and DS_HEAD_CERTIFY

  ~Impl();
  int64_t k_off(int attn_index, int64_t max_ctx, size_t rec_bytes) const {
    return (int64_t)rec_bytes + (int64_t)(2 * attn_index) * max_ctx * kv_row_bytes;
  }
  int64_t v_off(int attn_index, int64_t max_ctx, size_t rec_bytes) const {
    return k_off(attn_index, max_ctx, rec_bytes) + max_ctx * kv_row_bytes;
  }
  // lz23: GDN layer D's history (lazy rule) applied to the state of the sequence allocated at base (nothing without
  // the lazy rule or for an attention layer); before the piece prefill or a download reads that state.
  Status flush_lazy(const Qwen35Config& c, const DevLayer& D, uint8_t* base) const {
    if (!gdn_lazy || D.kind != LayerKind::GatedDeltaNet) return {};
    mk::GdnArgs a;
    a.state_off = D.ssm_off;
    a.hist_off = D.hist_off;
    a.lazy = gdn_lazy;
    a.state_half = state_half;
    a.n_k_heads = (int)c.n_k_heads;
    a.n_v_heads = (int)c.n_v_heads;
    a.d_k = (int)c.d_k;
    return mk::gdn_flush(a, base, stream);
  }
};

}  // namespace ds::cuda
