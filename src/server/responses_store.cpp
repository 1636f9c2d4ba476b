#include "server/responses_store.h"

#include "server/api_error.h"

namespace ds::server {

void ResponseStore::put(const std::string& id, nlohmann::ordered_json items) {
  std::string text = dump(items);
  items = nullptr;  // the parsed form goes now, before the store's lock
  const size_t n = text.size() + id.size();
  if (n > max_bytes_ || max_entries_ == 0) return;
  std::lock_guard l(m_);
  if (entries_.count(id)) return;  // ids are random: a repeat is not a new response
  while (!order_.empty() && (entries_.size() + 1 > max_entries_ || bytes_ + n > max_bytes_)) {
    auto it = entries_.find(order_.front());
    bytes_ -= it->second.bytes;
    entries_.erase(it);
    order_.pop_front();
  }
  entries_.emplace(id, Entry{std::move(text), n});
  order_.push_back(id);
  bytes_ += n;
}

std::optional<nlohmann::ordered_json> ResponseStore::get(const std::string& id) const {
  std::string text;
  {
    std::lock_guard l(m_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return std::nullopt;
    text = it->second.text;
  }
  return nlohmann::ordered_json::parse(text);  // our own dump: valid (invalid UTF-8 was replaced when dumped)
}

size_t ResponseStore::size() const {
  std::lock_guard l(m_);
  return entries_.size();
}

size_t ResponseStore::bytes() const {
  std::lock_guard l(m_);
  return bytes_;
}

}  // namespace ds::server
