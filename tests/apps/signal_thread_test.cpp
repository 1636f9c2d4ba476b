// serve's signal thread (apps/signal_thread.h): a stop action that a signal started has finished by the time
// disarm() returns, since `serve` destroys the server and the engine that the action stops right after it.
#include "signal_thread.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>

namespace ds::app {
namespace {

using namespace std::chrono_literals;

// Waits up to 10 s for `flag`.
bool wait_for(const std::atomic<bool>& flag) {
  for (int i = 0; i < 10000 && !flag; i++) std::this_thread::sleep_for(1ms);
  return flag;
}

TEST(SignalThread, DisarmWaitsForARunningStopAction) {
  std::atomic<bool> started{false}, finished{false};
  SignalThread signals;
  signals.on_signal([&] {
    started = true;
    std::this_thread::sleep_for(300ms);  // a slow stop, or a signal thread descheduled in the middle of it
    finished = true;
  });
  ASSERT_EQ(kill(getpid(), SIGTERM), 0);  // blocked here: the signal thread takes it
  ASSERT_TRUE(wait_for(started));
  signals.disarm();  // `serve` after Server::run() returned: what the action uses is destroyed next
  EXPECT_TRUE(finished) << "disarm() returned while the stop action was still running";
}

TEST(SignalThread, DisarmedIgnoresSignals) {
  std::atomic<bool> ran{false};
  {
    SignalThread signals;
    signals.on_signal([&] { ran = true; });
    signals.disarm();
    ASSERT_EQ(kill(getpid(), SIGINT), 0);
    std::this_thread::sleep_for(50ms);
  }  // joins the signal thread
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace ds::app
