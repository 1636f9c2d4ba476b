// Shared by the model tests: the fixture models, their Hugging Face references, teacher-forced runs.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/qwen35.h"

namespace ds::test {

struct ModelRef {
  std::string name;                 // e.g. "tiny-sym-q8_0"
  std::string gguf;                 // path
  std::vector<int32_t> prompt;      // prompt_ids (T tokens)
  std::vector<int32_t> prefill_pos; // positions with a stored prefill row
  std::vector<int32_t> generated;   // greedy tokens
  int64_t vocab = 0;
  std::vector<float> prefill;       // [prefill_pos.size(), vocab]
  std::vector<float> decode;        // [generated.size() - 1, vocab]
};

// The five fixture files: tiny-sym bf16/q8_0/q4_k_m/iq4_xs and tiny-gqa q4_k_m.
std::vector<std::string> fixture_model_names();
// Reads <name>.gguf path and its .ref.json / .ref.prefill.f32 / .ref.decode.f32.
ModelRef load_model_ref(const std::string& name);

// Teacher forcing: prompt as one prefill (all logits), then generated[:-1] one token at a time.
// Returns logits of every position, [prompt + generated - 1, vocab].
std::vector<float> teacher_forced_logits(const Qwen35Model& m, const ModelRef& r,
                                         CpuPath path = CpuPath::kFast);

// Per-file comparison of logits rows against the reference: the largest |dlogit| seen, and the argmax
// checked (a test failure naming `where` when it differs) on rows whose reference top-1 margin exceeds
// `margin` (fixtures/README.md: 1e-2 for the fp32 paths).
struct RowStats {
  double max_abs = 0;
  int argmax_checked = 0, argmax_bad = 0;
  double margin = 1e-2;
};
void compare_row(const float* got, const float* ref, int64_t V, RowStats& s, const std::string& where);

}  // namespace ds::test
