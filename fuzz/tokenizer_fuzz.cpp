// libFuzzer target for the byte-level BPE tokenizer (tokenizer/tokenizer.h) on a real Qwen vocabulary: user text
// is arbitrary bytes. The vocabulary is the GGUF named by DS_FUZZ_VOCAB (tools/fuzz.sh unpacks the fixtures'
// vocab-qwen35re.gguf.xz). Input: byte 0 bit 0 = parse_special, the rest = the text. Properties:
//  * every id encode gives is in range;
//  * decode(encode(text)) is the text with ill-formed UTF-8 replaced by U+FFFD and NFC applied, where the text
//    has no '<' (added tokens such as <think> are cut out before normalisation, as Hugging Face does, so NFC can
//    differ at their edges);
//  * the streaming decoder gives decode's text: the concatenation of feed() over the ids and flush().
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

using namespace ds;

namespace {
std::unique_ptr<tokenizer::Tokenizer> g_tok;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* path = std::getenv("DS_FUZZ_VOCAB");
  if (!path) {
    std::fprintf(stderr, "tokenizer_fuzz: set DS_FUZZ_VOCAB to a Qwen vocabulary GGUF\n");
    std::exit(2);
  }
  auto f = gguf::File::open(path);
  if (!f.ok()) {
    std::fprintf(stderr, "tokenizer_fuzz: %s\n", f.error().message.c_str());
    std::exit(2);
  }
  auto t = tokenizer::Tokenizer::from_gguf(*f);
  if (!t.ok()) {
    std::fprintf(stderr, "tokenizer_fuzz: %s\n", t.error().message.c_str());
    std::exit(2);
  }
  g_tok = std::make_unique<tokenizer::Tokenizer>(std::move(*t));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const bool parse_special = data[0] & 1;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const auto ids = g_tok->encode(text, parse_special);
  for (int32_t id : ids)
    if (!g_tok->valid_id(id)) __builtin_trap();
  const std::string back = g_tok->decode(ids);
  if (text.find('<') == std::string_view::npos && back != tokenizer::nfc(tokenizer::sanitize_utf8(text)))
    __builtin_trap();
  tokenizer::StreamDecoder sd(*g_tok);
  std::string streamed;
  for (int32_t id : ids) streamed += sd.feed(id);
  streamed += sd.flush();
  if (streamed != back) __builtin_trap();
  return 0;
}
