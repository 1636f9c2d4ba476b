// The engine's TextCodec over the real tokenizer (tokenizer/tokenizer.h): encode, per-token bytes,
// end-of-generation ids (eos, <|im_end|>, <|endoftext|>) and the control tokens' texts.
#pragma once
#include <unordered_set>

#include "engine/text_codec.h"
#include "tokenizer/tokenizer.h"

namespace ds::engine {

class TokenizerCodec : public TextCodec {
 public:
  // `tok` must outlive the codec.
  explicit TokenizerCodec(const tokenizer::Tokenizer& tok);
  int32_t n_vocab() const override { return tok_.n_vocab(); }
  std::vector<int32_t> encode(std::string_view text, bool parse_special) const override {
    return tok_.encode(text, parse_special);
  }
  std::string token_bytes(int32_t id) const override { return tok_.token_bytes(id); }
  bool is_eog(int32_t id) const override { return eog_.count(id) > 0; }
  bool is_control(int32_t id) const override { return tok_.valid_id(id) && tok_.is_control(id); }
  bool is_special(int32_t id) const override { return tok_.valid_id(id) && tok_.is_added(id); }
  std::vector<std::string> control_texts() const override { return control_texts_; }

 private:
  const tokenizer::Tokenizer& tok_;
  std::unordered_set<int32_t> eog_;
  std::vector<std::string> control_texts_;
};

}  // namespace ds::engine
