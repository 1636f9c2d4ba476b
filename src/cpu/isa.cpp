// Run-time instruction set choice (isa.h). __builtin_cpu_supports also checks that the OS saves the
// vector registers (XCR0), so a feature reported here is usable.
#include "cpu/isa.h"

#include "cpu/simd.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace ds::cpu {
namespace {

Isa detect() {
#if defined(__x86_64__) && defined(__GNUC__)
  Isa best = Isa::Scalar;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
    best = Isa::Avx2;
  if (best == Isa::Avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    best = Isa::Avx512;
  if (const char* e = std::getenv("DS_CPU_ISA")) {
    Isa cap = Isa::Avx512;
    if (!std::strcmp(e, "scalar")) cap = Isa::Scalar;
    if (!std::strcmp(e, "avx2")) cap = Isa::Avx2;
    if ((int)cap < (int)best) best = cap;
  }
  return best;
#else
  return Isa::Scalar;
#endif
}

bool detect_bf16() {
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

std::atomic<int> g_cap{(int)Isa::Avx512};

}  // namespace

Isa isa() {
  static const Isa cpu = detect();
  const int cap = g_cap.load(std::memory_order_relaxed);
  return (int)cpu < cap ? cpu : (Isa)cap;
}

bool has_avx512_bf16() {
  static const bool bf16 = detect_bf16();
  return bf16 && isa() == Isa::Avx512;
}

void set_isa_cap(Isa cap) { g_cap.store((int)cap, std::memory_order_relaxed); }

const VecOps* vec_ops() {
  switch (isa()) {
    case Isa::Avx512: return vec_ops_avx512();
    case Isa::Avx2: return vec_ops_avx2();
    default: return nullptr;
  }
}

const char* isa_name(Isa i) {
  switch (i) {
    case Isa::Avx512: return "avx512";
    case Isa::Avx2: return "avx2";
    default: return "scalar";
  }
}

}  // namespace ds::cpu
