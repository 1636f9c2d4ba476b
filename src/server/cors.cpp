#include "server/cors.h"

#include <algorithm>

namespace ds::server {

bool Cors::allows(const std::string& origin) const {
  if (origin.empty()) return false;
  return std::any_of(origins_.begin(), origins_.end(), [&](const std::string& o) { return o == "*" || o == origin; });
}

CorsHeaders Cors::for_request(const std::string& origin, const std::string& method, const std::string& request_method,
                              const std::string& request_headers, const std::string& route_methods) const {
  CorsHeaders out;
  if (!allows(origin)) return out;
  const bool any = std::find(origins_.begin(), origins_.end(), "*") != origins_.end();
  out.headers.emplace_back("Access-Control-Allow-Origin", any ? "*" : origin);
  if (!any) out.headers.emplace_back("Vary", "Origin");  // the answer depends on the Origin header
  if (method != "OPTIONS" || request_method.empty() || route_methods.empty()) return out;
  out.preflight = true;
  out.headers.emplace_back("Access-Control-Allow-Methods", route_methods);
  out.headers.emplace_back("Access-Control-Allow-Headers",
                           request_headers.empty() ? "Authorization, Content-Type" : request_headers);
  out.headers.emplace_back("Access-Control-Max-Age", "600");
  return out;
}

Status validate_cors_origin(const std::string& o) {
  if (o == "*") return {};
  const auto scheme = o.find("://");
  const bool ok = scheme != std::string::npos && scheme > 0 && o.size() > scheme + 3 &&
                  o.find('/', scheme + 3) == std::string::npos &&
                  std::all_of(o.begin(), o.end(), [](unsigned char c) { return c > 32 && c < 127; });
  if (!ok)
    return err("server: CORS origin '{}' is not '*' or scheme://host[:port] (e.g. http://localhost:3000; no path, "
               "no trailing slash)",
               o);
  return {};
}

}  // namespace ds::server
