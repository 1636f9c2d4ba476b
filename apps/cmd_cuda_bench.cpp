// `deltaserve cuda-bench`: decode speed of the CUDA model (tgN: N decode steps of B sequences, each step a
// CUDA graph replay with its logits downloaded to pinned host memory, or with --select K the server's path: each
// row's K best selected on the device, no logits download), optional prefill speed, and with --breakdown a
// per-kernel table of one decode step (CUDA events around every op, launched op by op): time, bytes the op must
// move, GB/s, share of the step. Results also go out as JSON lines (--json).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend_options.h"
#include "command.h"
#include "option_checks.h"
#include "model/qwen35.h"
#if DS_HAVE_CUDA
#include "cuda/model/qwen35_cuda.cuh"
#endif

namespace {

struct Options {
  std::string model, json, dump_logits;
  int prompt = 0, tg = 128, batch = 1, reps = 3, top = 30;
  int ctx = 0;      // > 0: each state's max_ctx (the server's --ctx: attention splits follow it), else prompt + tg + 16
  int select = -1;  // >= 0: decode through decode_select with this k (the server's path), no logits download
  bool breakdown = false, no_graphs = false, precise = false, kv_f16 = false, state_f16 = false;
};

#if DS_HAVE_CUDA
using Clock = std::chrono::steady_clock;
double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void print_breakdown(const std::vector<ds::cuda::KernelTiming>& ops, double step_ms, int top, nlohmann::json& j) {
  double total_ms = 0, total_bytes = 0;
  std::map<std::string, std::pair<int, std::pair<double, double>>> by_kind;  // kind -> n, (ms, bytes)
  std::map<std::string, double> kind_flops;  // matrix products: 2·B·rows·cols summed
  for (const auto& o : ops) {
    total_ms += o.ms;
    total_bytes += o.bytes;
    auto& k = by_kind[o.kind];
    k.first++;
    k.second.first += o.ms;
    k.second.second += o.bytes;
    kind_flops[o.kind] += o.flops;
  }
  // effective TFLOP/s (2·B·rows·cols per second; a batched product's tensor work is a multiple of it)
  auto tflops = [](double flops, double ms) { return flops > 0 ? flops / (ms * 1e-3) / 1e12 : 0.0; };
  std::printf("\nper-kernel breakdown of one decode step (%zu ops launched one by one with events; sum %.3f ms, "
              "graph step %.3f ms)\n", ops.size(), total_ms, step_ms);
  std::printf("%-28s %5s %10s %12s %9s %7s %8s\n", "kind", "ops", "time us", "bytes", "GB/s", "share", "TFLOP/s");
  std::vector<std::pair<std::string, std::pair<int, std::pair<double, double>>>> kinds(by_kind.begin(), by_kind.end());
  std::sort(kinds.begin(), kinds.end(), [](auto& a, auto& b) { return a.second.second.first > b.second.second.first; });
  for (auto& [kind, v] : kinds) {
    const double ms = v.second.first, bytes = v.second.second;
    const double tf = tflops(kind_flops[kind], ms);
    std::printf("%-28s %5d %10.1f %12.0f %9.1f %6.1f%%", kind.c_str(), v.first, ms * 1e3, bytes,
                bytes / (ms * 1e-3) / 1e9, 100 * ms / total_ms);
    if (tf > 0) std::printf(" %8.1f", tf);
    std::printf("\n");
    j["kinds"].push_back({{"kind", kind}, {"ops", v.first}, {"us", ms * 1e3}, {"bytes", bytes},
                          {"gbps", bytes / (ms * 1e-3) / 1e9}, {"tflops", tf}});
  }
  std::printf("%-28s %5zu %10.1f %12.0f %9.1f\n", "total", ops.size(), total_ms * 1e3, total_bytes,
              total_bytes / (total_ms * 1e-3) / 1e9);
  std::vector<const ds::cuda::KernelTiming*> sorted;
  for (const auto& o : ops) sorted.push_back(&o);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->ms > b->ms; });
  std::printf("\nslowest %d ops\n%-56s %-22s %9s %12s %9s %8s\n", top, "op", "kind", "time us", "bytes", "GB/s",
              "TFLOP/s");
  for (int i = 0; i < top && i < (int)sorted.size(); i++) {
    const auto& o = *sorted[i];
    std::printf("%-56s %-22s %9.1f %12.0f %9.1f", o.name.substr(0, 56).c_str(), o.kind.c_str(), o.ms * 1e3, o.bytes,
                o.bytes / (o.ms * 1e-3) / 1e9);
    if (o.flops > 0) std::printf(" %8.1f", tflops(o.flops, o.ms));
    std::printf("\n");
  }
  for (const auto& o : ops)
    j["ops"].push_back({{"op", o.name}, {"kind", o.kind}, {"us", o.ms * 1e3}, {"bytes", o.bytes}, {"flops", o.flops}});
}

