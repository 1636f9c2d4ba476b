// The past responses that POST /v1/responses can continue (previous_response_id): each response's
// conversation (its input items, the history it continued included, then its output items; not its
// instructions, which OpenAI does not carry over either). In memory only: lost on restart. Bounded by a
// count and by bytes (the items' JSON text); the oldest go first. A conversation larger than the byte
// bound is not kept. Kept as that text, parsed again by get(): the parsed items take several times their
// text's size (a 64 MiB bound of small items held ~7x that), and only the continued one is needed.
#pragma once
#include <nlohmann/json.hpp>

#include <cstddef>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace ds::server {

class ResponseStore {
 public:
  ResponseStore(size_t max_entries, size_t max_bytes) : max_entries_(max_entries), max_bytes_(max_bytes) {}
  void put(const std::string& id, nlohmann::ordered_json items);
  std::optional<nlohmann::ordered_json> get(const std::string& id) const;
  size_t size() const;
  size_t bytes() const;

 private:
  struct Entry {
    std::string text;  // the items' JSON
    size_t bytes = 0;
  };
  const size_t max_entries_, max_bytes_;
  mutable std::mutex m_;
  std::map<std::string, Entry> entries_;
  std::deque<std::string> order_;  // oldest first
  size_t bytes_ = 0;
};

}  // namespace ds::server
