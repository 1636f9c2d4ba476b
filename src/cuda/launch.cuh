// Kernel launch with or without programmatic dependent launch (PDL, sm_90). With pdl set, k may start
// while the kernel before it on the stream is still running: k must execute griddepcontrol.wait before it
// reads anything an earlier kernel writes (weights and other constant inputs may be read before), and may
// execute griddepcontrol.launch_dependents to let the next kernel start early. Without pdl it is the plain
// k<<<grid, block, smem, stream>>>(args...).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

namespace ds::cuda {

template <class... P, class... A>
cudaError_t launch_pdl(void (*k)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, bool pdl,
                       A&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = at;
  cfg.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, k, std::forward<A>(args)...);
}

}  // namespace ds::cuda
