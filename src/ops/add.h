// Elementwise sum for the residual connections (qwen35-spec.md §1.2): y[i] = a[i] + b[i], i in [0, n).
// fp32, packed; y may equal a or b.
// Call: ds::cpu::add(p, a, b, y) (src/cpu/cpu.h); ds::cuda:: takes the same params and device pointers.
#pragma once
#include <cstdint>

namespace ds::ops {

struct AddParams {
  int64_t n = 0;
};

}  // namespace ds::ops
