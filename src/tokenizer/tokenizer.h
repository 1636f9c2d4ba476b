// Byte-level BPE tokenizer of Qwen3 / Qwen3.5 GGUF files (qwen35-spec.md §3.2), matching Hugging
// Face `tokenizers` on the Qwen tokenizer.json files token for token. encode(text):
//   1. invalid UTF-8 is repaired: each maximal ill-formed subpart becomes U+FFFD (never an error;
//      callers that want to reject bad input use validate_utf8() from unicode.h first);
//   2. added tokens are cut out, leftmost-longest: USER_DEFINED (type 4, e.g. <think>) always,
//      CONTROL (type 3, e.g. <|im_start|>) only with parse_special; without it a control token's
//      text is ordinary text, so user content can never inject a control token;
//   3. each remaining segment is NFC-normalised, split by the pre-tokenizer regex (pretokenizer.h),
//      mapped to byte-level symbols and merged by BPE (bpe.h; results cached per piece).
// decode(ids): token strings mapped back to bytes (GPT-2 byte map), ill-formed UTF-8 replaced by
// U+FFFD; StreamDecoder gives the same text incrementally. UNUSED ids (type 5, [PAD…]) and ids out
// of range decode to nothing and are never produced by encode.
// Known limits: a GGUF keeps only the token type, so an added token that Hugging Face marks
// special=false but llama.cpp's converter stores as CONTROL because it looks like <|…|> (Qwen's
// <|fim_prefix|> family) is cut out only with parse_special (llama.cpp behaves the same). Unicode
// tables come from the system's PCRE2 and utf8proc, which may trail Hugging Face's by a version or
// two for characters assigned in the newest Unicode releases.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace ds::gguf {
class File;
}

namespace ds::tokenizer {

// llama.cpp / gguf-py token types (tokenizer.ggml.token_type).
enum class TokenType : int32_t {
  Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6,
};

// The tokenizer as a GGUF stores it; from_vocab validates it.
struct Vocab {
  std::string model = "gpt2";         // tokenizer.ggml.model; only "gpt2" (byte-level BPE)
  std::string pre = "qwen2";          // tokenizer.ggml.pre: "qwen2" or "qwen35"
  std::vector<std::string> tokens;    // byte-level strings, id = index
  std::vector<int32_t> types;         // TokenType per token; empty = all Normal
  std::vector<std::string> merges;    // "left right", rank = index
  std::optional<int32_t> eos_id, bos_id, pad_id;
};

class Tokenizer {
 public:
  // Reads tokenizer.ggml.{model, pre, tokens, token_type, merges, eos/bos/padding_token_id}.
  static Result<Tokenizer> from_gguf(const gguf::File& file);
  static Result<Tokenizer> from_vocab(Vocab vocab);

  // Thread-safe (the piece cache is locked).
  std::vector<int32_t> encode(std::string_view text, bool parse_special = false) const;

  // Concatenated text of `ids`; skip_control drops CONTROL tokens (like HF's skip_special_tokens).
  std::string decode(std::span<const int32_t> ids, bool skip_control = false) const;
  // The bytes one token stands for (may be part of a UTF-8 character); empty for UNUSED/out of range.
  const std::string& token_bytes(int32_t id) const;
  // The token as stored in the vocabulary (byte-level form, e.g. "Ġhello").
  const std::string& token_text(int32_t id) const;
  std::optional<int32_t> token_id(std::string_view token_text) const;
  TokenType token_type(int32_t id) const;

  int32_t n_vocab() const;
  bool valid_id(int32_t id) const { return id >= 0 && id < n_vocab(); }
  bool is_control(int32_t id) const { return token_type(id) == TokenType::Control; }
  // CONTROL or USER_DEFINED: tokens cut out of text before BPE.
  bool is_added(int32_t id) const;

  int32_t eos_id() const;                // -1 if the file names none
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> pad_id() const;
  // Where generation stops by default: eos plus <|im_end|> and <|endoftext|> when present
  // (Qwen's generation_config lists both), without duplicates.
  std::vector<int32_t> stop_ids() const;

  const std::string& pre_tokenizer_name() const;

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

 private:
  Tokenizer();
  struct Impl;
  std::unique_ptr<Impl> impl_;
  friend class StreamDecoder;
};

// Incremental decoding for streaming output: feed ids one at a time and get back only complete
// UTF-8 text; a character split over several tokens comes out once its last byte arrives. The
// concatenation of every feed() and the final flush() equals Tokenizer::decode of all the ids.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool skip_control = false);
  std::string feed(int32_t id);
  // Text the caller may print now is returned by feed; flush() returns what is left at the end (a
  // dangling incomplete character becomes U+FFFD) and resets the decoder.
  std::string flush();
  void reset() { pending_.clear(); }
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tok_;
  bool skip_control_;
  std::string pending_;  // at most 3 bytes: the valid start of a character not yet complete
};

}  // namespace ds::tokenizer
