// The Qwen3.5 forward pass on one NVIDIA GPU (qwen35-spec.md §1.2, §4, §5, §6), reproducing the fp32 CPU
// reference (src/model/qwen35_forward.cpp) operation for operation, with the same dump names.
// - CudaModel::load uploads every trunk matrix once, in its GGUF type (same-type projections that read the
//   same input are stored back to back and run as one matrix-vector product); f32 vectors (norms, ssm_a,
//   ssm_dt, conv taps) become device buffers. A matrix type with no CUDA kernel is a load-time Error naming
//   the tensor and the type, checked before the GPU is touched.
// - CudaSeqState: one sequence's device state, one allocation: conv windows [Kc-1][Cc] and delta-rule states
//   [nv][dv][dk] of every GDN layer (fp32), then K and V caches [max_ctx][nkv][hd] of every attention layer.
//   The KV cache is fp32 on purpose: exactness against the fp32 reference first (2e-3 on the fixture logits);
//   f16 would halve its bytes and is a later option.
// - A forward step runs T <= max_tokens tokens of S sequences as one packed batch on one stream: every
//   projection reads its weights once per step; the conv and the delta rule run token by token. Decode steps
//   (one token for each of B sequences) are captured in a CUDA graph per (B, max_ctx) on first use and
//   replayed. No host synchronisation inside a step; the only one is in front of the logits download.
// - Prefill (CudaModel::prefill of T >= prefill_min_tokens tokens, issue 6) runs the prompt in pieces of up to
//   prefill_piece tokens through every layer with matrix-matrix products (src/cuda/prefill: weights dequantized
//   into cuBLAS GEMMs), the conv in parallel over tokens, the chunked gated delta rule (chunk 64) and flash-style
//   causal attention writing the KV cache. The delta-rule states, conv windows and KV cache carry everything
//   between pieces and into decode. The piece scratch (about 350 KB per piece token for a 9B model) is
//   allocated once, on the first such prefill, sized from the config and prefill_piece. Shorter prompts, and
//   every prefill with a dump hook (so that every named intermediate exists), run the step path.
//   Precision::kPrecise: fp32 arithmetic everywhere (the 2e-3 logit bound of the fixtures); Precision::kFast:
//   tensor-core GEMM inputs (f16 weights and activations; the GDN qkv projection's activations as two f16
//   terms) and attention products with fp32 accumulation (the 0.02 bound). Decode is fp32 in both.
// Not thread-safe: one CudaModel is driven by one thread at a time.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "cuda/cuda_util.h"
#include "model/qwen35.h"

