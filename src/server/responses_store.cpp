#include "server/responses_store.h"

#include "server/api_error.h"

namespace ds::server {

using json = nlohmann::ordered_json;

void ResponseStore::put(const std::string& id, const json& input, const json& output, const json& response) {
  auto text = [](const json& j) { return std::make_shared<const std::string>(dump(j)); };
  Entry e{text(input), text(output), text(response), 0, {}};  // before the store's lock
  e.bytes = e.input->size() + e.output->size() + e.response->size() + id.size();
  if (e.bytes > max_bytes_ || max_entries_ == 0) return;
  std::lock_guard l(m_);
  if (entries_.count(id)) return;  // ids are random: a repeat is not a new response
  while (!order_.empty() && (entries_.size() + 1 > max_entries_ || bytes_ + e.bytes > max_bytes_)) {
    auto it = entries_.find(order_.front());
    bytes_ -= it->second.bytes;
    entries_.erase(it);
    order_.pop_front();
  }
  bytes_ += e.bytes;
  e.pos = order_.insert(order_.end(), id);
  entries_.emplace(id, std::move(e));
}

std::optional<ResponseStore::Entry> ResponseStore::find(const std::string& id) const {
  std::lock_guard l(m_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

// Our own dumps: valid JSON (invalid UTF-8 was replaced when dumped).
std::optional<json> ResponseStore::get(const std::string& id) const {
  auto e = find(id);
  if (!e) return std::nullopt;
  json items = json::parse(*e->input);
  for (auto& it : json::parse(*e->output)) items.push_back(std::move(it));
  return items;
}

std::optional<json> ResponseStore::input(const std::string& id) const {
  auto e = find(id);
  if (!e) return std::nullopt;
  return json::parse(*e->input);
}

std::optional<json> ResponseStore::response(const std::string& id) const {
  auto e = find(id);
  if (!e) return std::nullopt;
  return json::parse(*e->response);
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard l(m_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  bytes_ -= it->second.bytes;
  order_.erase(it->second.pos);
  entries_.erase(it);
  return true;
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
