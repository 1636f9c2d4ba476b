// The compute-backend options that logits, run and bench share (one wording, one check): --backend
// cpu|cuda|auto, --precise (the CUDA prefill mode) and --no-graphs (CUDA decode without graph replay).
#pragma once
#include <CLI/CLI.hpp>

#include <string>

namespace ds::app {

struct BackendOptions {
  std::string backend = "cpu";  // run and bench default to auto; logits (the external checks' contract) to cpu
  bool precise = false;    // cuda: fp32 prefill instead of the fast tensor-core mode
  bool no_graphs = false;  // cuda: launch each decode step's kernels instead of replaying a CUDA graph
  bool kv_f16 = false;     // cuda: f16 K / V caches (kv19)
  bool state_f16 = false;  // cuda: f16 Gated DeltaNet states (st20)
};

// The --kv-f16 help, shared with serve and cuda-bench.
inline constexpr const char* kKvF16Help =
    "cuda: keep the attention layers' K / V caches in f16 instead of f32: half their memory and half the bytes a decode step's attention reads; an approximation of the fp32 reference: the logits move slightly (the GPU test bounds them at 1e-2 relative RMS of the f32 caches' logits)";

// The --state-f16 help, shared with serve and cuda-bench.
inline constexpr const char* kStateF16Help =
    "cuda: keep the Gated DeltaNet recurrent states in f16 instead of f32: half their memory and half the bytes a decode step's delta rule reads and writes (with many sequences, more than the weights); the update is still computed in f32, the state is rounded to f16 once per step; an approximation of the fp32 reference: logits 4.4e-4 relative RMS from the f32 states' (the GPU test's bound: 1e-2), the fixtures' decode rows 2.0e-3 to 3.3e-3 from the Hugging Face reference (2.2e-5 with f32 states)";

// Adds --backend, --precise, --kv-f16 and --state-f16, and --no-graphs when with_graphs (bench times graphs only).
inline void add_backend_options(CLI::App& app, BackendOptions& o, bool with_graphs = true) {
  app.add_option("--backend", o.backend,
                 "Compute backend: cpu (the fp32 reference), cuda (the GPU; an error without one), or auto (cuda "
                 "when this build has CUDA and a GPU is present, else cpu)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
      ->capture_default_str();
  app.add_flag("--precise", o.precise,
               "cuda: prefill in fp32 everywhere (within 2e-3 of the fp32 reference) instead of the default fast "
               "mode (tensor-core inputs, within 0.02); the cpu backend is fp32 everywhere, fast = precise there");
  app.add_flag("--kv-f16", o.kv_f16, kKvF16Help);
  app.add_flag("--state-f16", o.state_f16, kStateF16Help);
  if (with_graphs)
    app.add_flag("--no-graphs", o.no_graphs,
                 "cuda: launch every decode step's kernels instead of replaying a CUDA graph");
}

}  // namespace ds::app
