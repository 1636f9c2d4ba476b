// UTF-8 and Unicode helpers for the byte-level BPE tokenizer (qwen35-spec.md §3.2):
// - UTF-8 validation and repair: invalid input is replaced, never rejected inside the tokenizer.
//   Each "maximal subpart" of an ill-formed sequence becomes one U+FFFD (Unicode §3.9, the
//   practice of Rust's String::from_utf8_lossy, which Hugging Face's decoder uses), so decode and
//   the streaming decoder agree byte for byte.
// - NFC normalisation through utf8proc (Hugging Face's Qwen normaliser is NFC). utf8proc because NFC
//   needs the full Unicode decomposition, composition-exclusion and combining-class tables plus
//   canonical reordering and Hangul arithmetic; a maintained library keeps those exact.
// - The GPT-2 byte <-> unicode map used by byte-level BPE token strings.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"

namespace ds::tokenizer {

// Length of the valid UTF-8 sequence at s[i] (1..4), or 0 if the bytes there are not a complete,
// well-formed sequence (bad lead byte, bad continuation, overlong, surrogate, > U+10FFFF or cut off).
size_t utf8_seq_len(std::string_view s, size_t i);

// Offset of the first byte that starts an ill-formed sequence, or nullopt when s is valid UTF-8.
std::optional<size_t> find_invalid_utf8(std::string_view s);

// OK, or an error naming the first bad byte's offset and value ("<what>: invalid UTF-8 at byte 12 (0xff)").
Status validate_utf8(std::string_view s, std::string_view what = "text");

// Replaces every maximal subpart of an ill-formed sequence with U+FFFD; valid input is returned as is.
std::string sanitize_utf8(std::string_view s);

// Splits a byte string into a prefix that is complete UTF-8 (ill-formed parts already replaced by
// U+FFFD) and a tail of at most 3 bytes that is the valid start of a sequence not yet complete.
// The streaming decoder keeps the tail and waits for more bytes. Returns the tail length.
size_t utf8_incomplete_tail(std::string_view s);

// NFC of valid UTF-8 `s`, appended to `out`. Runs of characters that are NFC-inert (ASCII, Latin-1,
// CJK, Hangul syllables, kana, emoji, ...) are copied; only the chunks around other characters go
// through utf8proc, so common text costs a scan.
void nfc_append(std::string_view s, std::string& out);
std::string nfc(std::string_view s);

// Appends the UTF-8 encoding of code point cp.
void append_utf8(uint32_t cp, std::string& out);

// GPT-2's bytes_to_unicode: the printable Latin-1 bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF map
// to themselves; the other 68 bytes map, in increasing order, to U+0100, U+0101, ...
// (a fixed public table: openai/gpt-2 encoder.py, also Hugging Face's ByteLevel).
struct ByteMap {
  std::array<uint32_t, 256> byte_to_cp{};
  std::array<std::string, 256> byte_to_utf8;  // the same as UTF-8 text
  // code point -> byte, -1 if the code point is not in the map (only cps < 0x144 can be)
  std::array<int16_t, 0x144> cp_to_byte{};
  static const ByteMap& get();
};

// Maps a byte-level token string back to bytes. Returns nullopt if some character of `piece` is
// not in the byte map (Hugging Face's ByteLevel decoder then keeps that token's text as is).
std::optional<std::string> byte_level_decode(std::string_view piece);
// Maps raw bytes to the byte-level string (e.g. " hi" -> "Ġhi").
std::string byte_level_encode(std::string_view bytes);

}  // namespace ds::tokenizer
