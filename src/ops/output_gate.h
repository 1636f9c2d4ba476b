// Sigmoid output gate of the gated attention (qwen35-spec.md §5), in place, fp32:
//   x[t, h*hd + j] *= sigmoid(gate[t*gate_token_stride + h*gate_head_stride + j])
// x [n_tokens, n_head*hd] packed (the concatenated head outputs, before o_proj). The gate is read where the
// q projection left it: per head [q(hd) | gate(hd)], i.e. gate = Qf + hd, token stride 2*nh*hd, head stride 2*hd.
// Call: ds::cpu::output_gate(p, x, gate) (src/cpu/cpu.h); ds::cuda:: takes the same params and device pointers.
#pragma once
#include <cstdint>

namespace ds::ops {

struct OutputGateParams {
  int64_t n_tokens = 0;
  int64_t n_head = 0;
  int64_t head_dim = 0;
  int64_t gate_token_stride = 0;
  int64_t gate_head_stride = 0;
};

}  // namespace ds::ops
