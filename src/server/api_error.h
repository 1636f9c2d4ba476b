// OpenAI's error shape: HTTP status + {"error": {"message", "type", "param", "code"}}. Every 4xx/5xx
// the server sends, including the ones cpp-httplib produces itself (413, 404), uses it.
#pragma once
#include <nlohmann/json.hpp>

#include <string>

namespace ds::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // empty: null
  std::string code;   // empty: null
};

inline ApiError bad_request(std::string message, std::string param = {}, std::string code = {}) {
  return ApiError{400, std::move(message), "invalid_request_error", std::move(param), std::move(code)};
}

inline nlohmann::ordered_json error_json(const ApiError& e) {
  nlohmann::ordered_json j;
  j["error"]["message"] = e.message;
  j["error"]["type"] = e.type;
  j["error"]["param"] = e.param.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(e.param);
  j["error"]["code"] = e.code.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(e.code);
  return j;
}

// JSON text for the wire: never throws on invalid UTF-8 (replaced by U+FFFD).
inline std::string dump(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace ds::server
