#include "core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>

namespace ds {
void log_init() {
  static bool done = false;
  if (done) return;
  done = true;
  auto logger = spdlog::stderr_color_mt("deltaserve");
  logger->set_pattern("[%H:%M:%S.%e] %^%l%$ %v");
  spdlog::set_default_logger(logger);
  const char* lvl = std::getenv("DS_LOG");
  spdlog::set_level(lvl ? spdlog::level::from_str(lvl) : spdlog::level::info);
}
}  // namespace ds
