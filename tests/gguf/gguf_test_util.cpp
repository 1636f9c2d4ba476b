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


}  // namespace ds::test
