#include "engine/backend.h"

#include <algorithm>
#include <cstring>

namespace ds::engine {

Status Backend::check_spec(const SelectSpec& spec, size_t batch) {
  if (spec.k < 0 || spec.k > kMaxCandidates)
    return err("decode_select: k = {} outside [0, {}]", spec.k, kMaxCandidates);
  for (size_t i = 0; i < spec.full_rows.size(); i++) {
    const int32_t r = spec.full_rows[i];
    if (r < 0 || static_cast<size_t>(r) >= batch || (i > 0 && r <= spec.full_rows[i - 1]))
      return err("decode_select: full rows must be increasing rows of the batch of {}", batch);
  }
  return {};
}

Status Backend::decode_select(std::span<const int32_t> slots, std::span<const int32_t> tokens,
                              const SelectSpec& spec, Selection& out) {
  DS_TRY(check_spec(spec, slots.size()));
  const size_t B = slots.size(), V = static_cast<size_t>(n_vocab());
  select_logits_.resize(B * V);
  select_rows_ = 0;
  DS_TRY(decode(slots, tokens, select_logits_));
  select_rows_ = B;
  out.rows.resize(B);
  for (size_t i = 0; i < B; i++)
    sampler::summarize(std::span<const float>(select_logits_.data() + i * V, V), spec.k, spec.lse, out.rows[i]);
  out.full.resize(spec.full_rows.size() * V);
  for (size_t j = 0; j < spec.full_rows.size(); j++)
    std::memcpy(out.full.data() + j * V, select_logits_.data() + spec.full_rows[j] * V, V * sizeof(float));
  return {};
}

Status Snapshot::logits(std::span<float>) const { return err("snapshot: no logits kept with this snapshot"); }

Status Backend::decode_select_begin(std::span<const int32_t> slots, std::span<const int32_t> tokens,
                                    const SelectSpec& spec) {
  if (begun_) return err("decode_select_begin: a step is already in flight");
  begun_status_ = decode_select(slots, tokens, spec, begun_sel_);
  begun_ = true;
  return {};
}

Status Backend::decode_select_end(Selection& out) {
  if (!begun_) return err("decode_select_end: no step in flight");
  begun_ = false;
  if (!begun_status_.ok()) return begun_status_;
  std::swap(out, begun_sel_);
  return {};
}

Result<std::unique_ptr<Snapshot>> Backend::save_with_row(int32_t slot, int32_t row, std::vector<float>& host_logits) {
  host_logits.resize(static_cast<size_t>(n_vocab()));
  DS_TRY(last_row(row, host_logits));  // before save(): a backend call may end its validity
  return save(slot);
}

Status Backend::last_row(int32_t row, std::span<float> out) {
  const size_t V = static_cast<size_t>(n_vocab());
  if (row < 0 || static_cast<size_t>(row) >= select_rows_ || out.size() < V)
    return err("last_row: row {} of a step of {} rows, buffer of {} floats", row, select_rows_, out.size());
  std::memcpy(out.data(), select_logits_.data() + row * V, V * sizeof(float));
  return {};
}

}  // namespace ds::engine
