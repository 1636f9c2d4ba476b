// deltaserve bench: prompt-processing (ppN: N random tokens in one forward call from an empty context)
// and generation (tgN: N tokens decoded one at a time from an empty context) throughput, measured as
// llama-bench measures them (a warm-up run first, then -r runs), printed as llama-bench's table or as
// one JSON line per test (median, min, max, spread, commit, device) for bench/results/*.jsonl.
// --backend cuda (or auto with a GPU) times the CUDA model (src/cuda/model): ppN is one prefill call that
// ends with the last token's logits on the host, so its time is also the time to first token (ttft_ms);
// tgN is N decode steps (CUDA graph replays). The prefill mode (fast, or --precise) is printed and recorded.
// A per-kernel breakdown of a decode step: `deltaserve cuda-bench --breakdown`.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <cstdlib>
#include <functional>
#include <optional>
#include <random>

#include "command.h"
#include "core/log.h"
#include "backend_options.h"
#include "option_checks.h"
#include "engine/backend_factory.h"
#include "git_sha.h"
#include "model/qwen35.h"
#if DS_HAVE_CUDA
#include "cuda/cuda_util.h"
#include "cuda/model/qwen35_cuda.cuh"
#endif

namespace {

using Clock = std::chrono::steady_clock;

struct BenchArgs : ds::app::BackendOptions {
  BenchArgs() { backend = "auto"; }  // the GPU when there is one
  std::string model;
  std::vector<int> n_prompt{512}, n_gen{128};
  int reps = 3, threads = 0;
  bool json = false, no_warmup = false;
  uint64_t seed = 1234;
};

struct Test {
  std::string name;  // pp512, tg128
  int n_prompt = 0, n_gen = 0;
  std::vector<double> tps;   // tokens per second of each run
  std::vector<double> ttft;  // pp: seconds from the call to the last token's logits on the host
};

// One run: the prompt as one forward call (its logits on the host), then n_gen single-token steps.
struct RunTimes {
  double total = 0, prompt = 0;
};
using RunFn = std::function<ds::Result<RunTimes>(const std::vector<int32_t>& prompt, int n_gen)>;

std::string cpu_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      auto c = line.find(':');
      if (c != std::string::npos) {
        auto s = line.substr(c + 1);
        s.erase(0, s.find_first_not_of(" \t"));
        return s;
      }
    }
  return "unknown CPU";
}

// llama.cpp's names (llama_model_ftype_name) for the file types one meets.
std::string ftype_name(uint64_t ft) {
  switch (ft) {
    case 0: return "all F32";
    case 1: return "F16";
    case 2: return "Q4_0";
    case 3: return "Q4_1";
    case 7: return "Q8_0";
    case 8: return "Q5_0";
    case 9: return "Q5_1";
    case 10: return "Q2_K - Medium";
    case 12: return "Q3_K - Medium";
    case 14: return "Q4_K - Small";
    case 15: return "Q4_K - Medium";
    case 16: return "Q5_K - Small";
    case 17: return "Q5_K - Medium";
    case 18: return "Q6_K";
    case 30: return "IQ4_XS - 4.25 bpw";
    case 32: return "BF16";
    default: return "ftype " + std::to_string(ft);
  }
}

// llama.cpp's model type for qwen35 (by trunk layers and width).
std::string size_name(const ds::Qwen35Config& c) {
  if (c.n_layer == 24) return c.n_embd == 1024 ? "0.8B" : "2B";
  if (c.n_layer == 32) return c.n_embd == 2560 ? "4B" : "9B";
  if (c.n_layer == 64) return "27B";
  return "?B";
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / v.size();
}
double stddev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  double m = mean(v), s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / (v.size() - 1));
}

