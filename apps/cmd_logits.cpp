// `deltaserve logits`: teacher-forced logits of a token sequence, the contract external checks use.
// The first K tokens run as one prefill (chunked delta rule), the rest one at a time (recurrent rule);
// the output holds the logits of every position, float32 little-endian, row-major [n_tokens, n_vocab].
// --backend cuda runs the same contract on the GPU (src/cuda/model); auto picks it when a GPU is present.
// --precise: the GPU prefill in fp32 everywhere (2e-3 of the references) instead of the default fast mode
// (tensor-core GEMM inputs, 0.02); the CPU is fp32 everywhere, so on the CPU both are the same.
#include <omp.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "command.h"
#include "backend_options.h"
#include "option_checks.h"
#include "engine/backend_factory.h"
#include "model/qwen35.h"
#if DS_HAVE_CUDA
#include "cuda/model/qwen35_cuda.cuh"
#endif

namespace {

ds::Result<std::vector<int32_t>> read_token_ids(const std::string& path) {
  std::ifstream f(path);
  if (!f) return ds::err("logits: cannot read tokens file '{}'", path);
  std::vector<int32_t> ids;
  std::string word;
  while (f >> word) {
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(word.c_str(), &end, 10);
    if (errno != 0 || end == word.c_str() || *end != '\0' || v < 0 || v > INT32_MAX)
      return ds::err("logits: {}: entry {} is '{}', expected a non-negative integer token id", path, ids.size() + 1,
                     word);
    ids.push_back((int32_t)v);
  }
  if (ids.empty()) return ds::err("logits: {}: no token ids (expected whitespace-separated integers)", path);
  return ids;
}

struct Options : ds::app::BackendOptions {
  std::string model, tokens_file, out;
  bool reference = false;
  int64_t decode_from = -1;
  int threads = 0;
};

// The same contract on the GPU: prefill of the first k tokens with every row's logits, then one decode
// step per token (CUDA graph replays unless no_graphs).
ds::Status cuda_logits(const ds::Qwen35Model& m, std::span<const int32_t> ids, int64_t k,
                       const ds::app::BackendOptions& bo, std::vector<float>& logits) {
#if DS_HAVE_CUDA
  ds::cuda::CudaModelOptions mo;
  mo.use_graphs = !bo.no_graphs;
  mo.precision = bo.precise ? ds::cuda::Precision::kPrecise : ds::cuda::Precision::kFast;
  mo.kv_f16 = bo.kv_f16;
  mo.state_f16 = bo.state_f16;
  DS_ASSIGN(auto cm, ds::cuda::CudaModel::load(m, mo));
  const int64_t n = (int64_t)ids.size(), V = m.cfg.n_vocab;
  DS_ASSIGN(auto st, cm->create_state(n));
  spdlog::info("logits: cuda: {:.1f} MB of weights on the device, state {:.1f} MB, prefill {}",
               cm->weight_bytes() / 1e6, st->bytes() / 1e6, ds::cuda::precision_name(mo.precision));
  if (k > 0) DS_TRY(cm->prefill(*st, ids.first(k), logits.data(), true));
  for (int64_t t = k; t < n; t++) {
    ds::cuda::CudaSeqState* sp = st.get();
    DS_TRY(cm->decode({&sp, 1}, ids.subspan(t, 1), logits.data() + t * V));
  }
  return {};
#else
  (void)m, (void)ids, (void)k, (void)bo, (void)logits;
  return ds::err("logits: --backend cuda: this deltaserve was built without CUDA; rebuild with nvcc available");
#endif
}

int write_logits(const Options& o, const std::vector<float>& logits, int64_t n, int64_t V) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(o.out.c_str(), "wb"), &std::fclose);
  if (!f || std::fwrite(logits.data(), sizeof(float), logits.size(), f.get()) != logits.size()) {
    spdlog::error("logits: cannot write '{}': {}", o.out, std::strerror(errno));  // the why: no folder, no space, ...
    return 1;
  }
  spdlog::info("logits: wrote [{}, {}] float32 to {}", n, V, o.out);
  return 0;
}

