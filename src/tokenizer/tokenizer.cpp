#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <array>
#include <mutex>
#include <functional>

#include "core/log.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/unicode.h"

namespace ds::tokenizer {
namespace {

// Token text -> id: open addressing over the token list (a node-based map of 150k strings costs
// a cache miss per probe and most of the load time). The first id of a duplicate text wins.
class TokenIndex {
 public:
  void build(const std::vector<std::string>& tokens) {
    tokens_ = &tokens;
    size_t cap = 16;
    while (cap < tokens.size() * 2) cap <<= 1;
    slots_.assign(cap, 0);
    mask_ = cap - 1;
    for (size_t id = 0; id < tokens.size(); id++) {
      const uint64_t h = std::hash<std::string_view>{}(tokens[id]);
      size_t i = h & mask_;
      bool dup = false;
      for (; slots_[i] != 0; i = (i + 1) & mask_) {
        if ((slots_[i] >> 32) == (h >> 32) && tokens[(slots_[i] & 0xffffffffu) - 1] == tokens[id]) {
          dup = true;
          break;
        }
      }
      if (!dup) slots_[i] = (h >> 32 << 32) | (uint64_t)(id + 1);
    }
  }
  std::optional<int32_t> find(std::string_view s) const {
    if (slots_.empty()) return std::nullopt;
    const uint64_t h = std::hash<std::string_view>{}(s);
    for (size_t i = h & mask_; slots_[i] != 0; i = (i + 1) & mask_) {
      if ((slots_[i] >> 32) == (h >> 32)) {
        const int32_t id = (int32_t)(slots_[i] & 0xffffffffu) - 1;
        if ((*tokens_)[id] == s) return id;
      }
    }
    return std::nullopt;
  }

 private:
  const std::vector<std::string>* tokens_ = nullptr;
  std::vector<uint64_t> slots_;  // (high 32 bits of the hash) << 32 | (id + 1); 0 = empty
  size_t mask_ = 0;
};

struct AddedToken {
  std::string text;
  int32_t id;
  bool control;
};

struct Scratch {
  std::string normalized;
  std::vector<std::string_view> pieces;
  std::vector<int32_t> byte_ids;
  std::vector<int32_t> merged;
  BpeScratch bpe;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

const std::string kEmpty;

}  // namespace

struct Tokenizer::Impl {
  std::vector<std::string> tokens;
  std::vector<TokenType> types;
  std::vector<std::string> bytes;  // what each token decodes to
  TokenIndex by_text;
  MergeMap merges;
  std::array<int32_t, 256> byte_id{};
  std::optional<PreTokenizer> pre;
  // Added tokens by first byte, longest first (leftmost-longest matching).
  std::array<std::vector<AddedToken>, 256> added_by_first;
  std::array<bool, 256> added_first{};
  std::optional<int32_t> eos, bos, pad;

  mutable std::mutex cache_mu;
  mutable PieceCache cache;

