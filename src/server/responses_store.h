// The past responses that POST /v1/responses stored (store true, the default): what previous_response_id
// continues, and what GET / DELETE /v1/responses/{id} and its input_items answer. Per response: its input
// items (the history it continued included; not its instructions, which OpenAI does not carry over either),
// its output items (both normalised, see responses_request.h) and the Response object as POST answered it.
// In memory only: lost on restart. Bounded by a count and by bytes (the three parts' JSON text); the oldest
// go first. A response larger than the byte bound is not kept. Kept as that text, parsed again when read: the
// parsed items take several times their text's size (a 64 MiB bound of small items held ~7x that), and only
// the one asked for is needed.
#pragma once
#include <nlohmann/json.hpp>

#include <cstddef>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace ds::server {

class ResponseStore {
 public:
  ResponseStore(size_t max_entries, size_t max_bytes) : max_entries_(max_entries), max_bytes_(max_bytes) {}
  void put(const std::string& id, const nlohmann::ordered_json& input, const nlohmann::ordered_json& output,
           const nlohmann::ordered_json& response);
  // The conversation a continuation starts from: the input items, then the output items.
  std::optional<nlohmann::ordered_json> get(const std::string& id) const;
  std::optional<nlohmann::ordered_json> input(const std::string& id) const;
  std::optional<nlohmann::ordered_json> response(const std::string& id) const;
  bool erase(const std::string& id);  // false when the id is not stored
  size_t size() const;
  size_t bytes() const;

 private:
  using Text = std::shared_ptr<const std::string>;  // JSON text, shared so a read copies no text under the lock
  struct Entry {
    Text input, output, response;
    size_t bytes = 0;
    std::list<std::string>::iterator pos;  // in order_
  };
  std::optional<Entry> find(const std::string& id) const;  // a copy (of the pointers), taken under the lock

  const size_t max_entries_, max_bytes_;
  mutable std::mutex m_;
  std::map<std::string, Entry> entries_;
  std::list<std::string> order_;  // oldest first (a list: erase takes an entry from the middle)
  size_t bytes_ = 0;
};

}  // namespace ds::server
