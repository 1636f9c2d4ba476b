// Synthetic Qwen3.5 GGUF models: the real shapes of each released size (qwen35-spec.md §7) with random
// weights, in the layout llama.cpp's converter + llama-quantize write (arch `qwen35`, §2-§3; tensor
// order and Q4_K_M mix as llama-quantize produces them; performance.md "The synthetic models"). Both
// llama.cpp and deltaserve load the same file, so speed can be compared without real checkpoints.
// The plan (names, types, shapes) is separate from the writing, so parameter counts and file sizes can
// be checked without generating data. The `tiny` preset holds real Gaussian weights, quantized properly.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/ggml_type.h"
#include "gguf/gguf.h"

namespace ds::synth {

// The weight-type mixes synth can write (llama.cpp file types: Q4_K_M = 15, Q3_K_M = 12, Q5_K_M = 17, Q8_0 = 7,
// BF16 = 32).
enum class Mix { Q4_K_M, Q3_K_M, Q5_K_M, Q8_0, BF16 };
Result<Mix> parse_mix(std::string_view name);  // case-insensitive "Q4_K_M" | "Q3_K_M" | "Q5_K_M" | "Q8_0" | "BF16"
std::string_view mix_name(Mix m);
uint32_t mix_file_type(Mix m);

// One model size: every hyper-parameter the qwen35.* metadata carries.
struct Shape {
  std::string size;           // "0.8B", ..., "tiny"
  int64_t n_embd = 0;         // H
  int64_t n_ff = 0;           // I
  int64_t n_layer = 0;        // L (trunk)
  int64_t n_head = 0;         // nh
  int64_t n_head_kv = 0;      // nkv
  int64_t head_dim = 0;       // hd
  int64_t n_k_heads = 0;      // nk
  int64_t n_v_heads = 0;      // nv
  int64_t d_state = 0;        // dk = dv
  int64_t conv_kernel = 4;    // Kc
  int64_t n_rot = 0;          // rope.dimension_count
  std::vector<int64_t> rope_sections;  // 4 entries
  double rope_base = 1e7;
  double rms_eps = 1e-6;
  int64_t n_ctx_train = 262144;
  int64_t full_attn_interval = 4;
  bool tied = true;           // no output.weight
  int64_t n_vocab = 248320;   // padded vocabulary size (0 = the vocabulary's own size, tiny)
  bool real_weights = false;  // Gaussian weights quantized properly (tiny) instead of random block bytes

  int64_t key_dim() const { return n_k_heads * d_state; }
  int64_t value_dim() const { return n_v_heads * d_state; }
  int64_t conv_dim() const { return 2 * key_dim() + value_dim(); }
  bool is_full_attention(int64_t layer) const { return (layer + 1) % full_attn_interval == 0; }
};
Result<Shape> preset(std::string_view size);  // "0.8B" | "2B" | "4B" | "9B" | "27B" | "tiny"
std::vector<std::string> preset_names();

// How a tensor's values are made.
enum class Init { Matrix, Norm, SsmA, DtBias, Conv };

struct PlannedTensor {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<int64_t> ne;  // ggml order, ne[0] contiguous
  Init init = Init::Matrix;
  uint64_t n_elements() const;
  uint64_t n_bytes() const;
};

// Every tensor of the model, in llama-quantize's order (by layer, global tensors first, then by name:
// llama.cpp's weight_name_comparer), with the types of `mix`. `mtp` adds the nextn block as layer L.
// n_vocab is the final vocabulary size.
std::vector<PlannedTensor> plan_tensors(const Shape& s, Mix mix, bool mtp, int64_t n_vocab);
uint64_t count_params(const std::vector<PlannedTensor>& plan);
uint64_t count_bytes(const std::vector<PlannedTensor>& plan);
// The Q4_K_M rule for attn_v / attn_qkv / ffn_down (llama-quant.cpp use_more_bits; n = all blocks).
bool use_more_bits(int64_t i, int64_t n);
// gguf-py's size label ("752M", "9.0B", "3.9M").
std::string size_label(uint64_t n_params);

// A tokenizer as the GGUF carries it (tokenizer.* keys, in the order they are written).
struct Vocab {
  std::vector<gguf::KeyValue> keys;  // tokenizer.ggml.* and tokenizer.chat_template, in file order
  int64_t size() const;
  // Pads tokens (with "[PAD<id>]") and token_type (with 5 = UNUSED) to n entries (no-op if n <= size).
  void pad_to(int64_t n);
};
// The built-in vocabulary: 256 byte tokens (GPT-2 byte-to-unicode form), merges learned from a built-in
// English paragraph, <|endoftext|> <|im_start|> <|im_end|> (CONTROL), <think> </think> <tool_call>
// </tool_call> (USER_DEFINED); eos <|im_end|>, pad <|endoftext|>, pre "qwen2"; the built-in chat template.
Vocab builtin_vocab(int n_merges = 300);
// The tokenizer.* keys of another GGUF (e.g. fixtures/tokenizer/vocab-qwen3.gguf).
Result<Vocab> vocab_from_gguf(const std::string& path);
// A small ChatML template (system / user / assistant / tool turns, tools, enable_thinking).
const std::string& builtin_chat_template();

struct Options {
  std::string size = "tiny";
  Mix mix = Mix::Q8_0;
  std::string vocab_path;  // empty: built-in vocabulary
  bool mtp = false;
  uint64_t seed = 42;
  int threads = 0;         // 0: OpenMP default
  std::string out;
};

// The writer with all metadata and tensor infos, ready for write_header (no data yet).
struct Prepared {
  Shape shape;
  std::vector<PlannedTensor> plan;
  gguf::Writer writer;
  uint64_t n_params = 0;
  uint64_t file_bytes = 0;
};
Result<Prepared> prepare(const Options& o);

// Progress callback: bytes of tensor data written so far, out of total.
using ProgressFn = std::function<void(uint64_t done, uint64_t total)>;
// Writes the file (to OUT.tmp, renamed to OUT at the end), streaming tensor data in chunks.
Status write_model(const Options& o, const ProgressFn& progress = {});

// Fills the data of tensor `index` of the plan, deterministically from (seed, index), in pieces of
// whole blocks: elements [first, first + n) of the flattened tensor (first, n multiples of the block).
void fill_tensor(const Shape& s, const PlannedTensor& t, uint64_t seed, size_t index, uint64_t first, uint64_t n,
                 uint8_t* dst);

}  // namespace ds::synth
