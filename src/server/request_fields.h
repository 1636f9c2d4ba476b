// Typed reads of request body fields, shared by the endpoints' parsers (openai_request.cpp,
// responses_request.cpp): each names the field (param) and what was expected when the value is wrong.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "server/api_error.h"

namespace ds::server {

// "null", "boolean", "string", "array", "object", "integer", "number".
const char* type_name(const nlohmann::ordered_json& v);
// 400: "'param' must be EXPECTED, got TYPE".
ApiError wrong_type(const std::string& param, const char* expected, const nlohmann::ordered_json& v);
// b[key] when present and not null.
const nlohmann::ordered_json* field(const nlohmann::ordered_json& b, const char* key);
// `param` names the field in errors when it is nested (stream_options.include_usage).
std::optional<ApiError> get_bool(const nlohmann::ordered_json& b, const char* key, bool& out, const char* param = nullptr);

}  // namespace ds::server
