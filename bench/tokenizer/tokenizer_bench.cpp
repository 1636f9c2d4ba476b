// Tokenizer speed on the real Qwen3 vocabulary (151,936 ids): encoding 1 MiB of mixed text
// (English prose, code, CJK, Cyrillic, numbers, emoji; random words so pieces vary), with a warm
// piece cache and from a fresh tokenizer (cold cache), decoding, streaming, and loading the GGUF.
// Run: build/bench/tokenizer/bench_tokenizer [--benchmark_filter=Encode]
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <stdexcept>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace {

using ds::tokenizer::Tokenizer;

std::string vocab_path() {
  static std::string path = [] {
    const char* env = std::getenv("DS_FIXTURES");
    std::string fixtures = env ? env : DS_FIXTURES_DIR;
    auto dir = std::filesystem::temp_directory_path() / fmt::format("deltaserve-bench-{}", getpid());
    std::filesystem::create_directories(dir);
    std::string out = (dir / "vocab-qwen3.gguf").string();
    std::string cmd = fmt::format("xz -dkc '{}/tokenizer/vocab-qwen3.gguf.xz' > '{}'", fixtures, out);
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
    std::atexit([] { std::filesystem::remove_all(std::filesystem::path(vocab_path()).parent_path()); });
    return out;
  }();
  return path;
}

std::unique_ptr<Tokenizer> load() {
  auto f = ds::gguf::File::open(vocab_path());
  if (!f.ok()) throw std::runtime_error(f.error().message);
  auto t = Tokenizer::from_gguf(*f);
  if (!t.ok()) throw std::runtime_error(t.error().message);
  return std::make_unique<Tokenizer>(std::move(t).value());
}

const Tokenizer& shared() {
  static std::unique_ptr<Tokenizer> t = load();
  return *t;
}

// Deterministic mixed text of `bytes` bytes (cut at a character boundary).
std::string mixed_text(size_t bytes) {
  static const char* words[] = {"the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with",
                                "be", "by", "on", "not", "he", "I", "this", "are", "or", "his", "from", "at",
                                "which", "but", "have", "an", "had", "they", "you", "were", "their", "one",
                                "all", "we", "can", "her", "has", "there", "been", "if", "more", "when", "will",
                                "would", "who", "so", "no", "model", "token", "attention", "memory", "layer"};
  static const char* code[] = {"for (int i = 0; i < n; ++i) {\n", "    return x;\n", "}\n", "def f(a, b):\n",
                               "    if a is None:\n", "        raise ValueError('bad')\n", "#include <vector>\n",
                               "const auto& v = m.at(key);\n", "\t\tself.weight = nn.Parameter(w)\n"};
  std::mt19937 rng(42);
  std::string s;
  while (s.size() < bytes) {
    switch (rng() % 10) {
      case 0: case 1: case 2: case 3: {  // prose
        for (int i = 0; i < 12; i++) {
          s += ' ';
          s += words[rng() % std::size(words)];
        }
        s += (rng() % 2) ? ".\n" : ", ";
        break;
      }
      case 4: case 5: {  // code with random identifiers
        s += code[rng() % std::size(code)];
        s += fmt::format("    var_{} = compute({});\n", rng() % 100000, rng() % 1000);
        break;
      }
      case 6: {  // CJK
        for (int i = 0; i < 20; i++) ds::tokenizer::append_utf8(0x4E00 + rng() % 3000, s);
        s += "\u3002";
        break;
      }
      case 7: {  // Cyrillic words
        for (int w = 0; w < 6; w++) {
          s += ' ';
          for (int i = 0; i < 2 + (int)(rng() % 7); i++) ds::tokenizer::append_utf8(0x430 + rng() % 32, s);
        }
        break;
      }
      case 8:  // numbers
        s += fmt::format(" {}.{} ", rng(), rng() % 100);
        break;
      default: {  // emoji, accents, combining marks
        ds::tokenizer::append_utf8(0x1F600 + rng() % 80, s);
        s += " caf\u00e9 na\u0131ve e\u0301 ";
        break;
      }
    }
  }
  while (s.size() > bytes) s.pop_back();
  while (!s.empty() && ds::tokenizer::find_invalid_utf8(s)) s.pop_back();
  return s;
}

const std::string& text_1mb() {
  static std::string t = mixed_text(1 << 20);
  return t;
}

void BM_EncodeMixed1MiB(benchmark::State& state) {
  const Tokenizer& t = shared();
  const std::string& text = text_1mb();
  size_t n = 0;
  for (auto _ : state) {
    auto ids = t.encode(text, false);
    n = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed((int64_t)(state.iterations() * text.size()));
  state.counters["tokens"] = (double)n;
}
BENCHMARK(BM_EncodeMixed1MiB)->Unit(benchmark::kMillisecond);

void BM_EncodeMixed1MiBColdCache(benchmark::State& state) {
  const std::string& text = text_1mb();
  for (auto _ : state) {
    state.PauseTiming();
    auto t = load();  // fresh tokenizer: empty piece cache
    state.ResumeTiming();
    auto ids = t->encode(text, false);
    benchmark::DoNotOptimize(ids.data());
    state.PauseTiming();
    t.reset();
    state.ResumeTiming();
  }
  state.SetBytesProcessed((int64_t)(state.iterations() * text.size()));
}
BENCHMARK(BM_EncodeMixed1MiBColdCache)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_Decode1MiB(benchmark::State& state) {
  const Tokenizer& t = shared();
  auto ids = t.encode(text_1mb(), false);
  for (auto _ : state) {
    std::string s = t.decode(ids);
    benchmark::DoNotOptimize(s.data());
  }
  state.SetItemsProcessed((int64_t)(state.iterations() * ids.size()));
}
BENCHMARK(BM_Decode1MiB)->Unit(benchmark::kMillisecond);

void BM_StreamDecodePerToken(benchmark::State& state) {
  const Tokenizer& t = shared();
  auto ids = t.encode(text_1mb().substr(0, 1 << 16), false);
  for (auto _ : state) {
    ds::tokenizer::StreamDecoder sd(t);
    size_t total = 0;
    for (int32_t id : ids) total += sd.feed(id).size();
    total += sd.flush().size();
    benchmark::DoNotOptimize(total);
  }
  state.SetItemsProcessed((int64_t)(state.iterations() * ids.size()));
}
BENCHMARK(BM_StreamDecodePerToken)->Unit(benchmark::kMicrosecond);

void BM_LoadFromGguf(benchmark::State& state) {
  vocab_path();
  for (auto _ : state) {
    auto t = load();
    benchmark::DoNotOptimize(t.get());
  }
}
BENCHMARK(BM_LoadFromGguf)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
