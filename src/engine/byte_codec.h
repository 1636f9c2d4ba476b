// A byte-level TextCodec: token b < 256 is byte b, then ChatML-style added tokens. No model needs
// it; it lets the engine and server run end to end on the fake backend (tests, load-test dry runs).
#pragma once
#include "engine/text_codec.h"

namespace ds::engine {

class ByteCodec : public TextCodec {
 public:
  // Token ids of the added tokens.
  static constexpr int32_t kImEnd = 256, kImStart = 257, kThink = 258, kThinkEnd = 259, kToolCall = 260,
                           kToolCallEnd = 261, kEndOfText = 262, kVocab = 263;
  int32_t n_vocab() const override { return kVocab; }
  // Control tokens (<|im_start|>, <|im_end|>, <|endoftext|>) only with parse_special; the
  // user-defined ones (<think>, </think>, <tool_call>, </tool_call>) always, as Qwen's tokenizer does.
  std::vector<int32_t> encode(std::string_view text, bool parse_special) const override;
  std::string token_bytes(int32_t id) const override;
  bool is_eog(int32_t id) const override { return id == kImEnd || id == kEndOfText; }
  bool is_control(int32_t id) const override { return id == kImEnd || id == kImStart || id == kEndOfText; }
  bool is_special(int32_t id) const override { return id >= 256; }
  std::vector<std::string> control_texts() const override;
};

}  // namespace ds::engine
