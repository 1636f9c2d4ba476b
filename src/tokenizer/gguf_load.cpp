// Tokenizer::from_gguf: reads the tokenizer.ggml.* keys (qwen35-spec.md §3.2) into a Vocab.
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace ds::tokenizer {
namespace {

Result<std::optional<int32_t>> optional_id(const gguf::File& f, std::string_view key) {
  if (!f.has(key)) return std::optional<int32_t>{};
  auto v = f.get_uint(key);
  if (!v.ok()) return err("tokenizer: {}", v.error().message);  // gguf errors name the file
  if (*v > (uint64_t)INT32_MAX) return err("tokenizer: {} = {} is not a token id ({})", key, *v, f.path());
  return std::optional<int32_t>((int32_t)*v);
}

}  // namespace

Result<Tokenizer> Tokenizer::from_gguf(const gguf::File& f) {
  Vocab v;
  auto wrap = [](const Error& e) { return err("tokenizer: {}", e.message); };  // gguf errors name the file
  {
    auto model = f.get_string("tokenizer.ggml.model");
    if (!model.ok()) return wrap(model.error());
    v.model = std::move(*model);
  }
  if (v.model != "gpt2") {
    return err("tokenizer: model '{}' (tokenizer.ggml.model) is not supported; supported: gpt2 (byte-level BPE) ({})",
               v.model, f.path());
  }
  if (!f.has("tokenizer.ggml.pre")) {
    return err("tokenizer: tokenizer.ggml.pre is missing; supported pre-tokenizers: qwen2, qwen35 ({})", f.path());
  }
  {
    auto pre = f.get_string("tokenizer.ggml.pre");
    if (!pre.ok()) return wrap(pre.error());
    v.pre = std::move(*pre);
  }
  {
    auto tokens = f.get_string_array("tokenizer.ggml.tokens");
    if (!tokens.ok()) return wrap(tokens.error());
    v.tokens = std::move(*tokens);
  }
  {
    auto merges = f.get_string_array("tokenizer.ggml.merges");
    if (!merges.ok()) return wrap(merges.error());
    v.merges = std::move(*merges);
  }
  if (f.has("tokenizer.ggml.token_type")) {
    auto types = f.get_int_array("tokenizer.ggml.token_type");
    if (!types.ok()) return wrap(types.error());
    v.types.reserve(types->size());
    for (size_t i = 0; i < types->size(); i++) {
      int64_t t = (*types)[i];
      if (t < 0 || t > 6) {
        return err("tokenizer: tokenizer.ggml.token_type[{}] = {}, expected 0..6 ({})", i, t, f.path());
      }
      v.types.push_back((int32_t)t);
    }
  }
  DS_ASSIGN(v.eos_id, optional_id(f, "tokenizer.ggml.eos_token_id"));
  DS_ASSIGN(v.bos_id, optional_id(f, "tokenizer.ggml.bos_token_id"));
  DS_ASSIGN(v.pad_id, optional_id(f, "tokenizer.ggml.padding_token_id"));
  auto t = from_vocab(std::move(v));
  if (!t.ok()) return err("{} ({})", t.error().message, f.path());
  return t;
}

}  // namespace ds::tokenizer
