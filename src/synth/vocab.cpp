// Vocabularies for synthetic models: the tokenizer.* keys copied from another GGUF, or a small built-in
// byte-level BPE (GPT-2 byte-to-unicode symbols, merges learned here from a built-in paragraph) so a
// demo model needs no file outside the repository. Token types follow gguf-py (qwen35-spec.md §3.2).
#include <algorithm>
#include <map>
#include <set>

#include "synth/synth.h"

namespace ds::synth {
using gguf::Value;
namespace {

constexpr int32_t kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5;

// The paragraph the built-in merges are learned from (written for deltaserve).
constexpr const char* kCorpus =
    "The quick brown fox jumps over the lazy dog. This is a small model that was made from random "
    "numbers, so what it says has no meaning at all. It is here to show that the whole pipeline works: "
    "the text is split into tokens, the chat template turns the conversation into a prompt, the model "
    "runs a forward pass for every token, and the sampler picks the next token from the logits. "
    "Hello! Who are you? I am a language model. How are you today? I am fine, thank you. "
    "What is the weather like in the city? It is sunny and warm, with a light wind from the west. "
    "Please write a short story about a cat who lives in a library and reads books at night. "
    "Once upon a time there was a little cat. She loved to read, and every night she would open a new "
    "book and read until the sun came up. The people in the town never knew why the books were moved. "
    "Can you help me with my code? The function should return the sum of the numbers in the list, "
    "but it returns an error when the list is empty. Let me think about it step by step. "
    "First, we check whether the list has any items. Then we add them one by one and return the total. "
    "There are 24 hours in a day, 7 days in a week and 365 days in a year. "
    "The answer is 42. Thank you for your question; I hope this helps. Have a nice day!\n";

bool is_letter(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80; }
bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// An ASCII approximation of the qwen2 pre-tokenizer split: " word", single digits, " punctuation",
// whitespace runs. Only used to learn merges; the real tokenizer applies them within its own pieces.
std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> out;
  size_t i = 0, n = text.size();
  while (i < n) {
    size_t j = i;
    unsigned char c = text[i];
    if (is_letter(c) || (!is_digit(c) && !is_letter(c) && c != '\n' && c != '\r' && i + 1 < n && is_letter(text[i + 1]))) {
      j = i + 1;
      while (j < n && is_letter(text[j])) j++;
    } else if (is_digit(c)) {
      j = i + 1;
    } else if (is_space(c)) {
      j = i + 1;
      while (j < n && is_space(text[j]) && !(j + 1 < n && !is_space(text[j + 1]) && text[j] == ' ')) j++;
    } else {
      j = i + 1;
      while (j < n && !is_space(text[j]) && !is_letter(text[j]) && !is_digit(text[j])) j++;
    }
    out.push_back(text.substr(i, j - i));
    i = j;
  }
  return out;
}

void append_utf8(std::string& s, uint32_t cp) {
  if (cp < 0x80) {
    s += (char)cp;
  } else if (cp < 0x800) {
    s += (char)(0xC0 | (cp >> 6));
    s += (char)(0x80 | (cp & 0x3F));
  } else {
    s += (char)(0xE0 | (cp >> 12));
    s += (char)(0x80 | ((cp >> 6) & 0x3F));
    s += (char)(0x80 | (cp & 0x3F));
  }
}

// GPT-2 bytes_to_unicode: printable bytes map to themselves, the other 68 to U+0100 + k in byte order.
// Returns the symbol of each byte and the byte order of the vocabulary (printable ones first).
void byte_symbols(std::string sym[256], std::vector<int>& order) {
  std::vector<bool> printable(256, false);
  for (int b = 0; b < 256; b++) printable[b] = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  int extra = 0;
  for (int b = 0; b < 256; b++) {
    uint32_t cp = printable[b] ? (uint32_t)b : 256u + (uint32_t)extra++;
    sym[b].clear();
    append_utf8(sym[b], cp);
  }
  order.clear();
  for (int b = 0; b < 256; b++)
    if (printable[b]) order.push_back(b);
  for (int b = 0; b < 256; b++)
    if (!printable[b]) order.push_back(b);
}

Value str_array(std::vector<std::string> v) { return Value::make_str_array(std::move(v)); }

}  // namespace

const std::string& builtin_chat_template() {
  // ChatML turns as Qwen models use them; tools are listed in the system turn as JSON; thinking is on
  // unless enable_thinking is false (then an empty think block is pre-filled, as Qwen3 templates do).
  static const std::string t =
      "{%- if tools %}\n"
      "{{- '<|im_start|>system\\n' }}\n"
      "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}\n"
      "{{- '# Tools\\n\\nYou may call one or more functions. Function signatures:\\n<tools>' }}\n"
      "{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}\n"
      "{{- '\\n</tools>\\n\\nTo call a function, reply with <tool_call>\\n{\"name\": NAME, \"arguments\": ARGS}\\n"
      "</tool_call><|im_end|>\\n' }}\n"
      "{%- elif messages[0].role == 'system' %}\n"
      "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}\n"
      "{%- endif %}\n"
      "{%- for message in messages %}\n"
      "{%- if message.role == 'system' %}\n"
      "{%- if not loop.first %}{{- raise_exception('System message must be at the beginning.') }}{%- endif %}\n"
      "{%- elif message.role == 'tool' %}\n"
      "{{- '<|im_start|>user\\n<tool_response>\\n' + message.content + '\\n</tool_response><|im_end|>\\n' }}\n"
      "{%- else %}\n"
      "{{- '<|im_start|>' + message.role + '\\n' }}\n"
      "{%- if message.content %}{{- message.content }}{%- endif %}\n"
      "{%- if message.tool_calls %}\n"
      "{%- for tc in message.tool_calls %}\n"
      "{%- if tc.function %}{%- set tc = tc.function %}{%- endif %}\n"
      "{{- '\\n<tool_call>\\n{\"name\": \"' + tc.name + '\", \"arguments\": ' + (tc.arguments | tojson) + '}\\n</tool_call>' }}\n"
      "{%- endfor %}\n"
      "{%- endif %}\n"
      "{{- '<|im_end|>\\n' }}\n"
      "{%- endif %}\n"
      "{%- endfor %}\n"
      "{%- if add_generation_prompt %}\n"
      "{{- '<|im_start|>assistant\\n' }}\n"
      "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}\n"
      "{%- endif %}\n";
  return t;
}

