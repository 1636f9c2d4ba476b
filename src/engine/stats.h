// Engine counters for /metrics: a Prometheus-style cumulative histogram and the snapshot of
// engine state the server renders.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ds::engine {

struct Histogram {
  std::vector<double> bounds;   // upper bounds, increasing; +Inf is implicit
  std::vector<uint64_t> counts; // per bucket (not cumulative), bounds.size() + 1
  double sum = 0;
  uint64_t count = 0;
  explicit Histogram(std::vector<double> b = {}) : bounds(std::move(b)), counts(bounds.size() + 1, 0) {}
  void observe(double v) {
    size_t i = 0;
    while (i < bounds.size() && v > bounds[i]) i++;
    counts[i]++;
    sum += v;
    count++;
  }
};

struct EngineStats {
  int32_t n_slots = 0;
  int32_t running = 0;            // sequences holding a slot
  int32_t waiting = 0;            // queued for a slot
  uint64_t requests_stop = 0, requests_length = 0, requests_cancelled = 0, requests_error = 0;
  uint64_t prompt_tokens = 0;     // prompt tokens of admitted requests
  uint64_t cached_prompt_tokens = 0;  // of those, served from the prefix cache
  uint64_t generated_tokens = 0;
  uint64_t prefix_cache_hits = 0, prefix_cache_misses = 0;
  size_t prefix_cache_bytes = 0, prefix_cache_entries = 0;
  size_t state_bytes_allocated = 0;  // all slots at full context
  size_t state_bytes_in_use = 0;     // running slots: fixed state + KV rows in use
  uint64_t decode_steps = 0;
  // Where the engine thread's time goes (seconds, cumulative; waiting for work excluded): prompt chunks
  // (backend prefill calls, their sampling included), the batched decode call (decode_select: the GPU step
  // and the download of what the samplers need), host work on its rows (sampling, logprobs, events,
  // finishing), and the rest (admission, prefix restores, cancellation, bookkeeping).
  double prefill_s = 0, decode_s = 0, sample_s = 0, other_s = 0;
  uint64_t prefill_calls = 0, prefill_tokens = 0;  // backend prefill calls and the prompt tokens they ran
  uint64_t full_rows = 0;                          // decode rows downloaded whole (samplers that need them)
  // Host time from a decode step's result (decode_select_end returned) to the next step's launch, over the steps
  // launched right after one ended: the stretch in which the engine leaves the device without a step.
  double gap_s = 0;
  uint64_t gap_steps = 0;
  Histogram ttft_s, itl_s, batch_size;
};

}  // namespace ds::engine
