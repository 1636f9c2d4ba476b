// SIGINT / SIGTERM for `serve`: they go to one thread that sigwaits for them and are blocked in every other
// thread. Made first thing in `serve`, so that every thread started later (OpenMP's, the CUDA driver's: a signal
// delivered to one of those would kill the process without a shutdown) inherits the blocked mask. Until a stop
// action is set (loading a model can take a while) a signal ends the process at once.
#pragma once
#include <signal.h>

#include <cstdlib>
#include <functional>
#include <mutex>
#include <thread>

#include "core/log.h"

namespace ds::app {

class SignalThread {
 public:
  SignalThread() {
    sigemptyset(&sigs_);
    sigaddset(&sigs_, SIGINT);
    sigaddset(&sigs_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs_, nullptr);
    thread_ = std::thread([this] { wait(); });
  }
  ~SignalThread() {
    disarm();
    pthread_kill(thread_.native_handle(), SIGTERM);  // wakes sigwait (ignored: disarmed)
    thread_.join();
  }
  void on_signal(std::function<void()> stop) {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = std::move(stop);
  }
  // From now on signals are ignored (the stop action may refer to objects about to be destroyed). A stop action
  // already running has finished when this returns: the caller may destroy what it uses.
  void disarm() {
    std::lock_guard<std::mutex> lk(mu_);
    disarmed_ = true;
  }

 private:
  void wait() {
    int sig = 0;
    sigwait(&sigs_, &sig);
    // The action runs under the lock, so disarm() waits for it: `serve` stopped by a signal returns from
    // Server::run() as soon as the server's socket closes, and a signal thread descheduled before its
    // engine.stop() then stopped an engine that `serve` had already destroyed (a use after free that TSan
    // showed, tools/sanitize_server.sh).
    std::lock_guard<std::mutex> lk(mu_);
    if (disarmed_) return;
    if (!stop_) {
      spdlog::warn("serve: signal {} while starting; exiting", sig);
      std::_Exit(128 + sig);
    }
    spdlog::info("serve: signal {}, shutting down", sig);
    stop_();
  }
  sigset_t sigs_;
  std::mutex mu_;
  std::function<void()> stop_;
  bool disarmed_ = false;
  std::thread thread_;
};

}  // namespace ds::app
