// Choosing and building the compute backend by name (the --backend option of logits, run, bench, serve):
//   "cpu"  the fp32 reference model (src/model) behind the engine Backend interface (Qwen35Backend::create, which
//          borrows a loaded model: make_backend refuses "cpu")
//   "cuda" the GPU model (src/cuda/model); an Error when built without CUDA or when no GPU is visible
//   "auto" cuda when this binary has CUDA and a GPU is present, else cpu
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/error.h"
#include "engine/backend.h"

namespace ds::engine {

struct BackendOptions {
  int32_t n_slots = 4;    // sequences held at once
  int32_t n_ctx = 4096;   // positions per sequence
  int threads = 0;        // cpu: threads (0 = all cores)
  int device = 0;         // cuda: device id
  bool cuda_graphs = true;  // cuda: replay decode steps as CUDA graphs
};

// "cpu" or "cuda": what `kind` resolves to on this machine; an Error for an unknown kind.
Result<std::string> resolve_backend_kind(std::string_view kind);

Result<std::unique_ptr<Backend>> make_backend(std::string_view kind, const std::string& model_path,
                                              const BackendOptions& o);

}  // namespace ds::engine
