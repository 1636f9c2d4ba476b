// CUDA infrastructure shared by every ds::cuda op: CUDA_TRY (a failed CUDA call becomes a ds::Error
// naming the expression and file:line, never an abort), a move-only RAII device buffer, and the
// device description benchmarks print (name, SMs, memory, peak bandwidth from clock x bus width).
// Host-only header: compiles with the host compiler and nvcc alike.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/ggml_type.h"

namespace ds::cuda {

// "cuda: <expr>: <cudaErrorName> (<description>) at file:line".
Error cuda_error(cudaError_t e, const char* expr, const char* file, int line);

// The type's name as a C string (type names are literals).
const char* type_cstr(GgmlType t);

// ds::err for .cu files: nvcc's front end cannot evaluate fmt's compile-time format-string check, so
// CUDA sources format their messages at run time.
template <typename... Args>
Error cu_err(std::string_view f, const Args&... args) {
  return Error{fmt::vformat(f, fmt::make_format_args(args...))};
}

// The error state after a launch on `stream` (see CUDA_TRY_LAUNCH).
cudaError_t launch_status(cudaStream_t stream);

// Number of CUDA devices usable now (0 when there is no driver or no GPU; never an error).
int device_count();

// Multiprocessors of the current device, read once (132 if the query fails): kernels size their grids by it.
int sm_count();

struct DeviceInfo {
  int id = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  size_t total_mem = 0;          // bytes
  size_t l2_bytes = 0;
  size_t smem_per_block_optin = 0;  // largest dynamic shared memory a block can opt into
  double mem_clock_khz = 0;      // memory clock as reported by the driver
  int bus_width_bits = 0;
  double peak_bw = 0;            // bytes/s = 2 (DDR) x clock x bus width; an upper bound
};

// Describes device `id` (queried once per device and cached).
Result<DeviceInfo> device_info(int id = -1);  // -1: the current device

// Move-only owner of one cudaMalloc allocation. Sizes are rounded up to 256 bytes so 16-byte
// vector loads at the end of a tensor stay inside the allocation.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      ptr_ = o.ptr_; bytes_ = o.bytes_;
      o.ptr_ = nullptr; o.bytes_ = 0;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  static Result<DeviceBuffer> alloc(size_t bytes);
  // Allocates and copies `bytes` from host memory (synchronous).
  static Result<DeviceBuffer> from_host(const void* src, size_t bytes);

  void reset();
  void* data() const { return ptr_; }
  template <typename T> T* as() const { return static_cast<T*>(ptr_); }
  size_t size() const { return bytes_; }   // the size asked for (not rounded)
  bool empty() const { return ptr_ == nullptr; }

  Status upload(const void* src, size_t bytes, size_t offset = 0);           // synchronous
  Status download(void* dst, size_t bytes, size_t offset = 0) const;         // synchronous
  Status fill_zero(cudaStream_t stream = nullptr);

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace ds::cuda

// CUDA_TRY(expr): evaluates a cudaError_t expression; on failure returns ds::cuda::cuda_error(...)
// from the enclosing function (which returns a ds::Status or ds::Result<T>).
#define CUDA_TRY(expr)                                                              \
  do {                                                                              \
    cudaError_t _ds_cu_e = (expr);                                                  \
    if (_ds_cu_e != cudaSuccess)                                                    \
      return ::ds::cuda::cuda_error(_ds_cu_e, #expr, __FILE__, __LINE__);           \
  } while (0)

// CUDA_TRY_LAUNCH(op, stream): right after a kernel launch; a launch error (bad configuration, no
// kernel image for this GPU) becomes an Error naming the op. Debug builds (no NDEBUG) also wait for
// the stream, unless it is being captured into a graph, so faults surface at the launch that caused them.
#define CUDA_TRY_LAUNCH(op, stream)                                                 \
  do {                                                                              \
    cudaError_t _ds_cu_e = ::ds::cuda::launch_status(stream);                       \
    if (_ds_cu_e != cudaSuccess)                                                    \
      return ::ds::cuda::cuda_error(_ds_cu_e, "launch of " op, __FILE__, __LINE__); \
  } while (0)