namespace ds::cuda {

inline constexpr int kMaxStepTokens = 64;  // tokens per forward step (the batched matvec's limit)

inline constexpr int kMaxSelect = 64;  // best candidates per row that decode_select returns at most

// Per-row results of a selection (kernels_sample.cu), device or host arrays of B rows: argmax (ties: lowest id),
// max (the argmax's logit), lse = log(sum exp(l - max)) (double), and the k best, most likely first (ties: lower
// id first), at [row * kMaxSelect + i] for i < k (id -1 and -inf past the row's size), and how many of the row's
// logits are NaN or +-inf (a model whose arithmetic overflowed: the engine fails that request).
struct SelectResultDev {
  int32_t* argmax = nullptr;
  float* max = nullptr;
  double* lse = nullptr;
  int32_t* top_id = nullptr;
  float* top_logit = nullptr;
  int32_t* nonfinite = nullptr;
};

// Whether the selection kernels handle rows of V logits (V <= 262,144).
bool select_supported(int64_t V);
size_t select_scratch_bytes(int B, int64_t V);
// Enqueues the selection of B rows of V logits (row stride V, device) on `st`; `scratch` (device) holds
// select_scratch_bytes(B, V). k <= kMaxSelect; lse is written only if want_lse.
Status select_rows(const float* logits, int B, int64_t V, int k, bool want_lse, void* scratch, size_t scratch_bytes,
                   const SelectResultDev& out, cudaStream_t st);

// Certified greedy selection (cg38, kernels_certify.cu): the argmax of W x per row from the hi-only head's logits
// (matvec_batched_hi) with the exact logits of the rows that could beat the best one (see there). row_l1_norms: the
// head's ||w_r||_1 ([rows] floats, rounded up), once per model. certified_argmax writes argmax, max (its exact logit)
// and nonfinite of `out` for B rows (not lse, not the candidates); x: the head's input [B][H]; scratch of
// certify_scratch_bytes(B, V).
bool certify_supported(GgmlType type, int64_t V, int64_t H);
size_t certify_scratch_bytes(int B, int64_t V);
Status row_l1_norms(GgmlType type, const void* w, int64_t rows, int64_t cols, float* l1, cudaStream_t st);
Status certified_argmax(GgmlType type, const float* approx, const float* x, const void* w, const float* l1, int B,
                        int64_t V, int64_t H, void* scratch, size_t scratch_bytes, const SelectResultDev& out,
                        cudaStream_t st);

enum class Precision { kFast, kPrecise };
const char* precision_name(Precision p);  // "fast" / "precise"

struct CudaModelOptions {
  int device = 0;
  int max_tokens = kMaxStepTokens;  // tokens per step: short prefills run in steps of this many, decode batches up to it
  bool use_graphs = true;           // capture decode steps in CUDA graphs
  Precision precision = Precision::kFast;  // of the piece prefill (see the file comment)
  int prefill_piece = 4096;                // tokens per prefill piece (bounds the prefill scratch)
  int prefill_min_tokens = 16;             // prompts of fewer tokens run the step path
  // Fast mode's GEMM inputs: -1 = the measured default (prefill::default_gemm_inputs: f16, the GDN qkv
  // projection f16 with split activations), else a prefill::GemmInputs value for every product (0 f32, 1 tf32,
  // 2 bf16, 3 f16, 4 f16 split), for accuracy and speed experiments.
  int fast_gemm_inputs = -1;
  // kv19: the attention layers' K / V caches in f16 instead of f32: half their memory and half the bytes the decode
  // attention reads, at the f16 rounding of every cached value (an approximation of the fp32 reference; error
  // measured in the README). Also DS_KV_F16=1 in the environment.
  bool kv_f16 = false;
  // st20: the Gated DeltaNet recurrent states in f16 instead of f32: half their memory and half the bytes the decode
  // step's delta rule reads and writes (at batch 64 on the 9B, more than the weights), at one f16 rounding of every
  // state value per step (the update itself is float; an approximation of the fp32 reference; error measured in
  // the README). Also DS_STATE_F16=1 in the environment.
  bool state_f16 = false;
  // lz23: the lazy delta rule (src/cuda/model/kernels_gdn_lazy.cu): each GDN state written every gdn_lazy-th decode
  // token instead of every token (a small per-head history in between), so a batched step moves about half the
  // state bytes. The state stays f32 and the state written is gdn_kernel's, bit for bit; the outputs of the steps
  // between are the same sums in another order (float rounding). 0 = off; 2 .. 16; also DS_GDN_LAZY=N.
  int gdn_lazy = 0;
  // cg38: decode_select steps whose rows all want only the argmax (greedy, no logprobs) run the output head in its
  // hi-only bound form and take each row's exact argmax by certified_argmax (the same tokens as an exact head; its
  // logits rows are recomputed exactly if last_row / copy_last_row asks). Where the head is Q6_K on the wgmma ring
  // (sm_90a, 25..64 rows, n_embd a multiple of 2048). DS_HEAD_CERTIFY=0 in the environment turns it off.
  bool certify_head = true;
};

class CudaModel;

// One sequence's device state (see the file comment for the layout). Created by CudaModel::create_state,
// usable with that model only; reset and dropped independently of the model and of other sequences.
class CudaSeqState {
 public:
  ~CudaSeqState() = default;
  CudaSeqState(const CudaSeqState&) = delete;
  CudaSeqState& operator=(const CudaSeqState&) = delete;

  int64_t max_ctx() const { return max_ctx_; }
  int64_t n_past() const { return n_past_; }  // tokens processed so far (the next token's position)
  size_t bytes() const { return buf_.size(); }
  // Back to an empty sequence: zero conv windows and delta-rule states, n_past = 0 (synchronous).
  Status reset();

 private:
  friend class CudaModel;
  CudaSeqState() = default;
  const CudaModel* owner_ = nullptr;
  cudaStream_t stream_ = nullptr;  // the owner's stream: state writes stay ordered with its steps
  int64_t max_ctx_ = 0, n_past_ = 0;
  size_t rec_bytes_ = 0;  // the recurrent part at the start of buf_ (zeroed by reset)
  DeviceBuffer buf_;
};

// A device copy of one sequence's state after n_tokens tokens: the recurrent part and the KV rows in use.
class CudaSnapshot {
 public:
  int64_t n_tokens() const { return n_tokens_; }
  int64_t max_ctx() const { return max_ctx_; }
  size_t bytes() const { return buf_.size(); }

