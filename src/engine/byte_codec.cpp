#include "engine/byte_codec.h"

namespace ds::engine {

namespace {
struct Added {
  const char* text;
  int32_t id;
  bool control;
};
constexpr Added kAdded[] = {
    {"<|im_end|>", ByteCodec::kImEnd, true},       {"<|im_start|>", ByteCodec::kImStart, true},
    {"<think>", ByteCodec::kThink, false},         {"</think>", ByteCodec::kThinkEnd, false},
    {"<tool_call>", ByteCodec::kToolCall, false},  {"</tool_call>", ByteCodec::kToolCallEnd, false},
    {"<|endoftext|>", ByteCodec::kEndOfText, true},
};
}  // namespace

std::vector<int32_t> ByteCodec::encode(std::string_view text, bool parse_special) const {
  std::vector<int32_t> out;
  size_t i = 0;
  while (i < text.size()) {
    bool matched = false;
    for (const Added& a : kAdded) {
      if ((!a.control || parse_special) && text.substr(i).starts_with(a.text)) {
        out.push_back(a.id);
        i += std::string_view(a.text).size();
        matched = true;
        break;
      }
    }
    if (!matched) out.push_back(static_cast<unsigned char>(text[i++]));
  }
  return out;
}

std::string ByteCodec::token_bytes(int32_t id) const {
  if (id >= 0 && id < 256) return std::string(1, static_cast<char>(id));
  for (const Added& a : kAdded)
    if (a.id == id) return a.text;
  return {};
}

std::vector<std::string> ByteCodec::control_texts() const {
  std::vector<std::string> out;
  for (const Added& a : kAdded)
    if (a.control) out.push_back(a.text);
  return out;
}

}  // namespace ds::engine