Vocab builtin_vocab(int n_merges) {
  std::string sym[256];
  std::vector<int> order;
  byte_symbols(sym, order);
  std::vector<std::string> tokens;
  std::vector<int64_t> types;
  for (int b : order) tokens.push_back(sym[b]), types.push_back(kNormal);

  // Learn merges: words as symbol sequences, weighted by count; repeatedly merge the most frequent
  // adjacent pair (ties: the smaller pair, so the result does not depend on hash order).
  std::map<std::vector<std::string>, int64_t> words;
  for (const auto& w : split_words(kCorpus)) {
    std::vector<std::string> s;
    for (unsigned char c : w) s.push_back(sym[c]);
    words[s]++;
  }
  std::vector<std::string> merges;
  std::set<std::string> known(tokens.begin(), tokens.end());
  for (int m = 0; m < n_merges; m++) {
    std::map<std::pair<std::string, std::string>, int64_t> pairs;
    for (const auto& [w, c] : words)
      for (size_t i = 0; i + 1 < w.size(); i++) pairs[{w[i], w[i + 1]}] += c;
    const std::pair<std::string, std::string>* best = nullptr;
    int64_t best_n = 0;
    for (const auto& [p, c] : pairs)
      if (c > best_n) best = &p, best_n = c;
    if (!best) break;
    const auto [l, r] = *best;
    merges.push_back(l + " " + r);
    if (known.insert(l + r).second) tokens.push_back(l + r), types.push_back(kNormal);
    std::map<std::vector<std::string>, int64_t> next;
    for (const auto& [w, c] : words) {
      std::vector<std::string> s;
      for (size_t i = 0; i < w.size(); i++) {
        if (i + 1 < w.size() && w[i] == l && w[i + 1] == r) {
          s.push_back(l + r);
          i++;
        } else {
          s.push_back(w[i]);
        }
      }
      next[s] += c;
    }
    words = std::move(next);
  }

  const int64_t eot = (int64_t)tokens.size();
  for (const char* t : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) tokens.push_back(t), types.push_back(kControl);
  for (const char* t : {"<think>", "</think>", "<tool_call>", "</tool_call>"})
    tokens.push_back(t), types.push_back(kUserDefined);

  Vocab v;
  v.keys.push_back({"tokenizer.ggml.model", Value::make_str("gpt2")});
  v.keys.push_back({"tokenizer.ggml.pre", Value::make_str("qwen2")});
  v.keys.push_back({"tokenizer.ggml.tokens", str_array(std::move(tokens))});
  v.keys.push_back({"tokenizer.ggml.token_type", Value::make_i32_array(std::move(types))});
  v.keys.push_back({"tokenizer.ggml.merges", str_array(std::move(merges))});
  v.keys.push_back({"tokenizer.ggml.eos_token_id", Value::make_u32((uint32_t)eot + 2)});
  v.keys.push_back({"tokenizer.ggml.padding_token_id", Value::make_u32((uint32_t)eot)});
  v.keys.push_back({"tokenizer.ggml.add_bos_token", Value::make_bool(false)});
  v.keys.push_back({"tokenizer.chat_template", Value::make_str(builtin_chat_template())});
  return v;
}

Result<Vocab> vocab_from_gguf(const std::string& path) {
  DS_ASSIGN(auto f, gguf::File::open(path));
  Vocab v;
  for (const auto& kv : f.metadata())
    if (kv.key.rfind("tokenizer.", 0) == 0) v.keys.push_back(kv);
  auto find = [&](std::string_view k) -> const Value* {
    for (const auto& kv : v.keys)
      if (kv.key == k) return &kv.value;
    return nullptr;
  };
  const Value* toks = find("tokenizer.ggml.tokens");
  if (!toks || toks->type != gguf::ValueType::ARRAY || toks->elem_type != gguf::ValueType::STRING || toks->arr_s.empty())
    return err("synth: {}: no vocabulary: expected a non-empty string array 'tokenizer.ggml.tokens'", path);
  const Value* types = find("tokenizer.ggml.token_type");
  if (types && (types->type != gguf::ValueType::ARRAY || types->array_size() != toks->arr_s.size() ||
                (types->elem_type != gguf::ValueType::INT32)))
    return err("synth: {}: 'tokenizer.ggml.token_type' must be an INT32 array with one entry per token ({})", path,
               toks->arr_s.size());
  return v;
}

int64_t Vocab::size() const {
  for (const auto& kv : keys)
    if (kv.key == "tokenizer.ggml.tokens") return (int64_t)kv.value.arr_s.size();
  return 0;
}

void Vocab::pad_to(int64_t n) {
  for (auto& kv : keys) {
    if (kv.key == "tokenizer.ggml.tokens") {
      auto& t = kv.value.arr_s;
      for (int64_t i = (int64_t)t.size(); i < n; i++) t.push_back("[PAD" + std::to_string(i) + "]");
    } else if (kv.key == "tokenizer.ggml.token_type") {
      auto& t = kv.value.arr_i;
      while ((int64_t)t.size() < n) t.push_back(kUnused);
    }
  }
}

}  // namespace ds::synth