int run(const Options& o) {
  auto use_cuda = ds::app::use_cuda("logits", o.backend);
  if (!use_cuda) {
    spdlog::error("{}", use_cuda.error().message);
    return 1;
  }
  const bool cuda = *use_cuda;
  if (o.threads > 0) omp_set_num_threads(o.threads);
  auto ids = read_token_ids(o.tokens_file);
  if (!ids) {
    spdlog::error("{}", ids.error().message);
    return 1;
  }
  const int64_t n = (int64_t)ids->size();
  const int64_t k = o.decode_from < 0 ? n : o.decode_from;
  if (k > n) {
    spdlog::error("logits: --decode-from {} is past the {} tokens of '{}'", k, n, o.tokens_file);
    return 1;
  }
  auto model = ds::Qwen35Model::load_file(o.model);
  if (!model) {
    spdlog::error("{}", model.error().message);
    return 1;
  }
  if (n > model->cfg.n_ctx_train) {
    spdlog::error("logits: '{}' has {} tokens, more than the {} positions {} was trained for (its context_length); "
                  "give at most {}",
                  o.tokens_file, n, model->cfg.n_ctx_train, o.model, model->cfg.n_ctx_train);
    return 1;
  }
  const int64_t V = model->cfg.n_vocab;
  std::vector<float> logits(n * V);
  const std::span<const int32_t> all(*ids);
  if (cuda) {
    spdlog::info("logits: {} tokens ({} prefill, {} decode), vocab {}, backend cuda", n, k, n - k, V);
    if (auto s = cuda_logits(*model, all, k, o, logits); !s) {
      spdlog::error("{}", s.error().message);
      return 1;
    }
    return write_logits(o, logits, n, V);
  }
  auto state = ds::SequenceState::create(model->cfg, n);
  if (!state) {
    spdlog::error("{}", state.error().message);
    return 1;
  }
  const ds::CpuPath path = o.reference ? ds::CpuPath::kReference : ds::CpuPath::kFast;
  spdlog::info("logits: {} tokens ({} prefill, {} decode), vocab {}, backend cpu ({} ops), {} threads", n, k, n - k,
               V, o.reference ? "reference" : "fast", omp_get_max_threads());
  if (k > 0) {
    if (auto s = ds::forward(*model, *state, all.first(k), logits.data(), true, {}, path); !s) {
      spdlog::error("{}", s.error().message);
      return 1;
    }
  }
  for (int64_t t = k; t < n; t++) {
    if (auto s = ds::forward(*model, *state, all.subspan(t, 1), logits.data() + t * V, false, {}, path); !s) {
      spdlog::error("{}", s.error().message);
      return 1;
    }
  }
  return write_logits(o, logits, n, V);
}

ds::app::RunFn setup(CLI::App& app) {
  auto o = std::make_shared<Options>();
  app.add_option("-m,--model", o->model, "Qwen3.5 GGUF file (architecture qwen35)")->required();
  app.add_option("--tokens-file", o->tokens_file, "file of whitespace-separated token ids")->required();
  app.add_option("--out", o->out,
                 "output file: the logits of every position, float32 little-endian, row-major [n_tokens, n_vocab]")
      ->required();
  app.add_option("--decode-from", o->decode_from,
                 "process the first K tokens as one prefill (chunked delta rule) and the rest one at a time "
                 "(recurrent rule); default: all tokens as one prefill")
      ->check(ds::app::int_in(0));
  ds::app::add_backend_options(app, *o);
  app.add_flag("--reference", o->reference,
               "cpu: run the plain one-function-per-op reference ops (the specification, slow) instead of their "
               "blocked/vectorized twins (same fp32 math, different summation order)");
  ds::app::add_threads_option(app, o->threads);
  return [o] { return run(*o); };
}

}  // namespace

DS_COMMAND("logits",
           "Teacher-forced logits of a token sequence (prefill, then token-by-token decode) written as raw float32",
           setup);
