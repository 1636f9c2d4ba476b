// OpenMP's waiting default for the deltaserve binary: GOMP_SPINCOUNT=10000 (spin ~10-30 us at the end of a
// parallel region, then sleep) unless the user chose (OMP_WAIT_POLICY or GOMP_SPINCOUNT set in the
// environment always win).
//
// Why: CPU decode runs ~100 short parallel regions per token. With libgomp's default a thread that
// reaches the end of a region spins (up to ~300,000 iterations) waiting for the others. When any other
// process wants a core (a compiler, a second server) the spinning thread keeps its core while the thread
// it waits for sits in the run queue until a time slice ends, at every region. Measured on the 2-core
// development machine with other busy processes (load 3-4), tg32 of the 0.8B Q4_K_M: 4-7 tok/s with
// libgomp's default, 13-14 with GOMP_SPINCOUNT=3000-10000, 22-24 with OMP_WAIT_POLICY=passive. On the idle
// machine, tg64: default 33.7-34.3, GOMP_SPINCOUNT=10000 33.0-33.6, passive 30.6-31.9 (a futex wake per
// region). 10000 keeps the idle speed within ~2% and is ~3x faster than the default under load; on a
// machine that is always shared, OMP_WAIT_POLICY=passive is better still.
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
  if (setenv("GOMP_SPINCOUNT", "10000", 0) != 0) return;
  execv("/proc/self/exe", argv);  // returns only on failure
  unsetenv("GOMP_SPINCOUNT");     // keep the environment the way the running libgomp saw it
#else
  (void)argv;
#endif
}

}  // namespace ds::app
