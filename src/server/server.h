// The OpenAI-compatible HTTP server (cpp-httplib): POST /v1/chat/completions, POST /v1/completions,
// POST /v1/responses (see responses_request.h; GET and DELETE /v1/responses/{id} and GET
// /v1/responses/{id}/input_items for the stored ones, responses_store.h)
// (streaming as server-sent events or not), GET /v1/models, GET /health, GET /metrics, POST /tokenize and
// /detokenize (tokenize.h); CORS for browser clients when configured (cors.h).
// Every error is OpenAI's JSON error shape with a 4xx/5xx status. With an API key, every /v1 route and
// /tokenize, /detokenize need "Authorization: Bearer KEY". Limits: request body size (413; chunked request bodies are
// refused with 411, as cpp-httplib 0.11 would read them without the limit), JSON nesting depth 256
// (400), prompt length and max_tokens (400, code context_length_exceeded), running + queued requests
// (429). A socket read or write stalled for io_timeout_s fails; idle keep-alive connections close
// after min(10 s, io_timeout_s). A streaming client that
// goes away is noticed at the next write (a token, or a keep-alive comment every second while it
// waits) and its sequence is cancelled at once; a non-streaming request's socket is polled while it runs, so its
// client going away frees the sequence too. Pipelined requests (a second request sent before the first's
// answer) are not served: cpp-httplib 0.11 drops the bytes it read ahead, and the connection idles until the
// keep-alive timeout closes it (a pipelining client must then resend; OpenAI clients and browsers do not pipeline).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/text_codec.h"
#include "server/chat_prompt.h"

namespace ds::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;                   // 0: any free port (see Server::port())
  std::string api_key;               // empty: no authentication
  std::string model_id = "deltaserve";
  size_t max_body_bytes = 8u << 20;  // larger bodies get 413
  int32_t max_prompt_tokens = 0;     // 0: the context size
  int32_t max_tokens_limit = 0;      // 0: the context size
  int32_t http_threads = 0;          // base HTTP workers (0: slots + queue + 16); up to 4x (>= 1024) while all are busy
  int32_t io_timeout_s = 30;         // socket read/write timeout (slow clients)
  std::vector<std::string> cors_origins;  // browsers' cross-origin requests allowed from these ("*": any); see cors.h
};
Status validate(const ServerConfig& c);

class Server {
 public:
  // engine, codec and render must outlive the server; the engine must be started.
  Server(ServerConfig cfg, engine::Engine& engine, const engine::TextCodec& codec, ChatRenderFn render);
  ~Server();
  Status bind();    // binds host:port; port() then gives the bound port
  int port() const;
  void run();       // serves until stop()
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ds::server
