// Device copy bandwidth, the ceiling decode speed is judged against (performance.md: read + write counted).
#include <algorithm>

#include "cuda/model/qwen35_cuda.cuh"

namespace ds::cuda {

Result<double> copy_bandwidth(size_t bytes, int reps) {
  DS_ASSIGN(DeviceBuffer a, DeviceBuffer::alloc(bytes));
  DS_ASSIGN(DeviceBuffer b, DeviceBuffer::alloc(bytes));
  CUDA_TRY(cudaMemset(a.data(), 1, bytes));
  cudaEvent_t e0, e1;
  CUDA_TRY(cudaEventCreate(&e0));
  CUDA_TRY(cudaEventCreate(&e1));
  CUDA_TRY(cudaMemcpy(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice));  // warm-up
  float best = 1e30f;
  for (int r = 0; r < reps; r++) {
    cudaEventRecord(e0);
    cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e1);
    CUDA_TRY(cudaEventSynchronize(e1));
    float ms = 0;
    CUDA_TRY(cudaEventElapsedTime(&ms, e0, e1));
    best = std::min(best, ms);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return 2.0 * (double)bytes / (best * 1e-3);
}

}  // namespace ds::cuda
