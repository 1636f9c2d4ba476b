// Test helpers shared by every test binary: fixture paths and the one error metric (B7).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace ds::test {

// The fixtures folder: $DS_FIXTURES if set, else ../shared/fixtures beside the source tree.
std::string fixtures_dir();
// fixtures_dir() + "/" + rel.
std::string fixture(const std::string& rel);
// Whole file as bytes; fails the current test (and returns empty) if it cannot be read.
std::vector<unsigned char> read_file(const std::string& path);
// A scratch folder for this test process (created on first use, under the system's temp folder; removed when the
// process ends unless one of its tests failed or DS_KEEP_TEST_TMP=1 is set).
std::string temp_dir();
// fixtures/tokenizer/<name>.gguf.xz decompressed once (cached in the temp folder across test processes); "" (and a
// test failure) if xz fails.
std::string vocab_gguf(const std::string& name);

struct ErrStats {
  double max_abs = 0;     // max |a - b|
  size_t worst = 0;       // index of max_abs
  double rel_rms = 0;     // ||a - b||_2 / ||b||_2
};
ErrStats compare(const float* a, const float* b, size_t n);

}  // namespace ds::test
