// Kernel launch with or without programmatic dependent launch (PDL, sm_90). With pdl set, k may start
// while the kernel before it on the stream is still running: k must execute griddepcontrol.wait before it
// reads anything an earlier kernel writes (weights and other constant inputs may be read before), and may
// execute griddepcontrol.launch_dependents to let the next kernel start early. Without pdl it is the plain
// k<<<grid, block, smem, stream>>>(args...). launch_pdl_cluster: the same in clusters of CTAs along x.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

namespace ds::cuda {

// launch_pdl with the grid in clusters of cluster_x CTAs along x (thread-block clusters, sm_90; 1: none).
template <class... P, class... A>
cudaError_t launch_pdl_cluster(void (*k)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, bool pdl,
                               int cluster_x, A&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute at[2];
  unsigned n = 0;
  if (pdl) {
    at[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[n].val.programmaticStreamSerializationAllowed = 1;
    n++;
  }
  if (cluster_x > 1) {
    at[n].id = cudaLaunchAttributeClusterDimension;
    at[n].val.clusterDim.x = (unsigned)cluster_x;
    at[n].val.clusterDim.y = 1;
    at[n].val.clusterDim.z = 1;
    n++;
  }
  cfg.attrs = at;
  cfg.numAttrs = n;
  return cudaLaunchKernelEx(&cfg, k, std::forward<A>(args)...);
}

template <class... P, class... A>
cudaError_t launch_pdl(void (*k)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, bool pdl,
                       A&&... args) {
  return launch_pdl_cluster(k, grid, block, smem, stream, pdl, 1, std::forward<A>(args)...);
}

}  // namespace ds::cuda
