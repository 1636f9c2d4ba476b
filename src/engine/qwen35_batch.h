// One decode step for B sequences of the Qwen3.5 CPU model in a single batched pass: every weight
// matrix is applied to the B tokens together (each weight row is read once per step, not B times),
// while the conv window, the delta rule and the attention run per sequence on its own state.
// Each product element is the same quant::dot_row the single-token forward computes and the row
// ops see the same rows, so every row of logits is bit-identical to model/qwen35.h forward() on
// that sequence alone (tests/engine check it). Layer schedule and op calls follow
// model/qwen35_forward.cpp (qwen35-spec.md §4, §5, §6).
#pragma once
#include <span>

#include "model/qwen35.h"

namespace ds::engine {

// tokens[i] is appended to *states[i] (distinct states); logits_out is [B, V]. On error nothing changed.
Status qwen35_decode_batch(const Qwen35Model& model, std::span<SequenceState* const> states,
                           std::span<const int32_t> tokens, float* logits_out);

}  // namespace ds::engine
