// The scheduler: continuous batching over a fixed pool of backend slots. One engine thread loops:
// take new requests into a FIFO queue; drop cancelled ones (their slot is free for the next step);
// admit queued requests while a slot is free (restoring the longest cached prefix, see
// prefix_cache.h); run prompt chunks (aligned to multiples of prefill_chunk from position 0, so a
// prompt is split the same way whether it runs alone or beside others); then one batched decode
// step for every sequence that has a sampled token to feed; sample, emit, finish (EOS, stop
// string, max_tokens, context full). Requests that find every slot busy wait; only a full queue
// refuses them.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "engine/backend.h"
#include "engine/request.h"
#include "engine/stats.h"
#include "engine/text_codec.h"

namespace ds::engine {

struct EngineConfig {
  int32_t max_queue = 256;             // waiting requests; more are refused (QueueFull)
  int32_t prefill_chunk = 512;         // prompt tokens per prefill call
  // Prompt tokens run between two decode steps (at least one chunk): the stall every decoding sequence sees when
  // prompts arrive. 512 (was 1024; serve11 on the H200, 9B, 512-token prompts): ITL p99 at 8 / 32 / 64 clients
  // 41.8 / 45.9 / 51.1 ms instead of 75.5 / 80.7 / 85.7; alone it admits half as fast (decode rate at 64 -7%), which
  // prefill_first below more than makes up for. Session 14 (H200, 9B, 64 clients, interleaved pairs): 512 mean batch
  // 58.3-58.7, 6,863-6,908 tok/s of decode steps, ITL p99 47 ms; 2048 61.1-62.0, 7,118-7,285, 148 ms; 4096
  // 62.8-63.5, 7,306-7,426, 27-283 ms: a larger budget is the throughput setting (`serve --prefill-budget`).
  int32_t prefill_budget = 512;
  // While at least as many admitted sequences wait for their prompt as have a token to decode, the prompts all
  // run before the next decode step (no budget): a decode step of a few sequences costs nearly as much as one
  // of a full batch, so filling the batch first raises throughput when a burst of requests arrives (the few
  // decoding sequences wait, as with a large budget). Otherwise prefill_budget bounds the stall.
  // On (serve11, H200, with budget 512): decode rate at 64 clients 5,872 tok/s (mean batch 63.5) vs 5,431 (56.6) with
  // budget 1024 and 5,036 with 512 alone; ITL p99 8.6 / 20.0 / 38.8 ms at 8 / 32 / 64 clients; TTFT p99 lower
  // (2.18 s vs 2.41 at 64) but TTFT p50 higher (1.12 s vs 0.15 at 64): the benchmark's clients stay in step, so
  // every round is a burst of prompts run one after another.
  bool prefill_first = true;
  // The most prompt tokens prefill_first lets run between two decode steps (0: no limit): a burst of long prompts
  // must not stall the sequences already decoding for longer than this many tokens of prefill (~2 s of the 9B on
  // an H200 at 32768; 64 prompts of 512 tokens still run in one go).
  int64_t prefill_first_max = 32768;
  // With prefill_first: requests that arrive while a burst's prompts run join the burst (admitted, their prompts run)
  // before the next decode step, within prefill_first_max tokens, so a burst that reaches the server over a few
  // milliseconds still decodes as one batch. false: they wait for the next iteration (the order before s31).
  // DS_BURST_JOIN=0 / 1 in the environment overrides this field (A/B runs).
  bool burst_join = true;
  bool warm_up = true;  // Backend::warm_up() before the first request (CUDA: every decode graph captured)
  size_t prefix_cache_bytes = size_t(1) << 30;
  size_t prefix_cache_entries = 512;
  int32_t prefix_cache_min_tokens = 16;  // shorter prompts are not snapshotted
  // Decode rows reduced on the backend (Backend::decode_select: argmax / k best / lse per row, on the GPU for
  // the CUDA backend) for samplers that need no more; false downloads every row whole (for comparisons).
  bool select_rows = true;
  // Overlap the host work of a decode step with the next step (host13): the engine waits for step t, samples every
  // row and decides which sequences finish (EOS, stop string, length: the same token as before), launches step
  // t + 1 (Backend::decode_select_begin) and only then sends step t's events and counts its stats while the
  // device runs. Finished sequences are never in the launched step; their snapshots are taken before it.
  // false: launch, wait, sample, send (the order before host13). DS_ASYNC_STEP=0 / 1 in the environment
  // overrides this field (A/B runs).
  bool async_step = true;
};
// Checks the fields; the Error names the bad one.
Status validate(const EngineConfig& c);

enum class SubmitStatus { Ok, Invalid, QueueFull, Stopped };

struct Submitted {
  SubmitStatus status = SubmitStatus::Ok;
  std::string message;
  std::shared_ptr<RequestHandle> handle;
};

class Engine {
 public:
  // `backend` and `codec` must outlive the engine.
  Engine(Backend& backend, const TextCodec& codec, EngineConfig cfg);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Starts the engine thread.
  void start();
  // Stops the thread; every unfinished request gets a final Error event. Idempotent, thread-safe.
  void stop();

  // Queues a request. Invalid: empty prompt, a token outside the vocabulary, prompt + max_tokens
  // beyond the context. QueueFull: max_queue requests already wait.
  Submitted submit(GenerationRequest r);

  EngineStats stats() const;
  // The vocabulary's trie that response_format masks walk (grammar/token_mask.h): built by the constructor.
  const grammar::TokenTrie* vocabulary_trie() const;
  const EngineConfig& config() const { return cfg_; }
  Backend& backend() { return backend_; }

 private:
  struct Seq;
  struct Impl;
  void loop();

  Backend& backend_;
  const TextCodec& codec_;
  EngineConfig cfg_;
  std::shared_ptr<Impl> impl_;  // shared with the request handles' wakers, which hold it weakly
  std::thread thread_;
  std::mutex stop_m_;
};

}  // namespace ds::engine