// 1-minute load average: on a shared machine it says how much to trust a number.
double load_avg() {
  std::ifstream f("/proc/loadavg");
  double l = -1;
  f >> l;
  return l;
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

int fail(const ds::Error& e) {
  spdlog::error("{}", e.message);
  return 1;
}

int run(const BenchArgs& a) {
  auto use_cuda = ds::app::use_cuda("bench", a.backend);
  if (!use_cuda) return fail(use_cuda.error());
  const bool cuda = *use_cuda;
  if (a.threads > 0) omp_set_num_threads(a.threads);
  const int threads = omp_get_max_threads();
  auto model = ds::Qwen35Model::load_file(a.model);
  if (!model) return fail(model.error());
  const ds::Qwen35Config& cfg = model->cfg;
  const ds::gguf::File& file = *model->file;
  uint64_t model_bytes = 0, params = 0;
  for (const auto& t : file.tensors()) model_bytes += t.n_bytes, params += t.n_elements;
  const std::string desc = "qwen35 " + size_name(cfg) + " " + ftype_name(file.get_uint_or("general.file_type", 999));
  std::string device = cpu_name();
  const std::string mode = cuda && a.precise ? "precise" : cuda ? "fast" : "fp32";

  std::vector<Test> tests;
  for (int p : a.n_prompt)
    if (p > 0) tests.push_back({"pp" + std::to_string(p), p, 0, {}, {}});
  for (int n : a.n_gen)
    if (n > 0) tests.push_back({"tg" + std::to_string(n), 0, n, {}, {}});
  if (tests.empty()) {
    spdlog::error("bench: nothing to measure (every -p and -n is 0)");
    return 2;
  }
  int64_t max_ctx = 1;
  for (const auto& t : tests) max_ctx = std::max<int64_t>(max_ctx, t.n_prompt + t.n_gen);
  if (max_ctx > cfg.n_ctx_train)
    return fail(ds::err("bench: a test of {} tokens is longer than the {} positions {} was trained for; use smaller "
                        "-p / -n values",
                        max_ctx, cfg.n_ctx_train, a.model));
  std::vector<float> logits(cfg.n_vocab);
  std::mt19937_64 rng(a.seed);
  std::uniform_int_distribution<int32_t> any_token(0, (int32_t)cfg.n_vocab - 1);

  RunFn run_once;
  std::optional<ds::SequenceState> state;
#if DS_HAVE_CUDA
  std::unique_ptr<ds::cuda::CudaModel> gpu;
  std::unique_ptr<ds::cuda::CudaSeqState> gstate;
#endif
  if (cuda) {
#if DS_HAVE_CUDA
    ds::cuda::CudaModelOptions mo;
    mo.precision = a.precise ? ds::cuda::Precision::kPrecise : ds::cuda::Precision::kFast;
    mo.kv_f16 = a.kv_f16;
    mo.state_f16 = a.state_f16;
    auto cm = ds::cuda::CudaModel::load(*model, mo);
    if (!cm) return fail(cm.error());
    gpu = std::move(*cm);
    auto gs = gpu->create_state(max_ctx);
    if (!gs) return fail(gs.error());
    gstate = std::move(*gs);
    const auto info = ds::cuda::device_info();
    device = info ? info->name : "CUDA device";
    run_once = [&](const std::vector<int32_t>& prompt, int n_gen) -> ds::Result<RunTimes> {
      DS_TRY(gstate->reset());
      RunTimes r;
      const auto t0 = Clock::now();
      if (!prompt.empty()) DS_TRY(gpu->prefill(*gstate, prompt, logits.data(), false));
      r.prompt = std::chrono::duration<double>(Clock::now() - t0).count();
      for (int i = 0; i < n_gen; i++) {
        const int32_t tok = any_token(rng);
        ds::cuda::CudaSeqState* sp = gstate.get();  // a graph replay; the logits land in pinned host memory
        DS_TRY(gpu->decode({&sp, 1}, std::span<const int32_t>(&tok, 1), nullptr));
      }
      r.total = std::chrono::duration<double>(Clock::now() - t0).count();
      return r;
    };
#endif
  } else {
    auto st = ds::SequenceState::create(cfg, max_ctx);
    if (!st) return fail(st.error());
    state = std::move(*st);
    run_once = [&](const std::vector<int32_t>& prompt, int n_gen) -> ds::Result<RunTimes> {
      state->reset();
      RunTimes r;
      const auto t0 = Clock::now();
      if (!prompt.empty()) DS_TRY(ds::forward(*model, *state, prompt, logits.data(), false));
      r.prompt = std::chrono::duration<double>(Clock::now() - t0).count();
      for (int i = 0; i < n_gen; i++) {
        const int32_t tok = any_token(rng);
        DS_TRY(ds::forward(*model, *state, std::span<const int32_t>(&tok, 1), logits.data(), false));
      }
      r.total = std::chrono::duration<double>(Clock::now() - t0).count();
      return r;
    };
  }
  auto timed = [&](const Test& t, int n_prompt, int n_gen) -> ds::Result<RunTimes> {
    (void)t;
    std::vector<int32_t> toks(n_prompt);
    for (auto& x : toks) x = any_token(rng);
    return run_once(toks, n_gen);
  };

  spdlog::info("bench: {} ({}, {:.2f} MiB, {} params) on {} ({}), {} runs per test", a.model, desc,
               model_bytes / 1048576.0, params, device,
               cuda ? "cuda, prefill " + mode : std::to_string(threads) + " threads", a.reps);
  if (!a.json) {
    std::printf("| %-30s | %10s | %10s | %-8s | %7s | %-7s | %10s | %20s | %10s |\n", "model", "size", "params",
                "backend", "threads", "mode", "test", "t/s", "ttft ms");
    std::printf("| %s | %s: | %s: | %s | %s: | %s | %s: | %s: | %s: |\n", std::string(30, '-').c_str(),
                std::string(9, '-').c_str(), std::string(9, '-').c_str(), std::string(8, '-').c_str(),
                std::string(6, '-').c_str(), std::string(7, '-').c_str(), std::string(9, '-').c_str(),
                std::string(19, '-').c_str(), std::string(9, '-').c_str());
    std::fflush(stdout);
  }
  const std::string commit = DS_GIT_SHA;
  for (auto& t : tests) {
    if (!a.no_warmup) {
      // As llama-bench: a full prompt run before pp, one token before tg.
      spdlog::info("bench: {} warm-up", t.name);
      auto w = timed(t, t.n_prompt, t.n_gen > 0 ? 1 : 0);
      if (!w) return fail(w.error());
    }
    for (int r = 0; r < a.reps; r++) {
      auto s = timed(t, t.n_prompt, t.n_gen);
      if (!s) return fail(s.error());
      const double tps = (t.n_prompt + t.n_gen) / s->total;
      t.tps.push_back(tps);
      if (t.n_prompt > 0) t.ttft.push_back(s->prompt);
      spdlog::info("bench: {} run {}/{}: {:.4f} s, {:.2f} tok/s", t.name, r + 1, a.reps, s->total, tps);
    }
    const double ttft_ms = t.ttft.empty() ? 0 : median(t.ttft) * 1e3;
    const double med = median(t.tps), avg = mean(t.tps), sd = stddev(t.tps);
    const double lo = *std::min_element(t.tps.begin(), t.tps.end()), hi = *std::max_element(t.tps.begin(), t.tps.end());
    if (a.json) {
      nlohmann::ordered_json j;
      j["model"] = desc;
      j["model_file"] = std::filesystem::path(a.model).filename().string();
      j["file_bytes"] = file.file_size();
      j["model_bytes"] = model_bytes;
      j["params"] = params;
      j["backend"] = cuda ? "cuda" : "cpu";
      j["device"] = device;
      j["threads"] = threads;
      j["mode"] = mode;
      j["test"] = t.name;
      j["n_prompt"] = t.n_prompt;
      j["n_gen"] = t.n_gen;
      j["tokens_per_s"] = std::round(med * 100) / 100;
      j["mean"] = std::round(avg * 100) / 100;
      j["stddev"] = std::round(sd * 100) / 100;
      j["min"] = std::round(lo * 100) / 100;
      j["max"] = std::round(hi * 100) / 100;
      j["runs"] = a.reps;
      if (t.n_prompt > 0) j["ttft_ms"] = std::round(ttft_ms * 1000) / 1000;
      j["samples"] = t.tps;
      j["commit"] = commit;
      j["load_avg"] = load_avg();
      const char* wait = std::getenv("OMP_WAIT_POLICY");
      j["omp_wait_policy"] = wait ? wait : "default";
      if (const char* spin = std::getenv("GOMP_SPINCOUNT")) j["gomp_spincount"] = spin;
      j["timestamp"] = utc_now();
      std::printf("%s\n", j.dump().c_str());
    } else {
      const double gib = model_bytes / 1073741824.0;
      std::string size = gib >= 1 ? fmt::format("{:.2f} GiB", gib) : fmt::format("{:.2f} MiB", model_bytes / 1048576.0);
      std::string prm = params >= 1e9 ? fmt::format("{:.2f} B", params / 1e9) : fmt::format("{:.2f} M", params / 1e6);
      std::string ts = fmt::format("{:.2f} ± {:.2f}", avg, sd);
      const std::string ttft = t.n_prompt > 0 ? fmt::format("{:.2f}", ttft_ms) : "";
      std::printf("| %-30s | %10s | %10s | %-8s | %7d | %-7s | %10s | %20s | %10s |\n", desc.c_str(), size.c_str(),
                  prm.c_str(), cuda ? "CUDA" : "CPU", threads, mode.c_str(), t.name.c_str(), ts.c_str(), ttft.c_str());
    }
    std::fflush(stdout);
  }
  if (!a.json) std::printf("\nbuild: %s (t/s: mean ± sample stddev of %d runs, as llama-bench)\n", commit.c_str(), a.reps);
  return 0;
}

ds::app::RunFn setup(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  app.add_option("-m,--model", a->model, "Qwen3.5 GGUF file (architecture qwen35)")->required()->check(CLI::ExistingFile);
  app.add_option("-p,--n-prompt", a->n_prompt, "Prompt lengths to time (comma list; 0 = none): test ppN")
      ->delimiter(',')
      ->capture_default_str()
      ->check(ds::app::int_in(0));
  app.add_option("-n,--n-gen", a->n_gen, "Generation lengths to time (comma list; 0 = none): test tgN")
      ->delimiter(',')
      ->capture_default_str()
      ->check(ds::app::int_in(0));
  app.add_option("-r,--repetitions", a->reps, "Runs per test (after one warm-up)")
      ->capture_default_str()
      ->check(ds::app::int_in(1));
  ds::app::add_threads_option(app, a->threads, "-t,--threads");
  ds::app::add_backend_options(app, *a, /*with_graphs=*/false);
  app.add_option("--seed", a->seed, "Seed of the random token ids")->capture_default_str();
  app.add_flag("--json", a->json,
               "One JSON line per test on stdout (tokens_per_s = median, min, max, stddev, commit, device, ...)");
  app.add_flag("--no-warmup", a->no_warmup, "Skip the warm-up run");
  app.footer(
      "ppN: N random token ids in one forward call from an empty context; tgN: N tokens decoded one at a\n"
      "time from an empty context (as llama-bench). ttft ms: the median time of the ppN call, which ends with\n"
      "the last token's logits on the host (time to first token). Append --json output to\n"
      "bench/results/<backend>.jsonl.");
  return [a] { return run(*a); };
}

}  // namespace

DS_COMMAND("bench", "Measure prompt processing and generation speed (llama-bench style)", setup);
