// GET /metrics: Prometheus text exposition (format 0.0.4) of the HTTP counters kept here and the
// engine's counters, gauges and histograms (requests, tokens, queue depth, time to first token,
// inter-token latency, batch size, slot-state and prefix-cache memory).
#pragma once
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "engine/stats.h"

namespace ds::server {

class HttpMetrics {
 public:
  // `route` is a known route or "other" (keeps label values bounded).
  void record(const std::string& route, int status, double seconds);
  std::string render(const engine::EngineStats& st) const;

 private:
  mutable std::mutex m_;
  std::map<std::pair<std::string, int>, uint64_t> count_;
  std::map<std::string, engine::Histogram> duration_;
};

}  // namespace ds::server
