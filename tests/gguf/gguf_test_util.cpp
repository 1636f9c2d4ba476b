#include "gguf_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "testutil.h"

namespace ds::test {

std::vector<std::string> model_ggufs() {
  std::vector<std::string> out;
  for (auto& e : std::filesystem::recursive_directory_iterator(fixture("models")))
    if (e.is_regular_file() && e.path().extension() == ".gguf") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
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
