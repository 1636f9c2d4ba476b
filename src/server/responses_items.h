// GET /v1/responses/{id}/input_items: a stored response's input items (responses_store.h: the normalised
// items of its input, the conversation it continued included; not its instructions) back in OpenAI's item
// shapes, as a list object {object: "list", data, first_id, last_id, has_more}. Query: limit (1-100, default
// 20), order ("asc" or "desc", default "desc": newest first, as OpenAI), after (an item id from an earlier
// page: the items after it in that order); include is accepted and ignored (nothing of what it adds is kept).
// Item ids are made from the response id and the item's place (stable across calls; an item continued from
// an earlier response has a new id here, as the store keeps no ids).
#pragma once
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <variant>

#include "server/api_error.h"

namespace ds::server {

using QueryParams = std::multimap<std::string, std::string>;

// A normalised item (responses_request.h) as the Responses API shows an input item, with `id`.
nlohmann::ordered_json input_item(const nlohmann::ordered_json& normalised, const std::string& id);

std::variant<nlohmann::ordered_json, ApiError> input_item_list(const std::string& response_id,
                                                               const nlohmann::ordered_json& input,
                                                               const QueryParams& query);

}  // namespace ds::server
