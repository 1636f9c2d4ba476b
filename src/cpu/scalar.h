// Scalar activations shared by the CPU references, in the forms the references (HF, fp32) use.
#pragma once
#include <cmath>

namespace ds::cpu {

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// torch F.softplus (beta 1, threshold 20): log1p keeps small outputs exact.
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

}  // namespace ds::cpu