int run(const Options& o) {
  auto m = ds::Qwen35Model::load_file(o.model);
  if (!m) {
    spdlog::error("{}", m.error().message);
    return 1;
  }
  ds::cuda::CudaModelOptions mo;
  mo.use_graphs = !o.no_graphs;
  mo.precision = o.precise ? ds::cuda::Precision::kPrecise : ds::cuda::Precision::kFast;
  mo.kv_f16 = o.kv_f16;
  mo.state_f16 = o.state_f16;
  auto cm = ds::cuda::CudaModel::load(*m, mo);
  if (!cm) {
    spdlog::error("{}", cm.error().message);
    return 1;
  }
  auto& M = **cm;
  const auto dev = ds::cuda::device_info();
  const auto bw = ds::cuda::copy_bandwidth(size_t(1) << 30);
  const double ceiling_bw = bw ? *bw : 0;
  spdlog::info("cuda-bench: {} on {}: {:.3f} GB of weights on the device; copy bandwidth {:.0f} GB/s",
               o.model, dev ? dev->name : "?", M.weight_bytes() / 1e9, ceiling_bw / 1e9);
  const int64_t V = M.cfg().n_vocab, max_ctx = o.ctx > 0 ? o.ctx : o.prompt + o.tg + 16;
  if (max_ctx < o.prompt + o.tg + 7) {  // + the digest's step and the breakdown's 5 profiled steps
    spdlog::error("cuda-bench: --ctx {} is below prompt + tg + 7 = {}", max_ctx, o.prompt + o.tg + 7);
    return 1;
  }
  std::vector<std::unique_ptr<ds::cuda::CudaSeqState>> states;
  std::vector<ds::cuda::CudaSeqState*> ptrs;
  for (int b = 0; b < o.batch; b++) {
    auto s = M.create_state(max_ctx);
    if (!s) {
      spdlog::error("{}", s.error().message);
      return 1;
    }
    ptrs.push_back(s->get());
    states.push_back(std::move(*s));
  }
  std::vector<int32_t> prompt(o.prompt);
  for (int i = 0; i < o.prompt; i++) prompt[i] = (int32_t)((7 * i + 1) % V);
  nlohmann::json out = {{"model", o.model}, {"gpu", dev ? dev->name : "?"}, {"batch", o.batch}, {"max_ctx", max_ctx},
                        {"weight_bytes", M.weight_bytes()}, {"copy_gbps", ceiling_bw / 1e9}};
  std::vector<double> pp_s, tg_s;
  uint64_t sel_digest = 1469598103934665603ull;  // FNV-1a over the last rep's selected argmaxes (--select)
  auto fail = [](const ds::Status& s) {
    spdlog::error("{}", s.error().message);
    return 1;
  };
  for (int rep = 0; rep < o.reps + 1; rep++) {  // rep 0 warms up (graph capture, caches)
    for (auto* s : ptrs)
      if (auto st = s->reset(); !st) return fail(st);
    auto t0 = Clock::now();
    if (o.prompt > 0)
      for (auto* s : ptrs)
        if (auto st = M.prefill(*s, prompt, nullptr, false); !st) return fail(st);
    auto t1 = Clock::now();
    std::vector<int32_t> toks(o.batch);
    for (int i = 0; i < o.tg; i++) {
      for (int b = 0; b < o.batch; b++) toks[b] = (int32_t)((13 * i + 5 * b + 3) % V);
      if (o.select >= 0) {
        ds::cuda::SelectResultDev sel;
        if (auto st = M.decode_select(ptrs, toks, o.select, false, {}, nullptr, sel); !st) return fail(st);
        if (rep == o.reps)
          for (int b = 0; b < o.batch; b++)
            for (int k = 0; k < 4; k++)
              sel_digest = (sel_digest ^ (((uint32_t)sel.argmax[b] >> (8 * k)) & 0xFFu)) * 1099511628211ull;
      } else if (auto st = M.decode(ptrs, toks, nullptr); !st) {
        return fail(st);
      }
    }
    auto t2 = Clock::now();
    if (rep == 0) continue;
    if (o.prompt > 0) pp_s.push_back(secs(t0, t1));
    tg_s.push_back(secs(t1, t2));
  }
  const double tg = median(tg_s), step_ms = tg / o.tg * 1e3;
  const double tok_s = o.batch * o.tg / tg;
  const std::string how = o.select >= 0 ? fmt::format("selection of the {} best per row on the device", o.select)
                                        : std::string("logits downloaded");
  std::printf("decode tg%d, batch %d: %.1f tok/s (%.3f ms per step, median of %d; %s%s%s)\n", o.tg, o.batch, tok_s,
              step_ms, o.reps, how.c_str(), M.kv_f16() ? "; f16 K / V caches" : "",
              M.state_f16() ? "; f16 GDN states" : "");
  if (o.select >= 0) {  // the argmaxes of the last rep's steps: the same with and without the certified head (cg38)
    out["select_k"] = o.select;
    out["argmax_digest"] = fmt::format("{:016x}", sel_digest);
    std::printf("selected argmax digest %016llx\n", (unsigned long long)sel_digest);
  }
  out["tg"] = o.tg;
  out["kv"] = M.kv_f16() ? "f16" : "f32";
  out["state"] = M.state_f16() ? "f16" : "f32";
  out["tok_s"] = tok_s;
  out["ms_per_step"] = step_ms;
  if (o.prompt > 0) {
    const double pp = median(pp_s);
    std::printf("prefill pp%d (%s): %.1f tok/s (x%d sequences)\n", o.prompt, ds::cuda::precision_name(mo.precision),
                o.batch * o.prompt / pp, o.batch);
    out["pp"] = o.prompt;
    out["mode"] = ds::cuda::precision_name(mo.precision);
    out["pp_tok_s"] = o.batch * o.prompt / pp;
  }
  {  // one more step with its logits downloaded: a digest of their bits, to compare settings that should not move them
    std::vector<int32_t> toks(o.batch, 2);
    std::vector<float> logits((size_t)o.batch * V);
    if (auto st = M.decode(ptrs, toks, logits.data()); !st) return fail(st);
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the float bits
    int64_t nonfinite = 0;  // all-NaN logits have one digest whatever the setting (session 26): counted and shown
    for (float f : logits) {
      uint32_t u;
      std::memcpy(&u, &f, 4);
      for (int k = 0; k < 4; k++) h = (h ^ ((u >> (8 * k)) & 0xFFu)) * 1099511628211ull;
      nonfinite += !std::isfinite(f);
    }
    std::printf("logits digest after the timed steps: %016llx (%d x %lld floats%s)\n", (unsigned long long)h, o.batch,
                (long long)V,
                nonfinite ? fmt::format("; {} NOT FINITE: the digest compares nothing", nonfinite).c_str() : "");
    out["logits_digest"] = fmt::format("{:016x}", h);
    out["logits_nonfinite"] = nonfinite;
    if (!o.dump_logits.empty()) {  // raw float32, batch rows of V: to measure an approximate setting's error offline
      std::ofstream f(o.dump_logits, std::ios::binary);
      f.write(reinterpret_cast<const char*>(logits.data()), (std::streamsize)(logits.size() * sizeof(float)));
      if (!f) {
        spdlog::error("cuda-bench: could not write --dump-logits {}", o.dump_logits);
        return 1;
      }
    }
  }
  if (o.breakdown) {
    std::vector<int32_t> toks(o.batch, 1);
    std::vector<ds::cuda::KernelTiming> best;
    double best_ms = 1e30;
    for (int i = 0; i < 5; i++) {  // the fastest of a few profiled steps (the states have room: max_ctx slack)
      auto p = M.profile_decode(ptrs, toks, nullptr);
      if (!p) {
        spdlog::error("{}", p.error().message);
        return 1;
      }
      double ms = 0;
      for (auto& k : *p) ms += k.ms;
      if (ms < best_ms) best_ms = ms, best = std::move(*p);
    }
    double bytes = 0;
    for (auto& k : best) bytes += k.bytes;
    out["step_bytes"] = bytes;
    if (ceiling_bw > 0) {
      const double ceil_tok_s = o.batch * ceiling_bw / bytes;
      std::printf("bytes per step %.3f GB: ceiling at copy bandwidth %.0f tok/s; this run %.1f%% of it\n", bytes / 1e9,
                  ceil_tok_s, 100 * tok_s / ceil_tok_s);
      out["ceiling_tok_s"] = ceil_tok_s;
    }
    print_breakdown(best, step_ms, o.top, out);
  }
  if (!o.json.empty()) {
    std::ofstream f(o.json, std::ios::app);
    f << out.dump() << "\n";
  }
  return 0;
}
#else
int run(const Options&) {
  spdlog::error("cuda-bench: this deltaserve was built without CUDA; rebuild with nvcc available");
  return 1;
}
#endif

