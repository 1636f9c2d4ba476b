// The engine Backend (engine/backend.h) on one NVIDIA GPU: a CudaModel (src/cuda/model/qwen35_cuda.cuh) with
// n_slots device sequence states of n_ctx positions each. prefill runs a slot's tokens through CudaModel::prefill
// (prompts of 16 tokens or more: the piece prefill with matrix-matrix products, fast or --precise; shorter ones in
// steps of up to 64); decode runs up to 64 slots as one step (a CUDA graph replay per batch size);
// save/restore are device-to-device copies of a slot's recurrent state and its KV rows in use.
// Batch invariance: every kernel computes a slot's rows independently of the others, except that a decode of
// one slot uses the single-vector matvec and a batch the multi-vector one, whose float summation orders
// differ (results agree to ~1e-6 relative, not bit for bit).
// This header needs no CUDA: without it, make_cuda_backend returns an Error.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "core/error.h"
#include "engine/backend.h"

namespace ds {
struct Qwen35Model;
}

namespace ds::engine {

struct CudaBackendOptions {
  int32_t n_slots = 4;
  int32_t n_ctx = 4096;  // positions per slot (KV cache rows)
  int device = 0;
  bool use_graphs = true;
  bool precise = false;  // prefill in fp32 everywhere (cuda::Precision::kPrecise) instead of the fast default
  bool kv_f16 = false;   // f16 K / V caches (cuda::CudaModelOptions::kv_f16)
  bool state_f16 = false;  // f16 GDN states (cuda::CudaModelOptions::state_f16)
};

// True when this binary was built with CUDA and a CUDA device is visible.
bool cuda_backend_available();

// Loads the GGUF (CPU loader checks, then upload) and builds the backend.
Result<std::unique_ptr<Backend>> make_cuda_backend(const std::string& model_path, const CudaBackendOptions& o);
// The same from a model already loaded on the CPU side (the model may be dropped afterwards).
Result<std::unique_ptr<Backend>> make_cuda_backend(const Qwen35Model& model, const CudaBackendOptions& o);

}  // namespace ds::engine
