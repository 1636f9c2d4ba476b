#include "testutil.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace ds::test {

std::string fixtures_dir() {
  if (const char* e = std::getenv("DS_FIXTURES")) return e;
  return DS_FIXTURES_DIR;
}

std::string fixture(const std::string& rel) { return fixtures_dir() + "/" + rel; }

std::vector<unsigned char> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    ADD_FAILURE() << "cannot read " << path;
    return {};
  }
  return std::vector<unsigned char>(std::istreambuf_iterator<char>(f), {});
}

std::string temp_dir() {
  static std::string dir = [] {
    auto p = std::filesystem::temp_directory_path() / ("deltaserve-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(p);
    return p.string();
  }();
  return dir;
}

ErrStats compare(const float* a, const float* b, size_t n) {
  ErrStats s;
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double d = std::fabs((double)a[i] - (double)b[i]);
    if (!(d <= s.max_abs)) {  // also catches NaN
      s.max_abs = std::isnan(d) ? INFINITY : d;
      s.worst = i;
    }
    num += d * d;
    den += (double)b[i] * b[i];
  }
  s.rel_rms = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return s;
}

}  // namespace ds::test
