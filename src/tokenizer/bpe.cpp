#include "tokenizer/bpe.h"

#include <algorithm>
#include <functional>

namespace ds::tokenizer {

void MergeMap::reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;  // load factor <= 0.5 keeps probes short
  if (cap <= slots_.size()) return;
  std::vector<Entry> old = std::move(slots_);
  slots_.assign(cap, Entry{});
  mask_ = cap - 1;
  size_ = 0;
  for (const Entry& e : old) {
    if (e.key == kEmpty) continue;
    size_t i = hash(e.key) & mask_;
    while (slots_[i].key != kEmpty) i = (i + 1) & mask_;
    slots_[i] = e;
    size_++;
  }
}

void MergeMap::grow() { reserve(std::max<size_t>(16, size_ * 2 + 2)); }

bool MergeMap::insert(int32_t left, int32_t right, int32_t rank, int32_t id) {
  if ((size_ + 1) * 2 > slots_.size()) grow();
  const uint64_t key = pack(left, right);
  size_t i = hash(key) & mask_;
  while (slots_[i].key != kEmpty) {
    if (slots_[i].key == key) return false;
    i = (i + 1) & mask_;
  }
  slots_[i] = Entry{key, rank, id};
  size_++;
  return true;
}

PieceCache::PieceCache(size_t max_entries) : max_entries_(max_entries) {
  size_t cap = 16;
  while (cap < max_entries * 2) cap <<= 1;
  slots_.resize(cap);
  mask_ = cap - 1;
}

uint64_t PieceCache::hash(std::string_view piece) {
  uint64_t h = std::hash<std::string_view>{}(piece);
  return h ? h : 1;
}

bool PieceCache::lookup(std::string_view piece, uint64_t h, std::vector<int32_t>& out) const {
  for (size_t i = h & mask_;; i = (i + 1) & mask_) {
    const Slot& s = slots_[i];
    if (s.hash == 0) return false;
    if (s.hash == h && s.text_len == piece.size() &&
        std::string_view(text_.data() + s.text_off, s.text_len) == piece) {
      out.insert(out.end(), ids_.begin() + s.ids_off, ids_.begin() + s.ids_off + s.n_ids);
      return true;
    }
  }
}

void PieceCache::clear() {
  std::fill(slots_.begin(), slots_.end(), Slot{});
  text_.clear();
  ids_.clear();
  count_ = 0;
}

void PieceCache::insert(std::string_view piece, uint64_t h, const int32_t* ids, size_t n_ids) {
  if (piece.size() > kMaxPiece || n_ids > kMaxPiece) return;
  if (count_ >= max_entries_) clear();
  size_t i = h & mask_;
  for (; slots_[i].hash != 0; i = (i + 1) & mask_) {
    if (slots_[i].hash == h && std::string_view(text_.data() + slots_[i].text_off, slots_[i].text_len) == piece) {
      return;  // another thread put it there first
    }
  }
  slots_[i] = Slot{h, (uint32_t)text_.size(), (uint32_t)ids_.size(), (uint16_t)piece.size(), (uint16_t)n_ids};
  text_.append(piece);
  ids_.insert(ids_.end(), ids, ids + n_ids);
  count_++;
}

namespace {
// Min-heap order: lower rank first, then the leftmost position (std heaps are max-heaps).
struct CandAfter {
  bool operator()(const BpeScratch::Cand& a, const BpeScratch::Cand& b) const {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  }
};
}  // namespace

void bpe_merge(const MergeMap& merges, const int32_t* byte_ids, size_t n, BpeScratch& s,
               std::vector<int32_t>& out) {
  if (n == 0) return;
  if (n == 1) {
    out.push_back(byte_ids[0]);
    return;
  }
  auto& syms = s.syms;
  auto& heap = s.heap;
  syms.resize(n);
  heap.clear();
  for (size_t i = 0; i < n; i++) {
    syms[i] = {byte_ids[i], (int32_t)i - 1, i + 1 < n ? (int32_t)i + 1 : -1};
  }
  auto push_pair = [&](int32_t pos) {
    const int32_t nx = syms[pos].next;
    if (nx < 0) return;
    if (const MergeMap::Entry* e = merges.find(syms[pos].id, syms[nx].id)) {
      heap.push_back({e->rank, pos, syms[pos].id, syms[nx].id});
      std::push_heap(heap.begin(), heap.end(), CandAfter{});
    }
  };
  for (size_t i = 0; i + 1 < n; i++) push_pair((int32_t)i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), CandAfter{});
    const BpeScratch::Cand c = heap.back();
    heap.pop_back();
    BpeScratch::Sym& left = syms[c.pos];
    // A candidate is stale when either symbol changed since it was queued: ids only ever grow into
    // longer tokens, so equal ids mean the very same pair is still there.
    if (left.id != c.left || left.next < 0) continue;
    BpeScratch::Sym& right = syms[left.next];
    if (right.id != c.right) continue;
    const MergeMap::Entry* e = merges.find(c.left, c.right);
    left.id = e->id;
    right.id = -1;  // dead
    left.next = right.next;
    if (left.next >= 0) syms[left.next].prev = c.pos;
    if (left.prev >= 0) push_pair(left.prev);
    push_pair(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = syms[i].next) out.push_back(syms[i].id);
}

}  // namespace ds::tokenizer
