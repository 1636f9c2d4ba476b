// Cross-origin requests (CORS) for chat UIs that run in a browser and call the API from another origin.
// Off unless origins are configured (`serve --cors ORIGIN`, repeatable; "*" allows any): a server on
// 127.0.0.1 that answered every origin would let any web page the user opens use it. For an allowed
// Origin every reply carries Access-Control-Allow-Origin, and a preflight (OPTIONS with
// Access-Control-Request-Method) of a route is answered 204 before authentication (browsers send no
// Authorization header on it), allowing that route's methods and the headers the browser asked for.
#pragma once
#include <string>
#include <vector>

#include "core/error.h"

namespace ds::server {

struct CorsHeaders {
  std::vector<std::pair<std::string, std::string>> headers;  // to set on the reply
  bool preflight = false;                                    // answer 204 now, with only these headers
};

class Cors {
 public:
  Cors() = default;
  explicit Cors(std::vector<std::string> origins) : origins_(std::move(origins)) {}
  bool enabled() const { return !origins_.empty(); }
  bool allows(const std::string& origin) const;
  // What to add for a request with these Origin / method / Access-Control-Request-* headers to a path whose
  // methods are route_methods (as an Allow header lists them: "POST", "GET, HEAD"; empty: no such route). Nothing
  // when CORS is off or the origin is not allowed.
  CorsHeaders for_request(const std::string& origin, const std::string& method, const std::string& request_method,
                          const std::string& request_headers, const std::string& route_methods) const;

 private:
  std::vector<std::string> origins_;
};

// "*" or scheme://host[:port] without a path (what browsers send as Origin).
Status validate_cors_origin(const std::string& origin);

}  // namespace ds::server