 private:
  friend class CudaModel;
  const CudaModel* owner_ = nullptr;
  int64_t n_tokens_ = 0, max_ctx_ = 0;
  DeviceBuffer buf_;
};

// Timing of one op of a profiled step (CudaModel::profile_decode).
struct KernelTiming {
  std::string name;    // dump-style name, e.g. "L3.attn.qkv_proj" ("L*" aggregated by the caller if wanted)
  std::string kind;    // op kind, e.g. "matvec Q4_K", "gdn", "attention"
  double ms = 0;       // GPU time between the events around the op
  double bytes = 0;    // bytes the op must move (weights, state, activations), counted not measured
  double flops = 0;    // 2·T·rows·cols for matrix products (effective TFLOP/s in the breakdown), else 0
};

class CudaModel {
 public:
  ~CudaModel();
  CudaModel(const CudaModel&) = delete;
  CudaModel& operator=(const CudaModel&) = delete;

  // Uploads the trunk of a loaded (and checked) CPU model. The CPU model (and its GGUF mapping) may be
  // dropped afterwards. Errors: a matrix type with no CUDA kernel (naming tensor and type), a shape the
  // kernels do not handle, no GPU, out of device memory.
  static Result<std::unique_ptr<CudaModel>> load(const Qwen35Model& m, const CudaModelOptions& o = {});

  const Qwen35Config& cfg() const { return cfg_; }
  const CudaModelOptions& options() const { return opt_; }
  size_t weight_bytes() const { return weight_bytes_; }
  // Bytes of a state (or of a snapshot) of max_ctx positions: the recurrent part, then the K / V rows.
  size_t state_bytes(int64_t max_ctx) const;
  size_t recurrent_state_bytes() const { return rec_bytes_; }
  size_t kv_bytes_per_token() const { return kv_bytes_per_pos_; }
  bool kv_f16() const;
  bool state_f16() const;  // the GDN states are f16 (CudaModelOptions::state_f16 or DS_STATE_F16=1)  // the K / V caches hold f16 (CudaModelOptions::kv_f16 or DS_KV_F16=1)

  Result<std::unique_ptr<CudaSeqState>> create_state(int64_t max_ctx) const;

  // Runs tokens of one sequence at positions n_past .. n_past+T-1 (pieces or steps, see the file comment) and
  // advances it.
  // logits_out (host memory; may be null for no logits) receives [T, V] floats (all_logits) or [1, V] (the
  // last token). Errors leave the state unchanged only when they are caught before the GPU runs (bad token,
  // context overflow, wrong state).
  Status prefill(CudaSeqState& s, std::span<const int32_t> tokens, float* logits_out, bool all_logits,
                 const DumpFn& dump = {});

  // Whether this config's shapes fit the piece prefill kernels (else every prefill runs the step path).
  bool piece_prefill_supported() const;

  // One token for each of B sequences (distinct states of one max_ctx, B <= max_tokens) in one step;
  // logits_out (host) receives [B, V], row i for seqs[i]. With use_graphs (and no dump) the step is a CUDA
  // graph replay. logits_out may be null: the logits then stay in last_logits() (no host copy).
  Status decode(std::span<CudaSeqState* const> seqs, std::span<const int32_t> tokens, float* logits_out,
                const DumpFn& dump = {});
  // The logits of the last step that produced any, [rows, V] in pinned host memory; valid until the next call.
  const float* last_logits() const;

  // decode() for samplers (issue 7): the logits stay on the device; what comes to the host is, per row, the
  // selection of select_rows (k best, lse if want_lse) into `sel` (pinned host arrays, valid until the next call)
  // and the full rows listed in full_rows (increasing) into full_out ([n, V] host floats). Needs
  // select_supported(n_vocab).
  Status decode_select(std::span<CudaSeqState* const> seqs, std::span<const int32_t> tokens, int k, bool want_lse,
                       std::span<const int32_t> full_rows, float* full_out, SelectResultDev& sel);
  // decode_select in two halves (host13): begin enqueues the step, the selection and the downloads and returns
  // without waiting; end waits for them and hands over what decode_select does. In between, only save() and
  // copy_last_row() of the previous step may be called (every other call reuses the step's host staging).
  Status decode_select_begin(std::span<CudaSeqState* const> seqs, std::span<const int32_t> tokens, int k,
                             bool want_lse, std::span<const int32_t> full_rows);
  Status decode_select_end(float* full_out, SelectResultDev& sel);
  // Row `row` of the last decode_select's logits into host memory ([V] floats); valid until the next step.
  Status last_row(int row, float* out) const;
  // Enqueues a copy of that row to `dst` (device or pinned host memory, [V] floats) on the model's stream: ordered
  // before the next step overwrites it, complete once the stream is (no host synchronisation here).
  Status copy_last_row(int row, float* dst) const;

