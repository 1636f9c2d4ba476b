// A deterministic stand-in for a model, for engine and server tests: the logits of a slot are a
// hash of every token that slot has seen (so a state mixed up between sequences, a lost token or a
// wrong restore changes the output), optionally steered by an oracle that picks the next token
// from the history (scripted replies: thinking blocks, tool calls, EOS at a chosen point).
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <vector>

#include "engine/backend.h"

namespace ds::engine {

struct FakeBackendOptions {
  int32_t n_vocab = 300;
  int32_t n_ctx = 256;
  int32_t n_slots = 4;
  // If set and it returns a token >= 0 for the history so far, that token's logit becomes 50
  // (the argmax, even if suppressed).
  std::function<int32_t(std::span<const int32_t> history)> oracle;
  std::vector<int32_t> suppressed;  // logits -30 (e.g. EOS, so hash-driven replies run to length)
  int32_t nan_token = -1;  // a history holding this token gives NaN logits (a model whose arithmetic overflowed)
  std::chrono::microseconds decode_delay{0};             // per decode call (simulated compute)
  std::chrono::microseconds prefill_delay_per_token{0};
  MemoryInfo memory{4096, 64};
  // Called on the engine thread when a decode step is launched (decode_select_begin), with the call's index
  // (from 0): tests cancel a request while its step is in flight, or look at what the clients had then.
  std::function<void(int64_t call)> on_launch;
  // Called on the engine thread at the start of each prefill call, with the call's index (from 0): tests submit
  // requests while a prompt runs (a burst arriving over time).
  std::function<void(int64_t call)> on_prefill;
  // Reply-end snapshots keep their logits row beside the state (save_with_row), as the CUDA backend does.
  bool snapshot_logits = true;
};

class FakeBackend : public Backend {
 public:
  explicit FakeBackend(FakeBackendOptions o);
  std::string name() const override { return "fake"; }
  int32_t n_vocab() const override { return o_.n_vocab; }
  int32_t n_ctx() const override { return o_.n_ctx; }
  int32_t n_slots() const override { return o_.n_slots; }
  MemoryInfo memory() const override { return o_.memory; }
  Status reset(int32_t slot) override;
  Status prefill(int32_t slot, std::span<const int32_t> tokens, std::span<float> logits_out) override;
  Status decode(std::span<const int32_t> slots, std::span<const int32_t> tokens,
                std::span<float> logits_out) override;
  Result<std::unique_ptr<Snapshot>> save(int32_t slot) override;
  Status restore(int32_t slot, const Snapshot& snap) override;
  Status warm_up() override;
  // A real split: begin only records the step (and calls on_launch); end runs it. While a step is in flight
  // every other call is an Error, so an engine that used a slot of a running step would fail its tests.
  Status decode_select_begin(std::span<const int32_t> slots, std::span<const int32_t> tokens,
                             const SelectSpec& spec) override;
  Status decode_select_end(Selection& out) override;
  Result<std::unique_ptr<Snapshot>> save_with_row(int32_t slot, int32_t row, std::vector<float>& host_logits) override;

  // The logits a slot with this history produces (what a lone run computes).
  void logits_for(std::span<const int32_t> history, std::span<float> out) const;

  std::atomic<int64_t> n_prefill_tokens{0};  // tokens processed by prefill
  std::atomic<int64_t> n_decode_calls{0};
  std::atomic<int32_t> max_batch{0};
  std::atomic<int32_t> n_warm_ups{0};
  std::atomic<int64_t> n_launches{0};       // decode_select_begin calls
  std::atomic<int64_t> n_prefill_calls{0};
  std::atomic<int64_t> n_row_snapshots{0};  // save_with_row calls that kept the logits with the snapshot
  // Batch size of every decode call, in order, and the prefill tokens run before each (scheduling tests).
  std::vector<int32_t> batches() const;
  std::vector<int64_t> prefill_before_batches() const;

 private:
  Status check_slot(int32_t slot) const;
  Status check_idle(const char* what) const;
  FakeBackendOptions o_;
  std::vector<std::vector<int32_t>> hist_;
  mutable std::mutex log_m_;
  std::vector<int32_t> batches_;
  std::vector<int64_t> prefill_before_;
  bool in_flight_ = false;  // a step begun and not ended
  std::vector<int32_t> fl_slots_, fl_tokens_;
  SelectSpec fl_spec_;
  std::vector<float> last_rows_;  // [B, V] of the last decode (save_with_row)
};

}  // namespace ds::engine
