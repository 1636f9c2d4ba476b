// DS_CHECK: internal invariants only (a bug in deltaserve, not bad input). Aborts with file:line.
#pragma once
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

#define DS_CHECK(cond, ...)                                                              \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "deltaserve: internal check failed at %s:%d: %s: %s\n",       \
                   __FILE__, __LINE__, #cond, fmt::format(__VA_ARGS__).c_str());         \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)
