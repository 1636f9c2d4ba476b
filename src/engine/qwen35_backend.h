// The engine Backend over the fp32 CPU reference model (model/qwen35.h): one SequenceState per slot,
// sized for n_ctx positions and allocated up front (so admission never runs out of memory mid-way).
// prefill() is the model's forward; decode() runs the B sequences of a step in one batched pass
// (engine/qwen35_batch.h: products over the batch, conv/delta rule/attention per sequence state),
// whose every row is bit-identical to a lone run, so greedy output is the same alone or in a batch.
#pragma once
#include <vector>

#include "engine/backend.h"
#include "model/qwen35.h"

namespace ds::engine {

class Qwen35Backend : public Backend {
 public:
  // `model` must outlive the backend.
  static Result<std::unique_ptr<Qwen35Backend>> create(const Qwen35Model& model, int32_t n_slots, int32_t n_ctx);

  std::string name() const override { return "cpu"; }
  int32_t n_vocab() const override { return static_cast<int32_t>(model_.cfg.n_vocab); }
  int32_t n_ctx() const override { return n_ctx_; }
  int32_t n_slots() const override { return static_cast<int32_t>(slots_.size()); }
  MemoryInfo memory() const override { return mem_; }
  Status reset(int32_t slot) override;
  Status prefill(int32_t slot, std::span<const int32_t> tokens, std::span<float> logits_out) override;
  Status decode(std::span<const int32_t> slots, std::span<const int32_t> tokens, std::span<float> logits_out) override;
  Result<std::unique_ptr<Snapshot>> save(int32_t slot) override;
  Status restore(int32_t slot, const Snapshot& snap) override;

 private:
  Qwen35Backend(const Qwen35Model& m, int32_t n_ctx) : model_(m), n_ctx_(n_ctx) {}
  Status check_slot(int32_t slot) const;
  const Qwen35Model& model_;
  int32_t n_ctx_;
  std::vector<SequenceState> slots_;
  std::vector<float> scratch_;  // prefill logits when the caller wants none
  MemoryInfo mem_;
};

}  // namespace ds::engine
