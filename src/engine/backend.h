// The engine's view of a model: a fixed pool of sequence slots, each holding one sequence's state
// (per GDN layer: conv window + recurrent state; per attention layer: KV cache up to n_ctx), and
// the two calls that advance them: prefill (many tokens of one slot) and decode (one token for
// each of B slots, batched). Logits rows are [V] float32. save/restore copy a slot's whole state
// (recurrent state + the KV rows in use) for prefix reuse: a recurrent state cannot be rolled back,
// so the engine keeps snapshots at chosen token boundaries instead (engine/prefix_cache.h).
// Contract: a slot's results depend only on that slot's tokens, never on which other slots share a
// decode batch (greedy output alone == in a full batch).
// decode_select is decode for a sampler that needs only part of each row (sampler/sampler.h, candidate
// path): per row the argmax, the k best (logit, token) pairs and the log-sum-exp, plus full rows only
// where asked. A GPU backend computes these on the device and downloads a few bytes per row instead of
// [B, V] floats (V = 248,320 for Qwen3.5: 1 MB a row); the default here runs decode() and summarizes on
// the host, so every backend (and the engine's tests on the CPU and fake backends) runs one engine path.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include <vector>

#include "core/error.h"
#include "sampler/sampler.h"

namespace ds::engine {

// An opaque copy of one slot's state after some number of tokens.
class Snapshot {
 public:
  virtual ~Snapshot() = default;
  virtual size_t bytes() const = 0;
  virtual int32_t n_tokens() const = 0;
  // Whether the snapshot keeps the logits after its last token (Backend::save_with_row on a backend that keeps
  // them beside the state, e.g. on the device), and a copy of them ([V] floats; may wait for the device).
  virtual bool has_logits() const { return false; }
  virtual Status logits(std::span<float> out) const;
};

struct MemoryInfo {
  size_t fixed_bytes_per_slot = 0;  // conv + recurrent state of every GDN layer
  size_t kv_bytes_per_token = 0;    // K + V of every attention layer for one position
};

inline constexpr int32_t kMaxCandidates = 64;  // SelectSpec::k at most

struct SelectSpec {
  int32_t k = 0;                   // best candidates per row, 0 .. kMaxCandidates
  bool lse = false;                // each row's log-sum-exp
  std::vector<int32_t> full_rows;  // batch rows whose full logits are wanted, increasing
};

struct Selection {
  std::vector<sampler::RowSummary> rows;  // [B]: argmax, max, lse (if asked), top (k entries, fewer if V < k), nonfinite
  std::vector<float> full;                // [full_rows.size(), V], in full_rows order
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual int32_t n_vocab() const = 0;
  virtual int32_t n_ctx() const = 0;    // positions per slot
  virtual int32_t n_slots() const = 0;
  virtual MemoryInfo memory() const = 0;

  // Empties a slot (position 0).
  virtual Status reset(int32_t slot) = 0;
  // Appends `tokens` to the slot's sequence. If `logits_out` is not empty it receives the logits
  // after the last token ([V]).
  virtual Status prefill(int32_t slot, std::span<const int32_t> tokens, std::span<float> logits_out) = 0;
  // Appends tokens[i] to slots[i] for every i (distinct slots) in one batched step; logits_out is
  // [B, V], row i for slots[i].
  virtual Status decode(std::span<const int32_t> slots, std::span<const int32_t> tokens,
                        std::span<float> logits_out) = 0;
  // decode() returning `out` as described at the top. Errors as decode().
  virtual Status decode_select(std::span<const int32_t> slots, std::span<const int32_t> tokens,
                               const SelectSpec& spec, Selection& out);
  // decode_select in two halves (host13), so that the caller's host work overlaps the step: begin starts the
  // step and may return before it has run (the CUDA backend launches it and returns); end waits for it and
  // fills `out` as decode_select does. Between the two the caller makes no other call but the read-only
  // ones (name, n_vocab, ...): a backend may reject anything else with an Error. The default runs
  // decode_select in begin and hands its result over in end.
  virtual Status decode_select_begin(std::span<const int32_t> slots, std::span<const int32_t> tokens,
                                     const SelectSpec& spec);
  virtual Status decode_select_end(Selection& out);
  // The full logits of row `row` of the last decode_select; valid until the next prefill or decode.
  virtual Status last_row(int32_t row, std::span<float> out);
  // Copies of a slot's state: save() does not change the slot; restore() replaces the slot's state.
  virtual Result<std::unique_ptr<Snapshot>> save(int32_t slot) = 0;
  virtual Status restore(int32_t slot, const Snapshot& snap) = 0;
  // save() of a slot whose last token was fed as row `row` of the last decode_select, with the logits after it
  // (the prefix cache's reply-end snapshot). A backend that can keep them beside the state does, without a
  // download or a host synchronisation (CUDA: a device copy ordered on its stream), and the snapshot's
  // has_logits() is true; else (the default) they are copied into `host_logits` ([V]).
  virtual Result<std::unique_ptr<Snapshot>> save_with_row(int32_t slot, int32_t row, std::vector<float>& host_logits);
  // Optional one-time preparation before serving (the CUDA backend captures the decode step of every batch
  // size, so no graph capture lands inside a served step). May run decode steps on any slot: every slot is
  // empty (reset) afterwards. The default does nothing.
  virtual Status warm_up() { return {}; }

 protected:
  static Status check_spec(const SelectSpec& spec, size_t batch);

 private:
  std::vector<float> select_logits_;  // the default decode_select's [B, V]
  size_t select_rows_ = 0;
  bool begun_ = false;     // the default decode_select_begin ran; its result waits in begun_sel_
  Status begun_status_;
  Selection begun_sel_;
};

}  // namespace ds::engine