  void encode_segment(std::string_view seg, std::vector<int32_t>& out) const;
  void encode_piece(std::string_view piece, Scratch& s, std::vector<int32_t>& out) const;
};

Tokenizer::Tokenizer() : impl_(std::make_unique<Impl>()) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Result<Tokenizer> Tokenizer::from_vocab(Vocab v) {
  if (v.model != "gpt2") {
    return err("tokenizer: model '{}' (tokenizer.ggml.model) is not supported; supported: gpt2 (byte-level BPE)",
               v.model);
  }
  if (v.tokens.empty()) return err("tokenizer: the vocabulary has no tokens");
  if (v.tokens.size() > (size_t)INT32_MAX) return err("tokenizer: {} tokens, more than int32 ids", v.tokens.size());
  if (!v.types.empty() && v.types.size() != v.tokens.size()) {
    return err("tokenizer: {} token types for {} tokens", v.types.size(), v.tokens.size());
  }
  Tokenizer t;
  Impl& m = *t.impl_;
  DS_ASSIGN(PreTokenizer pre, PreTokenizer::create(v.pre));
  m.pre.emplace(std::move(pre));

  const size_t n = v.tokens.size();
  m.types.assign(n, TokenType::Normal);
  for (size_t i = 0; i < v.types.size(); i++) {
    if (v.types[i] < 0 || v.types[i] > 6) {
      return err("tokenizer: token {} ('{}') has type {}, expected 0..6", i, v.tokens[i], v.types[i]);
    }
    m.types[i] = (TokenType)v.types[i];
  }
  auto check_special = [&](const std::optional<int32_t>& id, const char* what) -> Status {
    if (id && (*id < 0 || (size_t)*id >= n)) return err("tokenizer: {} id {} is outside the vocabulary (0..{})", what, *id, n - 1);
    return {};
  };
  DS_TRY(check_special(v.eos_id, "eos"));
  DS_TRY(check_special(v.bos_id, "bos"));
  DS_TRY(check_special(v.pad_id, "padding"));
  m.eos = v.eos_id;
  m.bos = v.bos_id;
  m.pad = v.pad_id;

  m.tokens = std::move(v.tokens);
  m.by_text.build(m.tokens);
  m.bytes.resize(n);
  for (size_t i = 0; i < n; i++) {
    if (m.types[i] == TokenType::Unused) continue;
    // Hugging Face's ByteLevel decoder: a token maps back to bytes if every character is in the
    // byte map, else its text is used as is.
    auto b = byte_level_decode(m.tokens[i]);
    m.bytes[i] = b ? std::move(*b) : m.tokens[i];
  }

  const ByteMap& bm = ByteMap::get();
  for (int b = 0; b < 256; b++) {
    auto it = m.by_text.find(bm.byte_to_utf8[b]);
    if (!it) {
      return err("tokenizer: no token for byte {:#04x} ('{}'); a byte-level BPE vocabulary needs all 256",
                 b, bm.byte_to_utf8[b]);
    }
    m.byte_id[b] = *it;
  }

  m.merges.reserve(v.merges.size());
  size_t dropped = 0;
  std::string joined;
  for (size_t r = 0; r < v.merges.size(); r++) {
    const std::string& mg = v.merges[r];
    size_t sp = mg.find(' ', 1);
    if (sp == std::string::npos || sp + 1 >= mg.size()) {
      return err("tokenizer: merge {} '{}' is not two tokens separated by a space", r, mg);
    }
    std::string_view a(mg.data(), sp), b(mg.data() + sp + 1, mg.size() - sp - 1);
    auto ia = m.by_text.find(a), ib = m.by_text.find(b);
    joined.assign(a);
    joined.append(b);
    auto ij = m.by_text.find(joined);
    if (!ia || !ib || !ij) {
      return err("tokenizer: merge {} '{}' names a token that is not in the vocabulary ('{}')", r, mg,
                 !ia ? a : !ib ? b : std::string_view(joined));
    }
    // BPE must never produce a control or unused token: text cannot inject them.
    TokenType jt = m.types[*ij];
    if (jt == TokenType::Control || jt == TokenType::Unused) {
      dropped++;
      continue;
    }
    m.merges.insert(*ia, *ib, (int32_t)r, *ij);
  }
  if (dropped) spdlog::warn("tokenizer: ignored {} merges that would produce control/unused tokens", dropped);

  for (size_t i = 0; i < n; i++) {
    if (m.types[i] != TokenType::Control && m.types[i] != TokenType::UserDefined) continue;
    const std::string& s = m.tokens[i];
    if (s.empty() || find_invalid_utf8(s)) {
      spdlog::warn("tokenizer: added token {} is empty or not UTF-8; it is never matched in text", i);
      continue;
    }
    // The first of duplicate texts wins, like the vocabulary lookup.
    if (*m.by_text.find(s) != (int32_t)i) continue;
    auto& bucket = m.added_by_first[(uint8_t)s[0]];
    bucket.push_back({s, (int32_t)i, m.types[i] == TokenType::Control});
    m.added_first[(uint8_t)s[0]] = true;
  }
  for (auto& bucket : m.added_by_first) {
    std::stable_sort(bucket.begin(), bucket.end(),
                     [](const AddedToken& x, const AddedToken& y) { return x.text.size() > y.text.size(); });
  }
  return t;
}

void Tokenizer::Impl::encode_piece(std::string_view piece, Scratch& s, std::vector<int32_t>& out) const {
  if (piece.size() == 1) {
    out.push_back(byte_id[(uint8_t)piece[0]]);
    return;
  }
  const bool cacheable = piece.size() <= PieceCache::kMaxPiece;
  uint64_t h = 0;
  if (cacheable) {
    h = PieceCache::hash(piece);
    std::lock_guard lock(cache_mu);
    if (cache.lookup(piece, h, out)) return;
  }
  s.byte_ids.resize(piece.size());
  for (size_t i = 0; i < piece.size(); i++) s.byte_ids[i] = byte_id[(uint8_t)piece[i]];
  s.merged.clear();
  bpe_merge(merges, s.byte_ids.data(), s.byte_ids.size(), s.bpe, s.merged);
  out.insert(out.end(), s.merged.begin(), s.merged.end());
  if (cacheable) {
    std::lock_guard lock(cache_mu);
    cache.insert(piece, h, s.merged.data(), s.merged.size());
  }
}

void Tokenizer::Impl::encode_segment(std::string_view seg, std::vector<int32_t>& out) const {
  if (seg.empty()) return;
  Scratch& s = scratch();
  s.normalized.clear();
  nfc_append(seg, s.normalized);
  s.pieces.clear();
  pre->split(s.normalized, s.pieces);
  for (std::string_view p : s.pieces) encode_piece(p, s, out);
}

std::vector<int32_t> Tokenizer::encode(std::string_view input, bool parse_special) const {
  const Impl& m = *impl_;
  std::string repaired;
  std::string_view text = input;
  if (find_invalid_utf8(input)) {
    repaired = sanitize_utf8(input);
    text = repaired;
  }
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  const size_t n = text.size();
  size_t seg = 0, i = 0;
  while (i < n) {
    if (!m.added_first[(uint8_t)text[i]]) {
      i++;
      continue;
    }
    const AddedToken* hit = nullptr;
    for (const AddedToken& a : m.added_by_first[(uint8_t)text[i]]) {
      if (text.compare(i, a.text.size(), a.text) == 0) {
        hit = &a;
        break;
      }
    }
    if (!hit) {
      i++;
      continue;
    }
    if (hit->control && !parse_special) {
      // Hugging Face consumes the match and leaves it as text: nothing inside it can match.
      i += hit->text.size();
      continue;
    }
    m.encode_segment(text.substr(seg, i - seg), out);
    out.push_back(hit->id);
    i += hit->text.size();
    seg = i;
  }
  m.encode_segment(text.substr(seg), out);
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_control) const {
  std::string out;
  for (int32_t id : ids) {
    if (!valid_id(id)) continue;
    if (skip_control && impl_->types[id] == TokenType::Control) continue;
    out += impl_->bytes[id];
  }
  if (find_invalid_utf8(out)) return sanitize_utf8(out);
  return out;
}

const std::string& Tokenizer::token_bytes(int32_t id) const { return valid_id(id) ? impl_->bytes[id] : kEmpty; }
const std::string& Tokenizer::token_text(int32_t id) const { return valid_id(id) ? impl_->tokens[id] : kEmpty; }

std::optional<int32_t> Tokenizer::token_id(std::string_view text) const {
  return impl_->by_text.find(text);
}

TokenType Tokenizer::token_type(int32_t id) const {
  return valid_id(id) ? impl_->types[id] : TokenType::Undefined;
}

int32_t Tokenizer::n_vocab() const { return (int32_t)impl_->tokens.size(); }

bool Tokenizer::is_added(int32_t id) const {
  TokenType t = token_type(id);
  return t == TokenType::Control || t == TokenType::UserDefined;
}

int32_t Tokenizer::eos_id() const { return impl_->eos.value_or(-1); }
std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos; }
std::optional<int32_t> Tokenizer::pad_id() const { return impl_->pad; }

std::vector<int32_t> Tokenizer::stop_ids() const {
  std::vector<int32_t> ids;
  if (impl_->eos) ids.push_back(*impl_->eos);
  for (std::string_view s : {"<|im_end|>", "<|endoftext|>"}) {
    auto id = token_id(s);
    if (id && is_added(*id) && std::find(ids.begin(), ids.end(), *id) == ids.end()) ids.push_back(*id);
  }
  return ids;
}

const std::string& Tokenizer::pre_tokenizer_name() const { return impl_->pre->name(); }

// ---- StreamDecoder ----

StreamDecoder::StreamDecoder(const Tokenizer& tok, bool skip_control) : tok_(&tok), skip_control_(skip_control) {}

std::string StreamDecoder::feed(int32_t id) {
  if (!tok_->valid_id(id)) return {};
  if (skip_control_ && tok_->is_control(id)) return {};
  pending_ += tok_->token_bytes(id);
  // Everything but a valid, unfinished character at the end can go out now; ill-formed parts are
  // replaced exactly as decode() replaces them (the decision never depends on later bytes).
  size_t keep = utf8_incomplete_tail(pending_);
  std::string_view ready(pending_.data(), pending_.size() - keep);
  std::string out = find_invalid_utf8(ready) ? sanitize_utf8(ready) : std::string(ready);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = sanitize_utf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace ds::tokenizer
