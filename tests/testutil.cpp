#include "testutil.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
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

namespace {

// This process's scratch directory, removed when the process ends (ctest runs every test in a process of its own,
// so each run of the suite made ~130 of them, 3-18 MB each, and left them all in /tmp). Kept, and named on stderr,
// when a test of this process failed, or with DS_KEEP_TEST_TMP=1, so what a failing test wrote can be looked at.
// (A process that crashes keeps it too: no destructor runs.)
struct TempDir {
  std::string path;
  pid_t owner = 0;  // a forked child that exits leaves it to the process that made it
  ~TempDir() {
    if (path.empty() || getpid() != owner) return;
    const char* keep = std::getenv("DS_KEEP_TEST_TMP");
    const ::testing::UnitTest* ut = ::testing::UnitTest::GetInstance();
    if ((keep && *keep && std::string(keep) != "0") || (ut && ut->Failed())) {
      std::fprintf(stderr, "test scratch files kept in %s\n", path.c_str());
      return;
    }
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

std::string temp_dir() {
  static TempDir dir = [] {
    auto p = std::filesystem::temp_directory_path() / ("deltaserve-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(p);
    return TempDir{p.string(), getpid()};
  }();
  return dir.path;
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

std::string vocab_gguf(const std::string& name) {
  // Cached across test processes (ctest runs each test alone); a file appears under its final name
  // only once complete (rename), and is redone when the fixture is newer.
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / "deltaserve-test-vocab";
  fs::create_directories(dir);
  std::string src = fixture("tokenizer/" + name + ".gguf.xz");
  std::string out = (dir / (name + ".gguf")).string();
  std::error_code ec;
  if (fs::exists(out) && fs::last_write_time(out, ec) >= fs::last_write_time(src, ec)) return out;
  std::string tmp = temp_dir() + "/" + name + ".gguf.part";
  std::string cmd = "xz -dkc '" + src + "' > '" + tmp + "'";
  if (std::system(cmd.c_str()) != 0) {
    ADD_FAILURE() << "failed: " << cmd;
    return "";
  }
  fs::rename(tmp, out, ec);
  if (ec) fs::copy_file(tmp, out, fs::copy_options::overwrite_existing);  // temp dir on another file system
  return out;
}

}  // namespace ds::test
