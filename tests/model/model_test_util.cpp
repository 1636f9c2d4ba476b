#include "model_test_util.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include "testutil.h"

namespace ds::test {

std::vector<std::string> fixture_model_names() {
  return {"tiny-sym-bf16", "tiny-sym-q8_0", "tiny-sym-q4_k_m", "tiny-sym-iq4_xs", "tiny-gqa-q4_k_m"};
}

static std::vector<float> read_f32(const std::string& path) {
  auto raw = read_file(path);
  std::vector<float> v(raw.size() / 4);
  std::memcpy(v.data(), raw.data(), v.size() * 4);
  return v;
}

ModelRef load_model_ref(const std::string& name) {
  ModelRef r;
  r.name = name;
  const std::string model = name.substr(0, name.find('-', 5));  // "tiny-sym" / "tiny-gqa"
  const std::string base = fixture("models/" + model + "/" + name);
  r.gguf = base + ".gguf";
  std::ifstream f(base + ".ref.json");
  if (!f) {
    ADD_FAILURE() << "missing " << base << ".ref.json";
    return r;
  }
  const auto j = nlohmann::json::parse(f);
  r.prompt = j["prompt_ids"].get<std::vector<int32_t>>();
  r.prefill_pos = j["prefill_positions"].get<std::vector<int32_t>>();
  r.generated = j["generated"].get<std::vector<int32_t>>();
  r.vocab = j["vocab"].get<int64_t>();
  r.prefill = read_f32(base + ".ref.prefill.f32");
  r.decode = read_f32(base + ".ref.decode.f32");
  EXPECT_EQ(r.prefill.size(), r.prefill_pos.size() * r.vocab) << name;
  EXPECT_EQ(r.decode.size(), (r.generated.size() - 1) * r.vocab) << name;
  return r;
}

std::vector<float> teacher_forced_logits(const Qwen35Model& m, const ModelRef& r, CpuPath path) {
  const int64_t T = (int64_t)r.prompt.size(), G = (int64_t)r.generated.size() - 1, V = m.cfg.n_vocab;
  std::vector<float> out((T + G) * V);
  auto st = SequenceState::create(m.cfg, T + G);
  EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
  if (!st.ok()) return {};
  auto s = forward(m, *st, r.prompt, out.data(), true, {}, path);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  for (int64_t i = 0; i < G && s.ok(); i++) {
    s = forward(m, *st, std::span<const int32_t>(&r.generated[i], 1), out.data() + (T + i) * V, false, {}, path);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  }
  return out;
}

void compare_row(const float* got, const float* ref, int64_t V, RowStats& s, const std::string& where) {
  int64_t am_got = 0, am_ref = 0;
  for (int64_t v = 0; v < V; v++) {
    const double d = std::fabs((double)got[v] - ref[v]);
    if (!(d <= s.max_abs)) s.max_abs = std::isnan(d) ? INFINITY : d;
    if (got[v] > got[am_got]) am_got = v;
    if (ref[v] > ref[am_ref]) am_ref = v;
  }
  float second = -INFINITY;
  for (int64_t v = 0; v < V; v++)
    if (v != am_ref) second = std::max(second, ref[v]);
  if (ref[am_ref] - second > s.margin) {
    s.argmax_checked++;
    if (am_got != am_ref) {
      s.argmax_bad++;
      ADD_FAILURE() << where << ": argmax " << am_got << ", reference " << am_ref << " (margin "
                    << ref[am_ref] - second << ")";
    }
  }
}

}  // namespace ds::test
