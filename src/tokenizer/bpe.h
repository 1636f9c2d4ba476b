// Byte-level BPE merging of one pre-token (qwen35-spec.md §3.2, `tokenizer.ggml.merges`).
// Start from one token per byte; repeatedly merge the adjacent pair with the lowest merge rank
// (rank = position in the merges list), the leftmost one on ties, until no adjacent pair has a
// merge. This is Hugging Face's BPE::merge_word order. Cost: O(n log n) per piece of n bytes with
// a binary heap of candidate pairs over a doubly linked list of symbols; pairs are looked up in an
// open-addressing hash map keyed on the (left id, right id) pair.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ds::tokenizer {

// (left id, right id) -> (rank, merged id). Open addressing, linear probing, power-of-two size.
class MergeMap {
 public:
  struct Entry {
    uint64_t key = kEmpty;
    int32_t rank = 0;
    int32_t id = 0;
  };
  static constexpr uint64_t kEmpty = ~0ull;

  void reserve(size_t n);
  // Inserts unless the pair is already there (the first, lowest-rank merge of a pair wins).
  // Returns false if it was there.
  bool insert(int32_t left, int32_t right, int32_t rank, int32_t id);
  const Entry* find(int32_t left, int32_t right) const {
    if (slots_.empty()) return nullptr;
    const uint64_t key = pack(left, right);
    size_t i = hash(key) & mask_;
    for (;;) {
      const Entry& e = slots_[i];
      if (e.key == key) return &e;
      if (e.key == kEmpty) return nullptr;
      i = (i + 1) & mask_;
    }
  }
  size_t size() const { return size_; }

 private:
  static uint64_t pack(int32_t a, int32_t b) { return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b; }
  static size_t hash(uint64_t k) { return (size_t)((k * 0x9E3779B97F4A7C15ull) >> 29); }
  void grow();
  std::vector<Entry> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

// Scratch buffers reused between calls (one per thread).
struct BpeScratch {
  struct Sym {
    int32_t id;
    int32_t prev, next;  // -1 at the ends
  };
  struct Cand {
    int32_t rank;
    int32_t pos;    // index of the left symbol
    int32_t left, right;  // ids when queued: a stale candidate no longer matches them
  };
  std::vector<Sym> syms;
  std::vector<Cand> heap;
};

// Memo of merged pieces (Hugging Face keeps one too): text -> ids, in flat arrays (no allocation
// per entry). Full at max_entries: then it is emptied and refilled, so memory stays bounded on any
// input. Not thread-safe; the Tokenizer locks it.
class PieceCache {
 public:
  static constexpr size_t kMaxPiece = 64;  // longer pieces are not cached (rare, cheap to redo)
  explicit PieceCache(size_t max_entries = 1 << 16);
  static uint64_t hash(std::string_view piece);
  // Appends the ids of `piece` to `out` and returns true if cached.
  bool lookup(std::string_view piece, uint64_t h, std::vector<int32_t>& out) const;
  void insert(std::string_view piece, uint64_t h, const int32_t* ids, size_t n_ids);
  size_t size() const { return count_; }

 private:
  struct Slot {
    uint64_t hash = 0;  // 0 = empty
    uint32_t text_off = 0, ids_off = 0;
    uint16_t text_len = 0, n_ids = 0;
  };
  void clear();
  std::vector<Slot> slots_;
  size_t mask_;
  size_t max_entries_;
  size_t count_ = 0;
  std::string text_;
  std::vector<int32_t> ids_;
};

// Merges `byte_ids` (the token id of each byte of the piece) and appends the result to `out`.
void bpe_merge(const MergeMap& merges, const int32_t* byte_ids, size_t n, BpeScratch& scratch,
               std::vector<int32_t>& out);

}  // namespace ds::tokenizer
