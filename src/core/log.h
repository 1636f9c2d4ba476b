// Logging goes through spdlog to stderr so stdout stays clean for data (JSON, generated text).
#pragma once
#include <spdlog/spdlog.h>

namespace ds {
// Sets up the stderr logger once; level from DS_LOG (trace|debug|info|warn|error), default info.
void log_init();
}  // namespace ds
