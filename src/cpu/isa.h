// Which vector instruction set the CPU fast paths (gemm.cpp, gdn_fast.cpp, attention_fast.cpp) use,
// chosen once at run time so that one binary runs on any x86-64: AVX-512F (+ AVX-512 BF16 for the
// approximate --fast products), else AVX2 + FMA, else plain C++ (the fast entry points then call the
// references). DS_CPU_ISA=scalar|avx2|avx512 in the environment caps the choice (debugging, timing);
// tests cap it with set_isa_cap to check every path on one machine.
#pragma once

namespace ds::cpu {

enum class Isa { Scalar = 0, Avx2 = 1, Avx512 = 2 };

// The instruction set in use: what the CPU supports, capped by DS_CPU_ISA and set_isa_cap.
Isa isa();
// True when the CPU also has AVX-512 BF16 (vdpbf16ps) and isa() is Avx512.
bool has_avx512_bf16();
// Caps isa() (tests); Isa::Avx512 restores what the CPU supports.
void set_isa_cap(Isa cap);
const char* isa_name(Isa i);

}  // namespace ds::cpu