ds::app::RunFn setup(CLI::App& app) {
  auto o = std::make_shared<Options>();
  app.add_option("-m,--model", o->model, "Qwen3.5 GGUF file (e.g. from `deltaserve synth`)")->required();
  // bench's names (-p/--n-prompt, -n/--n-gen, -r/--repetitions) work here too; the GPU scripts use the others.
  app.add_option("-p,--prompt,--n-prompt", o->prompt, "prefill this many tokens per sequence first (and time it)")
      ->check(ds::app::int_in(0))->capture_default_str();
  app.add_option("-n,--tg,--n-gen", o->tg, "decode steps to time")->check(ds::app::int_in(1))->capture_default_str();
  app.add_option("--ctx", o->ctx,
                 "positions per sequence state (default prompt + tg + 16); the decode attention's position splits "
                 "follow it, so --ctx 1024 times the server's step (`serve --ctx 1024`)")
      ->check(ds::app::int_in(0));
  app.add_option("--batch", o->batch, "sequences decoded together (1..64)")->check(CLI::Range(1, 64))->capture_default_str();
  app.add_option("-r,--reps,--repetitions", o->reps, "timed repetitions after one warm-up (the median is reported)")
      ->check(ds::app::int_in(1))->capture_default_str();
  app.add_option("--select", o->select,
                 "decode as the server does: the K best candidates per row selected on the device, no logits "
                 "download (0: argmax only; default: download every row's logits)")
      ->check(CLI::Range(0, 64));
  app.add_flag("--breakdown", o->breakdown, "per-kernel table of one decode step: time, bytes, GB/s");
  app.add_option("--top", o->top, "slowest ops listed in the breakdown")->capture_default_str();
  app.add_flag("--precise", o->precise, "prefill in fp32 everywhere instead of the default fast mode");
  app.add_flag("--kv-f16", o->kv_f16, ds::app::kKvF16Help);
  app.add_flag("--state-f16", o->state_f16, ds::app::kStateF16Help);
  app.add_flag("--no-graphs", o->no_graphs, "launch the decode steps op by op instead of replaying CUDA graphs");
  app.add_option("--json", o->json, "append the results as one JSON line to this file");
  app.add_option("--dump-logits", o->dump_logits,
                 "write the digest step's logits (float32, batch rows of the vocabulary) to this file, to compare "
                 "settings offline");
  return [o] { return run(*o); };
}

}  // namespace

DS_COMMAND("cuda-bench", "Decode (and prefill) speed of the CUDA model, with a per-kernel breakdown of one step",
           setup);
