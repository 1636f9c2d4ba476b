// Checks of option values that several subcommands share, so that one kind of bad value gets one kind of
// message everywhere: the option, what is allowed, what was given, and (where it helps) how to fix it.
// Why not CLI11's PositiveNumber / NonNegativeNumber: their message reads "Value 0 not in range 0.000000 to
// 1797...(309 digits).000000". Why a bound on threads: OpenMP crashed (SIGSEGV) on --threads 100000.
#pragma once
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <charconv>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

#include "core/error.h"
#include "engine/backend_factory.h"
#include "engine/cuda_backend.h"
#include "model/qwen35.h"

namespace ds::app {

inline constexpr int kMaxThreads = 1024;

// How --help shows a bound: CLI11 prints TYPE:DESC=DEFAULT, so ">= 0" would read "FLOAT:>= 0=0.7".
inline std::string bound_desc(double lo, bool lo_open) {
  if (lo == 0) return lo_open ? "POSITIVE" : "NONNEGATIVE";
  if (lo == 1 && !lo_open) return "POSITIVE";
  return fmt::format("{} {:g}", lo_open ? ">" : ">=", lo);
}

// An integer in [lo, hi] (no upper bound when hi is LLONG_MAX).
inline CLI::Validator int_in(long long lo, long long hi = LLONG_MAX) {
  const std::string range = hi == LLONG_MAX ? fmt::format(">= {}", lo) : fmt::format("in [{}, {}]", lo, hi);
  const std::string desc = hi == LLONG_MAX ? bound_desc((double)lo, false) : fmt::format("[{}, {}]", lo, hi);
  return CLI::Validator(
      [lo, hi, range](std::string& s) -> std::string {
        long long v = 0;
        const char* end = s.data() + s.size();
        auto [p, ec] = std::from_chars(s.data(), end, v);
        if (ec == std::errc() && p == end && v >= lo && v <= hi) return "";
        return fmt::format("must be an integer {}, got '{}'", range, s);
      },
      desc);
}

// A number in [lo, hi], or in (lo, hi] when lo_open (a value that must stay above lo, e.g. a divisor); no
// upper bound when hi is infinite.
inline CLI::Validator real_in(double lo, double hi = HUGE_VAL, bool lo_open = false) {
  const std::string range = hi == HUGE_VAL ? fmt::format("{} {:g}", lo_open ? ">" : ">=", lo)
                                           : fmt::format("in {}{:g}, {:g}]", lo_open ? "(" : "[", lo, hi);
  const std::string desc = hi == HUGE_VAL ? bound_desc(lo, lo_open) : range.substr(3);
  return CLI::Validator(
      [lo, hi, lo_open, range](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        const bool above_lo = lo_open ? v > lo : v >= lo;
        if (!s.empty() && end == s.c_str() + s.size() && above_lo && v <= hi) return "";
        return fmt::format("must be a number {}, got '{}'", range, s);
      },
      desc);
}

// --threads (and the names given): CPU threads, 0 = all cores.
inline CLI::Option* add_threads_option(CLI::App& app, int& threads, const std::string& names = "--threads") {
  return app.add_option(names, threads, fmt::format("CPU threads (0: all cores, the default; at most {})", kMaxThreads))
      ->check(int_in(0, kMaxThreads));
}

// Whether --backend BACKEND runs on the GPU. An Error naming the cause and the fix when it names an
// unknown backend, or cuda where it cannot run (a build without CUDA, or no GPU visible).
inline Result<bool> use_cuda(std::string_view cmd, const std::string& backend) {
  auto kind = engine::resolve_backend_kind(backend);
  if (!kind) return err("{}: {}", cmd, kind.error().message);
  if (*kind != "cuda") return false;
  if (engine::cuda_backend_available()) return true;
#if DS_HAVE_CUDA
  return err("{}: --backend cuda: no CUDA device is visible (no GPU, or no driver); use --backend cpu", cmd);
#else
  return err("{}: --backend cuda: this deltaserve was built without CUDA (rebuild on a machine where nvcc is found: "
             "bash scripts/build.sh); use --backend cpu",
             cmd);
#endif
}

// --ctx against the positions the model was trained for (its context_length; a sequence state refuses more).
inline Status check_ctx(std::string_view cmd, int64_t ctx, int64_t n_ctx_train, const std::string& model) {
  if (n_ctx_train > 0 && ctx > n_ctx_train)
    return err("{}: --ctx {} is beyond the {} positions {} was trained for (its context_length); use --ctx {} or less",
               cmd, ctx, n_ctx_train, model, n_ctx_train);
  return {};
}

// MemAvailable of /proc/meminfo in bytes; 0 when unknown.
inline uint64_t memory_available() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  while (f >> key >> kib)
    if (key == "MemAvailable:") return kib << 10;
    else f.ignore(64, '\n');
  return 0;
}

// The cpu backend zero-fills each sequence's state at full context when it starts: more than the machine
// has ended in an OOM kill, with no message, instead of an error. One sequence's bytes are measured on
// states of 1 and 2 positions. `what` names the sizes (e.g. "64 slots (--parallel) x 8192 tokens (--ctx)"),
// `fix` the options to lower.
inline Status check_state_fits(std::string_view cmd, const Qwen35Config& c, int64_t n_seqs, int64_t ctx,
                               std::string_view what, std::string_view fix) {
  DS_ASSIGN(auto one, SequenceState::create(c, 1));
  DS_ASSIGN(auto two, SequenceState::create(c, 2));
  const double need = (double)n_seqs * (one.bytes() + (double)(two.bytes() - one.bytes()) * (ctx - 1));
  const uint64_t available = memory_available();
  if (available > 0 && need > (double)available)
    return err("{}: {} need {:.1f} GiB of sequence state on the cpu backend, but {:.1f} GiB of memory is "
               "available; lower {}",
               cmd, what, need / (1 << 30), available / double(1 << 30), fix);
  return {};
}

}  // namespace ds::app
