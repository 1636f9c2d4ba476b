#include "engine/backend_factory.h"

#include <spdlog/spdlog.h>

#include "engine/cuda_backend.h"

namespace ds::engine {

Result<std::string> resolve_backend_kind(std::string_view kind) {
  if (kind == "cpu" || kind == "cuda") return std::string(kind);
  if (kind == "auto") return std::string(cuda_backend_available() ? "cuda" : "cpu");
  return err("backend: unknown backend '{}' (expected auto, cpu or cuda)", kind);
}

Result<std::unique_ptr<Backend>> make_backend(std::string_view kind, const std::string& model_path,
                                              const BackendOptions& o) {
  DS_ASSIGN(const std::string k, resolve_backend_kind(kind));
  if (k == "cuda") {
#if DS_HAVE_CUDA
    if (!cuda_backend_available())
      return err("backend: --backend cuda: no CUDA device is visible (no GPU, or no driver); use --backend cpu");
#endif
    CudaBackendOptions co;
    co.n_slots = o.n_slots;
    co.n_ctx = o.n_ctx;
    co.device = o.device;
    co.use_graphs = o.cuda_graphs;
    spdlog::info("backend: cuda (device {}, {} slots of {} positions)", o.device, o.n_slots, o.n_ctx);
    return make_cuda_backend(model_path, co);
  }
  // CPU: Qwen35Backend (src/engine/qwen35_backend.h) borrows a loaded Qwen35Model that must outlive it, so callers
  // load the model and call Qwen35Backend::create themselves (apps/cmd_serve.cpp); this path-only
  // factory builds the CUDA backend, which owns its weights.
  (void)model_path;
  return err("backend: make_backend builds only the cuda backend; for the cpu backend load the model and call "
             "Qwen35Backend::create");
}

}  // namespace ds::engine
