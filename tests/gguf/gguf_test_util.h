// Helpers shared by the GGUF tests: fixture lists, decompressed vocabulary files, byte patching.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace ds::test {

// Every model GGUF under fixtures/models (found at run time, so new fixtures are covered).
std::vector<std::string> model_ggufs();

template <typename T>
void poke(std::vector<uint8_t>& b, uint64_t off, T v) {
  std::memcpy(b.data() + off, &v, sizeof(T));
}
template <typename T>
T peek(const std::vector<uint8_t>& b, uint64_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof(T));
  return v;
}

}  // namespace ds::test
