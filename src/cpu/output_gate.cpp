#include "cpu/cpu.h"
#include "cpu/scalar.h"

namespace ds::cpu {

void output_gate(const ops::OutputGateParams& p, float* x, const float* gate) {
  for (int64_t t = 0; t < p.n_tokens; t++) {
    for (int64_t h = 0; h < p.n_head; h++) {
      float* xr = x + (t * p.n_head + h) * p.head_dim;
      const float* gr = gate + t * p.gate_token_stride + h * p.gate_head_stride;
      for (int64_t j = 0; j < p.head_dim; j++) xr[j] *= sigmoid(gr[j]);
    }
  }
}

}  // namespace ds::cpu
