// Codebook tables of the non-linear and i-quant formats. These are data (facts), taken from ggml:
// ggml/src/ggml-common.h in ggml-org/llama.cpp (commit c299a92c), MIT license, Copyright (c) 2023-2024
// The ggml authors. The grids were extracted mechanically from that file (tools: see the commit that
// added them); the golden fixtures in ../shared/fixtures/quant/ check every entry used.
#include "quant/kernels.h"

namespace ds::quant::detail {

const int8_t kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                  1,    13,   25,  38,  53,  69,  89,  113};

// e2m1 values doubled (formats.md §5.14).
const int8_t kvalues_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

}  // namespace ds::quant::detail
