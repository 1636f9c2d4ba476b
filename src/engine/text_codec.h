// What the engine needs from a tokenizer: encode text, the bytes each token stands for (to build
// the output text incrementally), and which tokens end a reply. An interface so the engine and the
// server can be tested with a stub; engine/tokenizer_codec.* adapts the real tokenizer.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ds::engine {

class TextCodec {
 public:
  virtual ~TextCodec() = default;
  virtual int32_t n_vocab() const = 0;
  // Token ids of `text`. With parse_special, the text of a control token (e.g. "<|im_start|>")
  // becomes that token; without it, such text is ordinary text.
  virtual std::vector<int32_t> encode(std::string_view text, bool parse_special) const = 0;
  // The bytes token `id` stands for in decoded text; possibly part of one UTF-8 character.
  // Control tokens give their text. Must be safe to call from several threads.
  virtual std::string token_bytes(int32_t id) const = 0;
  // End-of-generation tokens (EOS, <|im_end|>, <|endoftext|>): end a reply, never shown.
  virtual bool is_eog(int32_t id) const = 0;
  // Control tokens are left out of output text (as skip_special_tokens does); user-defined added
  // tokens such as <think> or <tool_call> are not control tokens and stay in the text.
  virtual bool is_control(int32_t id) const = 0;
  // Added tokens, control or user-defined (<think>, <tool_call>, ...): never part of a document that
  // a response_format constrains (grammar/token_mask.h).
  virtual bool is_special(int32_t id) const { return is_control(id); }
  // The texts parse_special recognises as control tokens.
  virtual std::vector<std::string> control_texts() const = 0;
};

}  // namespace ds::engine
