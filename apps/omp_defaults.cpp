// OpenMP's waiting default for the deltaserve binary: OMP_WAIT_POLICY=passive unless the user chose
// (OMP_WAIT_POLICY or GOMP_SPINCOUNT set in the environment always win).
//
// Why: CPU decode runs ~100 short parallel regions per token. With libgomp's default a thread that
// reaches the end of a region spins (up to ~300,000 iterations) waiting for the others. When any other
// process wants a core (a compiler, a second server) the spinning thread keeps its core while the thread
// it waits for sits in the run queue until a time slice ends, at every region. Measured on the 2-core
// development machine with other busy processes (load 3-4): tg32 of the 0.8B Q4_K_M 4-7 tok/s with
// spinning, 22-24 with passive waiting; on an idle machine see docs/STATUS.md (CPU).
//
// How: libgomp reads its environment in its own initializer, before main(), and glibc restores the
// original environment after the executable's .preinit_array runs, so the variable cannot be set from
// inside this process in time. main() therefore re-executes the binary once with the variable set
// (/proc/self/exe, same arguments); if that fails the program simply goes on with libgomp's default.
#include <unistd.h>

#include <cstdlib>

namespace ds::app {

void apply_omp_defaults(char** argv) {
#if defined(__linux__)
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
  if (setenv("OMP_WAIT_POLICY", "passive", 0) != 0) return;
  execv("/proc/self/exe", argv);  // returns only on failure
  unsetenv("OMP_WAIT_POLICY");    // keep the environment the way the running libgomp saw it
#else
  (void)argv;
#endif
}

}  // namespace ds::app
