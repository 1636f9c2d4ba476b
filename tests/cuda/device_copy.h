// Host <-> device copies for the GPU tests (tests/cuda and tests/cuda_model): a failed copy fails the test
// (ADD_FAILURE) and gives an empty buffer or zeros instead of aborting the binary.
#pragma once
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "cuda/cuda_util.h"

namespace ds::test {

inline cuda::DeviceBuffer to_device(const void* p, size_t bytes) {
  auto b = cuda::DeviceBuffer::from_host(p, bytes);
  if (!b.ok()) {
    ADD_FAILURE() << b.error().message;
    return {};
  }
  return std::move(b).value();
}
template <typename T>
cuda::DeviceBuffer to_device(const std::vector<T>& v) { return to_device(v.data(), v.size() * sizeof(T)); }
template <typename T>
std::vector<T> to_host(const cuda::DeviceBuffer& b, size_t n) {
  std::vector<T> v(n);
  auto s = b.download(v.data(), n * sizeof(T));
  if (!s.ok()) ADD_FAILURE() << s.error().message;
  return v;
}

}  // namespace ds::test