  // The copies are ordered on the model's stream (no host synchronisation, host13): every later step, restore and
  // save sees them done; a reader outside the stream synchronises first (download() does).
  Result<std::unique_ptr<CudaSnapshot>> save(const CudaSeqState& s) const;
  // save() into `reuse` (a snapshot of this model, or null) when its buffer holds the state, else into a new
  // buffer with room for max(n_past, capacity_tokens) positions: a caller that recycles snapshots (the engine's
  // CUDA backend) saves a cudaMalloc / cudaFree pair per snapshot. bytes() is the buffer's size.
  Result<std::unique_ptr<CudaSnapshot>> save(const CudaSeqState& s, std::unique_ptr<CudaSnapshot> reuse,
                                             int64_t capacity_tokens) const;
  // The state as host floats, in the snapshot layout: the recurrent part (conv windows, delta-rule states; the
  // 256-byte padding included) then, per attention layer, the K rows and V rows in use. For tests.
  Result<std::vector<float>> download(const CudaSeqState& s) const;
  Status restore(CudaSeqState& s, const CudaSnapshot& snap) const;

  // Runs one decode step (B sequences, no graph) with CUDA events around every op and returns the ops in
  // order, the output head (final_norm, output[...]) included; logits_out (B x n_vocab) may be null. The states
  // advance as with decode().
  Result<std::vector<KernelTiming>> profile_decode(std::span<CudaSeqState* const> seqs,
                                                   std::span<const int32_t> tokens, float* logits_out);

  struct Impl;  // device-side layout (defined in the .cu files)

 private:
  CudaModel() = default;
  Status check_step(std::span<CudaSeqState* const> seqs, std::span<const int32_t> tokens,
                    std::span<const int32_t> n_per_seq) const;
  // cg38: whether a decode_select step of B rows that want only their argmax runs the certified head.
  bool certify_takes(int B) const;
  // Row `row` of the last decode_select step's logits made exact where the hi-only head wrote it (cg38).
  Status exact_row(int row) const;
  Status prefill_pieces(CudaSeqState& s, std::span<const int32_t> tokens, float* logits_out, bool all_logits);
  Status prefill_piece(CudaSeqState& s, std::span<const int32_t> tokens, float* logits_out, bool all_logits,
                       bool want_last);
  // after: when set, the logits stay on the device (no download) and after(stream) enqueues more work before the
  // step's one host synchronisation. head_hi: the output head in its hi-only bound form (cg38; certified_argmax
  // follows in `after`), taken only for a step whose every row is a logits row, without dumps.
  using AfterStep = std::function<Status(cudaStream_t)>;
  Status run_step(std::span<CudaSeqState* const> seqs, std::span<const int32_t> tokens,
                  std::span<const int32_t> n_per_seq, bool all_logits, float* logits_out, const DumpFn& dump,
                  std::vector<KernelTiming>* prof, bool graph, const AfterStep* after = nullptr,
                  bool wait = true,  // wait = false: no host synchronisation (decode_select_begin; no prof / logits_out)
                  bool head_hi = false);

  // decode_select's device scratch and results (one allocation each, sized for max_tokens rows) and the
  // pinned host copy of the results; allocated on first use.
  struct SelectBuffers {
    DeviceBuffer scratch, result;
    void* host = nullptr;
    int rows = 0;  // rows of the last decode_select
    int pending = 0, pending_full = 0;  // rows and full rows of the step begun and not yet ended (0: none)
    DeviceBuffer cert_scratch;          // certified_argmax's (cg38)
    bool pending_hi = false, head_hi = false;  // the step begun / the last step ran the hi-only head (cg38)
    ~SelectBuffers();
  };

  Qwen35Config cfg_;
  CudaModelOptions opt_;
  size_t weight_bytes_ = 0, rec_bytes_ = 0, kv_bytes_per_pos_ = 0;
  std::unique_ptr<Impl> impl_;
  SelectBuffers sel_;
};

// Best-of-`reps` device-to-device copy of `bytes`, in bytes/s with read + write counted (the ceiling of
// performance.md). Needs 2 x bytes of free device memory.
Result<double> copy_bandwidth(size_t bytes, int reps = 5);

}  // namespace ds::cuda
