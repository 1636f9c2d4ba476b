#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pretokenizer.h"

#include <pcre2.h>

#include "core/check.h"
#include "core/log.h"

namespace ds::tokenizer {
namespace {

// Oniguruma's Unicode \s: White_Space = TAB..CR, U+0085, and the Z categories.
constexpr std::string_view kSpaceItems = R"(\t-\r\x{85}\p{Z})";

// Per-thread matching state: match data and a JIT stack big enough for any input (PCRE2's default
// 32 KiB machine stack is enough for these regexes, the larger one is a safety margin).
struct ThreadState {
  pcre2_match_data* md = nullptr;
  pcre2_match_context* mc = nullptr;
  pcre2_jit_stack* js = nullptr;
  ThreadState() {
    md = pcre2_match_data_create(1, nullptr);
    mc = pcre2_match_context_create(nullptr);
    js = pcre2_jit_stack_create(32 * 1024, 1024 * 1024, nullptr);
    if (mc && js) pcre2_jit_stack_assign(mc, nullptr, js);
  }
  ~ThreadState() {
    if (js) pcre2_jit_stack_free(js);
    if (mc) pcre2_match_context_free(mc);
    if (md) pcre2_match_data_free(md);
  }
};

ThreadState& thread_state() {
  thread_local ThreadState ts;
  return ts;
}

}  // namespace

std::string onig_compatible_pattern(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 64);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); i++) {
    char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      char e = p[i + 1];
      i++;
      if (e == 's') {
        if (in_class) {
          out += kSpaceItems;
        } else {
          out += '[';
          out += kSpaceItems;
          out += ']';
        }
      } else if (e == 'S') {
        // \S inside a class would need a class difference; none of the supported regexes has one.
        DS_CHECK(!in_class, "\\S inside a character class is not supported: {}", p);
        out += "[^";
        out += kSpaceItems;
        out += ']';
      } else {
        out += '\\';
        out += e;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' (or '^]') right after '[' is a literal, not the end of the class.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

struct PreTokenizer::Impl {
  std::string name;
  std::string pattern;
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Impl() {
    if (code) pcre2_code_free(code);
  }
};

PreTokenizer::PreTokenizer() : impl_(std::make_unique<Impl>()) {}
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

const std::string& PreTokenizer::name() const { return impl_->name; }

Result<PreTokenizer> PreTokenizer::create(std::string_view name) {
  if (name == "qwen2") return from_pattern(kQwen2Regex, std::string(name));
  if (name == "qwen35") return from_pattern(kQwen35Regex, std::string(name));
  return err("tokenizer: pre-tokenizer '{}' (tokenizer.ggml.pre) is not supported; supported: qwen2, qwen35",
             name);
}

Result<PreTokenizer> PreTokenizer::from_pattern(std::string_view pattern, std::string name) {
  PreTokenizer pt;
  pt.impl_->name = std::move(name);
  pt.impl_->pattern = onig_compatible_pattern(pattern);
  int errcode = 0;
  PCRE2_SIZE erroff = 0;
  pt.impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pt.impl_->pattern.data()),
                                 pt.impl_->pattern.size(), PCRE2_UTF | PCRE2_UCP, &errcode, &erroff,
                                 nullptr);
  if (!pt.impl_->code) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(errcode, buf, sizeof buf);
    return err("tokenizer: split regex of '{}': {} at offset {}", pt.impl_->name,
               reinterpret_cast<const char*>(buf), erroff);
  }
  // JIT is an optimisation: without it (e.g. a build without JIT support) the interpreter runs.
  pt.impl_->jit = pcre2_jit_compile(pt.impl_->code, PCRE2_JIT_COMPLETE) == 0;
  if (!pt.impl_->jit) spdlog::warn("tokenizer: PCRE2 JIT unavailable, using the slower interpreter");
  return pt;
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& out) const {
  ThreadState& ts = thread_state();
  DS_CHECK(ts.md && ts.mc, "out of memory creating PCRE2 match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const size_t n = text.size();
  size_t pos = 0;
  while (pos < n) {
    int rc = pcre2_match(impl_->code, subject, n, pos, PCRE2_NO_UTF_CHECK, ts.md, ts.mc);
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
      // A resource limit (JIT stack, heap): retry with the interpreter before giving up.
      rc = pcre2_match(impl_->code, subject, n, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, ts.md, ts.mc);
    }
    if (rc == PCRE2_ERROR_NOMATCH) {
      out.push_back(text.substr(pos));
      return;
    }
    if (rc < 0) {
      // Never expected for these regexes; keeping the rest as one piece still encodes every byte.
      spdlog::warn("tokenizer: split regex failed (PCRE2 error {}) at byte {}; rest kept as one piece", rc,
                   pos);
      out.push_back(text.substr(pos));
      return;
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(ts.md);
    size_t start = ov[0], end = ov[1];
    if (start > pos) out.push_back(text.substr(pos, start - pos));  // an unmatched gap is a piece too
    if (end > start) {
      out.push_back(text.substr(start, end - start));
      pos = end;
    } else {
      // Empty match (impossible for the supported regexes): move one character on.
      size_t step = 1;
      while (start + step < n && ((uint8_t)text[start + step] & 0xC0) == 0x80) step++;
      out.push_back(text.substr(start, step));
      pos = start + step;
    }
  }
}

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> out;
  split(text, out);
  return out;
}

}  // namespace ds::tokenizer
