#include "cuda/cuda_util.h"

#include <mutex>
#include <optional>
#include <vector>

namespace ds::cuda {

Error cuda_error(cudaError_t e, const char* expr, const char* file, int line) {
  // Strip the directory: the file name is enough to find the call and keeps messages short.
  std::string f = file;
  if (auto p = f.find("/src/"); p != std::string::npos) f = f.substr(p + 1);
  return err("cuda: {}: {} ({}) at {}:{}", expr, cudaGetErrorName(e), cudaGetErrorString(e), f, line);
}

const char* type_cstr(GgmlType t) { return ggml_type_name(t).data(); }  // names are literals

cudaError_t launch_status(cudaStream_t stream) {
  cudaError_t e = cudaPeekAtLastError();
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // clear a non-sticky error so later calls do not report it again
    return e;
  }
#ifndef NDEBUG
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &cs) == cudaSuccess && cs == cudaStreamCaptureStatusNone)
    return cudaStreamSynchronize(stream);
#else
  (void)stream;
#endif
  return cudaSuccess;
}

int sm_count() {
  static const int n = [] {
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
      (void)cudaGetLastError();
      return 132;
    }
    return v;
  }();
  return n;
}

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

Result<DeviceInfo> device_info(int id) {
  if (id < 0) CUDA_TRY(cudaGetDevice(&id));
  static std::mutex mu;
  static std::vector<std::optional<DeviceInfo>> cache;
  std::lock_guard<std::mutex> lock(mu);
  if ((size_t)id < cache.size() && cache[id]) return *cache[id];

  cudaDeviceProp p{};
  CUDA_TRY(cudaGetDeviceProperties(&p, id));
  DeviceInfo d;
  d.id = id;
  d.name = p.name;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.sm_count = p.multiProcessorCount;
  d.total_mem = p.totalGlobalMem;
  d.l2_bytes = (size_t)p.l2CacheSize;
  d.smem_per_block_optin = p.sharedMemPerBlockOptin;
  int clk = 0, bus = 0;
  // CUDA 13 removed memoryClockRate from cudaDeviceProp; the attribute is still reported.
  if (cudaDeviceGetAttribute(&clk, cudaDevAttrMemoryClockRate, id) != cudaSuccess) clk = 0;
  if (cudaDeviceGetAttribute(&bus, cudaDevAttrGlobalMemoryBusWidth, id) != cudaSuccess) bus = 0;
  (void)cudaGetLastError();
  d.mem_clock_khz = clk;
  d.bus_width_bits = bus;
  d.peak_bw = 2.0 * clk * 1e3 * (bus / 8.0);
  if (cache.size() <= (size_t)id) cache.resize(id + 1);
  cache[id] = d;
  return d;
}

Result<DeviceBuffer> DeviceBuffer::alloc(size_t bytes) {
  DeviceBuffer b;
  if (bytes == 0) return b;
  const size_t rounded = (bytes + 255) / 256 * 256;
  if (cudaError_t e = cudaMalloc(&b.ptr_, rounded); e != cudaSuccess) {
    // A failed cudaMalloc also leaves the error as the thread's last error; clear it, or the next
    // kernel launch check (cudaGetLastError) would report this allocation failure as its own.
    (void)cudaGetLastError();
    b.ptr_ = nullptr;
    return err("cuda: cudaMalloc of {} bytes failed: {} ({})", rounded, cudaGetErrorName(e), cudaGetErrorString(e));
  }
  b.bytes_ = bytes;
  return b;
}

Result<DeviceBuffer> DeviceBuffer::from_host(const void* src, size_t bytes) {
  DS_ASSIGN(DeviceBuffer b, alloc(bytes));
  DS_TRY(b.upload(src, bytes));
  return b;
}

void DeviceBuffer::reset() {
  if (ptr_) cudaFree(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
}

Status DeviceBuffer::upload(const void* src, size_t bytes, size_t offset) {
  if (offset + bytes > bytes_)
    return err("cuda: upload of {} bytes at offset {} into a buffer of {} bytes", bytes, offset, bytes_);
  if (bytes) CUDA_TRY(cudaMemcpy(static_cast<char*>(ptr_) + offset, src, bytes, cudaMemcpyHostToDevice));
  return {};
}

Status DeviceBuffer::download(void* dst, size_t bytes, size_t offset) const {
  if (offset + bytes > bytes_)
    return err("cuda: download of {} bytes at offset {} from a buffer of {} bytes", bytes, offset, bytes_);
  if (bytes) CUDA_TRY(cudaMemcpy(dst, static_cast<const char*>(ptr_) + offset, bytes, cudaMemcpyDeviceToHost));
  return {};
}

Status DeviceBuffer::fill_zero(cudaStream_t stream) {
  if (bytes_) CUDA_TRY(cudaMemsetAsync(ptr_, 0, bytes_, stream));
  return {};
}

}  // namespace ds::cuda
