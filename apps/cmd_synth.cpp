// deltaserve synth: writes a random-weight Qwen3.5 GGUF with the real shapes of a released size
// (src/synth/synth.h), loadable by llama.cpp and deltaserve alike; for speed measurements and demos.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "command.h"
#include "option_checks.h"
#include "core/log.h"
#include "synth/synth.h"

namespace {

struct SynthArgs {
  std::string size = "tiny";
  std::string type = "Q8_0";
  std::string vocab;
  bool mtp = false;
  uint64_t seed = 42;
  int threads = 0;
  std::string out;
  bool plan = false;
};

int run_synth(const SynthArgs& a) {
  using namespace ds::synth;
  auto mix = parse_mix(a.type);
  if (!mix.ok()) {
    spdlog::error("{}", mix.error().message);
    return 2;
  }
  Options o;
  o.size = a.size;
  o.mix = *mix;
  o.vocab_path = a.vocab;
  o.mtp = a.mtp;
  o.seed = a.seed;
  o.threads = a.threads;
  o.out = a.out;
  auto prep = prepare(o);
  if (!prep.ok()) {
    spdlog::error("{}", prep.error().message);
    return 1;
  }
  const Prepared& p = *prep;
  if (a.plan) {
    // The tensor list on stdout: name, type, shape, elements.
    for (const auto& t : p.plan) {
      std::string shape;
      for (size_t k = 0; k < t.ne.size(); k++) shape += (k ? ", " : "") + std::to_string(t.ne[k]);
      std::printf("%-40s %-5s [%s] %llu\n", t.name.c_str(), std::string(ds::ggml_type_name(t.type)).c_str(),
                  shape.c_str(), (unsigned long long)t.n_elements());
    }
    std::printf("tensors %zu  params %llu (%s)  file bytes %llu\n", p.plan.size(), (unsigned long long)p.n_params,
                size_label(p.n_params).c_str(), (unsigned long long)p.file_bytes);
    return 0;
  }
  if (a.out.empty()) {
    spdlog::error("synth: give the output file with -o OUT.gguf (or --plan to list the tensors only)");
    return 2;
  }
  // Refused before writing: the rename at the end would fail after writing the whole model (GBs).
  if (std::error_code ec; std::filesystem::is_directory(a.out, ec) || a.out.back() == '/') {
    spdlog::error("synth: -o '{}' is a folder; give a file name, e.g. -o {}/qwen35-{}.gguf", a.out,
                  a.out.back() == '/' ? a.out.substr(0, a.out.size() - 1) : a.out, a.size);
    return 2;
  }
  spdlog::info("synth: Qwen3.5-{} {} ({} tensors, {:.2f} M params = {}, {:.3f} GB{}) -> {}", p.shape.size,
               mix_name(o.mix), p.plan.size(), p.n_params / 1e6, size_label(p.n_params), p.file_bytes / 1e9,
               o.mtp ? ", with MTP block" : "", a.out);
  const bool tty = isatty(fileno(stderr));
  const auto t0 = std::chrono::steady_clock::now();
  auto last = t0;
  int last_pct = -1;
  auto progress = [&](uint64_t done, uint64_t total) {
    auto now = std::chrono::steady_clock::now();
    const double secs = std::chrono::duration<double>(now - t0).count();
    const int pct = total ? (int)(100.0 * done / total) : 100;
    // On a terminal: one line redrawn twice a second; in a log: a line every 10%.
    const bool show = tty ? (std::chrono::duration<double>(now - last).count() >= 0.5 || done == total)
                          : (pct / 10 != last_pct / 10 || done == total);
    if (!show || total < (256ull << 20)) return;  // small files: no progress lines
    last = now;
    last_pct = pct;
    std::fprintf(stderr, "%ssynth: %3d%%  %.2f / %.2f GB  %.0f MB/s%s", tty ? "\r" : "", pct, done / 1e9,
                 total / 1e9, secs > 0 ? done / 1e6 / secs : 0.0, tty ? "" : "\n");
    if (tty && done == total) std::fprintf(stderr, "\n");
  };
  auto st = write_model(o, progress);
  if (!st.ok()) {
    if (tty) std::fprintf(stderr, "\n");
    spdlog::error("{}", st.error().message);
    return 1;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("synth: wrote {} ({:.3f} GB in {:.1f} s)", a.out, p.file_bytes / 1e9, secs);
  return 0;
}

ds::app::RunFn setup(CLI::App& app) {
  auto a = std::make_shared<SynthArgs>();
  app.add_option("--size", a->size,
                 "Model size: 0.8B, 2B, 4B, 9B, 27B (the real Qwen3.5 shapes) or tiny (H 256, 4 layers, real "
                 "Gaussian weights, for demos and tests)")
      ->capture_default_str();
  app.add_option("--type", a->type,
                 "Weight types: Q4_K_M (llama-quantize's mix: Q4_K, Q6_K for the output matrix and some "
                 "attn_v/attn_qkv/ffn_down), Q3_K_M (Q3_K; Q4_K/Q5_K for attn_v/attn_qkv/ffn_down/attn_output, "
                 "Q6_K output), Q5_K_M (Q4_K_M's mix with Q5_K for Q4_K), Q8_0 or BF16 (every matrix). Norms and "
                 "SSM vectors are F32")
      ->capture_default_str();
  app.add_option("--vocab", a->vocab,
                 "Take the tokenizer (tokens, merges, special ids, chat template) from this GGUF, e.g. a "
                 "decompressed fixtures/tokenizer/vocab-qwen3.gguf.xz. Default: a small built-in byte-level BPE")
      ->check(CLI::ExistingFile);
  app.add_flag("--mtp", a->mtp, "Add the multi-token-prediction block (block_count = layers + 1)");
  app.add_option("--seed", a->seed, "Seed of the random weights (same seed, same file)")->capture_default_str();
  ds::app::add_threads_option(app, a->threads);
  app.add_option("-o,--output", a->out, "Output GGUF file (written to OUT.tmp, then renamed)");
  app.add_flag("--plan", a->plan, "Only list the tensors (name, type, shape), the parameter count and file size");
  app.footer(
      "Random weights with the real shapes, in the layout llama.cpp's converter and llama-quantize write\n"
      "(arch qwen35), so llama.cpp and deltaserve can be timed on the same file. The text such a model\n"
      "generates is gibberish. Big sizes hold random block bytes with every f16 scale = 2^-10.\n"
      "Example: deltaserve synth --size 0.8B --type Q4_K_M --vocab vocab-qwen3.gguf -o qwen35-0.8b.gguf");
  return [a] { return run_synth(*a); };
}

DS_COMMAND("synth", "Write a random-weight Qwen3.5 GGUF with the real shapes (for benchmarks and demos)", setup);

}  // namespace
