// Pre-tokenizer: splits (NFC-normalised, valid UTF-8) text into the pieces that BPE encodes one by
// one, with the split regex of the GGUF's `tokenizer.ggml.pre` (qwen35-spec.md §3.2), exactly as
// Hugging Face's `Split(pattern, behavior="isolated")` does: every match is a piece, and any text
// between matches would be one too (these regexes leave none).
//
// Why PCRE2: the regexes need \p{L}, \p{N}, \p{M} over all of Unicode, a (?i:...) group and a
// negative lookahead (\s+(?!\S)); PCRE2 with UTF + UCP runs them as written (no hand-written
// matcher to drift from the reference), and its JIT keeps a split at a few hundred MB/s.
// One deliberate rewrite: Hugging Face runs the regex with Oniguruma, whose Unicode \s is the
// White_Space property (\t-\r, U+0085, Zs, Zl, Zp); PCRE2's \s adds U+180E (Mongolian vowel
// separator, a format character since Unicode 6.3). So \s / \S become that explicit class.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace ds::tokenizer {

// The split regexes as Hugging Face's tokenizer.json files carry them.
// qwen2: Qwen2 / Qwen2.5 / Qwen3. qwen35: Qwen3.5, which adds \p{M} (combining marks stay in words).
inline constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kQwen35Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Replaces \s and \S (in and out of character classes) by Oniguruma's Unicode White_Space class.
std::string onig_compatible_pattern(std::string_view pattern);

class PreTokenizer {
 public:
  // name = the GGUF's tokenizer.ggml.pre ("qwen2", "qwen35"); other names give an error naming it.
  static Result<PreTokenizer> create(std::string_view name);
  // Any regex (tests); compiled with UTF | UCP and JIT.
  static Result<PreTokenizer> from_pattern(std::string_view pattern, std::string name = "custom");

  // Appends the pieces of `text` (valid UTF-8) to `out`, in order; they cover `text` exactly.
  void split(std::string_view text, std::vector<std::string_view>& out) const;
  std::vector<std::string_view> split(std::string_view text) const;

  const std::string& name() const;

  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

 private:
  PreTokenizer();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ds::tokenizer
