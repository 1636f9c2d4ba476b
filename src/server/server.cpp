#include "server/server.h"

#include <dirent.h>
#include <httplib.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "core/log.h"
#include "server/job.h"
#include "server/json_text.h"
#include "server/cors.h"
#include "server/metrics.h"
#include "server/openai_request.h"
#include "server/responses_items.h"
#include "server/responses_job.h"
#include "server/responses_request.h"
#include "server/responses_store.h"
#include "server/tokenize.h"

namespace ds::server {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

Status validate(const ServerConfig& c) {
  if (c.host.empty()) return err("server: host must not be empty");
  if (c.port < 0 || c.port > 65535) return err("server: port must be in [0, 65535], got {}", c.port);
  if (c.max_body_bytes < 1024) return err("server: max_body_bytes must be >= 1024, got {}", c.max_body_bytes);
  if (c.max_prompt_tokens < 0) return err("server: max_prompt_tokens must be >= 0, got {}", c.max_prompt_tokens);
  if (c.max_tokens_limit < 0) return err("server: max_tokens_limit must be >= 0, got {}", c.max_tokens_limit);
  if (c.http_threads < 0) return err("server: http_threads must be >= 0, got {}", c.http_threads);
  if (c.io_timeout_s < 1) return err("server: io_timeout_s must be >= 1, got {}", c.io_timeout_s);
  for (const auto& o : c.cors_origins) DS_TRY(validate_cors_origin(o));
  return {};
}

namespace {

thread_local Clock::time_point t_request_start;

const std::set<std::string>& known_routes() {
  static const std::set<std::string> r = {"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/models",
                                          "/tokenize", "/detokenize", "/health", "/metrics"};
  return r;
}

// A stored response's routes: /v1/responses/{id} (GET, DELETE) and /v1/responses/{id}/input_items (GET).
bool is_stored_response_path(const std::string& path, bool input_items) {
  constexpr std::string_view base = "/v1/responses/", tail = "/input_items";
  if (!path.starts_with(base)) return false;
  std::string_view id(path);
  id.remove_prefix(base.size());
  if (input_items) {
    if (!id.ends_with(tail)) return false;
    id.remove_suffix(tail.size());
  }
  return !id.empty() && id.find('/') == std::string_view::npos;
}

// The methods a route serves, as an Allow header lists them (HEAD goes with GET); empty for a path that is no route.
std::string route_methods(const std::string& path) {
  if (path == "/v1/chat/completions" || path == "/v1/completions" || path == "/v1/responses" || path == "/tokenize" ||
      path == "/detokenize")
    return "POST";
  if (is_stored_response_path(path, false)) return "GET, HEAD, DELETE";
  if (known_routes().count(path) || (path.starts_with("/v1/models/") && path.size() > 11) ||
      is_stored_response_path(path, true))
    return "GET, HEAD";
  return "";
}

// The route label of /metrics: the path of a known route, with a response id as {id}; "other" for the rest.
std::string route_label(const std::string& path) {
  if (known_routes().count(path)) return path;
  if (is_stored_response_path(path, false)) return "/v1/responses/{id}";
  if (is_stored_response_path(path, true)) return "/v1/responses/{id}/input_items";
  return "other";
}

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(dump(error_json(e)), "application/json");
}

void send_json(httplib::Response& res, const json& j, int status = 200) {
  res.status = status;
  res.set_content(dump(j), "application/json");
}

bool equal_ct(const std::string& a, const std::string& b) {  // constant time for equal lengths
  if (a.size() != b.size()) return false;
  unsigned char d = 0;
  for (size_t i = 0; i < a.size(); i++) d |= static_cast<unsigned char>(a[i] ^ b[i]);
  return d == 0;
}

std::string random_hex(size_t n) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string s;
  while (s.size() < n) s += fmt::format("{:016x}", rng());
  return s.substr(0, n);
}

// A request whose body cpp-httplib would read without the --max-body-mb bound (see the pre-routing
// handler), or could not decode (it is built without zlib: a compressed body came out as a 400
// "malformed HTTP request").
std::optional<ApiError> unreadable_body(const httplib::Request& req) {
  auto length_required = [](std::string msg) {
    return ApiError{411, std::move(msg), "invalid_request_error", "", "length_required"};
  };
  if (req.has_header("Transfer-Encoding") && req.get_header_value("Transfer-Encoding") != "identity")
    return length_required("chunked request bodies are not accepted; send the body with a Content-Length");
  const bool reads_body = req.method == "POST" || req.method == "PUT" || req.method == "PATCH" || req.method == "PRI";
  if (reads_body && !req.has_header("Content-Length"))
    return length_required(fmt::format("{} needs a Content-Length header (0 for no body)", req.method));
  if (std::string ce = req.get_header_value("Content-Encoding"); !ce.empty() && ce != "identity")
    return ApiError{415, fmt::format("Content-Encoding '{}' is not supported; send the body uncompressed", ce),
                    "invalid_request_error", "", "unsupported_media_type"};
  return std::nullopt;
}

// host and port of a socket's own (peer = false) or far end, as cpp-httplib writes them in a Request.
std::optional<std::pair<std::string, int>> endpoint(int fd, bool peer) {
  sockaddr_storage a{};
  socklen_t n = sizeof a;
  if ((peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&a), &n) : getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n)) != 0)
    return std::nullopt;
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<sockaddr*>(&a), n, host, sizeof host, serv, sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV))
    return std::nullopt;
  return std::pair<std::string, int>{host, std::atoi(serv)};
}

// The socket `req` came on, or -1. cpp-httplib 0.11 tells a handler neither its socket nor whether the
// client is still there; the connection's two endpoints single it out among the process's descriptors
// (it stays open while its handler runs).
int connection_socket(const httplib::Request& req) {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  int found = -1;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end || fd == dirfd(d)) continue;
    auto peer = endpoint(static_cast<int>(fd), true);
    if (!peer || peer->second != req.remote_port || peer->first != req.remote_addr) continue;
    auto self = endpoint(static_cast<int>(fd), false);
    if (self && self->second == req.local_port) {
      found = static_cast<int>(fd);
      break;
    }
  }
  closedir(d);
  return found;
}

// The client closed (or reset) the connection. A client that half-closes after its request counts as
// gone, as in later cpp-httplib versions' is_connection_closed.
bool peer_closed(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

// cpp-httplib gives a connection one worker for its whole life and reads a request's header section
// with a per-read timeout only, so a connection that sends nothing (until the keep-alive timeout) or
// trickles bytes holds its worker: with a fixed pool the other clients waited for one (100 idle
// connections against 84 workers held a /health request 9.7 s). This pool starts another worker
// whenever a connection arrives and none is free, up to `max`; those beyond `base` end after a minute idle.
class ElasticPool : public httplib::TaskQueue {
 public:
  ElasticPool(size_t base, size_t max) : base_(base), max_(std::max(base, max)) {
    std::lock_guard l(m_);
    while (workers_ < base_) start_worker();
  }
  void enqueue(std::function<void()> fn) override {
    std::lock_guard l(m_);
    jobs_.push_back(std::move(fn));
    if (idle_ < jobs_.size() && workers_ < max_) start_worker();
    cv_.notify_one();
  }
  // Runs the queued connections, then returns once every worker has ended.
  void shutdown() override {
    std::unique_lock l(m_);
    stop_ = true;
    cv_.notify_all();
    ended_.wait(l, [&] { return workers_ == 0; });
  }

 private:
  void start_worker() {  // m_ held
    workers_++;
    std::thread([this] { work(); }).detach();
  }
  void work() {
    std::unique_lock l(m_);
    for (;;) {
      idle_++;
      const bool woken = cv_.wait_for(l, 60s, [&] { return stop_ || !jobs_.empty(); });
      idle_--;
      if (jobs_.empty()) {
        if (stop_ || (!woken && workers_ > base_)) break;
        continue;
      }
      auto fn = std::move(jobs_.front());
      jobs_.pop_front();
      l.unlock();
      fn();
      l.lock();
    }
    workers_--;
    ended_.notify_all();
  }
  const size_t base_, max_;
  std::mutex m_;
  std::condition_variable cv_, ended_;
  std::deque<std::function<void()>> jobs_;
  size_t workers_ = 0, idle_ = 0;
  bool stop_ = false;
};

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

struct Server::Impl {
  Impl(ServerConfig c, engine::Engine& e, const engine::TextCodec& t, ChatRenderFn r)
      : cfg(std::move(c)), eng(e), codec(t), render(std::move(r)) {}
  ServerConfig cfg;
  engine::Engine& eng;
  const engine::TextCodec& codec;
  ChatRenderFn render;
  httplib::Server svr;
  HttpMetrics metrics;
  int bound_port = -1;
  int listen_fd = -1;  // the listening socket (set by the socket-options hook), for its backlog
  int64_t started = unix_now();
  // Stored responses (previous_response_id, GET / DELETE /v1/responses/{id}): the last 1024, at most 64 MiB of
  // their JSON.
  ResponseStore responses{1024, 64u << 20};

  std::optional<ApiError> check_auth(const httplib::Request& req) const;
  std::optional<json> parse_body(const httplib::Request& req, httplib::Response& res);
  // How an endpoint names its fields in limit errors: the prompt's ("messages", "prompt", "input") and
  // max_tokens'; without max_tokens, chat-like endpoints may fill the context, completions take 16.
  struct Names {
    const char* prompt;
    const char* max_tokens;
    bool chat;
  };
  // Checks the limits and submits; nullptr when refused (the error is sent). in_reasoning: the prompt opened a
  // thinking block (a response_format constraint then starts after the model's </think>).
  std::shared_ptr<engine::RequestHandle> submit(httplib::Response& res, Names n, const CommonParams& c,
                                                std::vector<int32_t> prompt, int32_t snapshot_at, bool in_reasoning);
  // Sends the reply of `job` (Job or ResponsesJob) as it comes (stream) or at the end.
  template <class J>
  void serve(const httplib::Request& req, httplib::Response& res, std::shared_ptr<J> job,
             std::shared_ptr<engine::RequestHandle> h, bool stream);
  void generate(const httplib::Request& req, httplib::Response& res, JobOptions o, const CommonParams& c,
                std::vector<int32_t> prompt,
                int32_t snapshot_at = 0);
  // The prompt of a parsed chat request; a forced tool call's opening (tool_choice) is appended to it and
  // set in `reply_prefix`.
  std::variant<ChatPrompt, ApiError> chat_prompt(const ChatRequest& cr, std::string& reply_prefix);
  void routes();
};

std::optional<ApiError> Server::Impl::check_auth(const httplib::Request& req) const {
  if (cfg.api_key.empty()) return std::nullopt;
  std::string h = req.get_header_value("Authorization");
  if (h.empty())
    return ApiError{401, "You didn't provide an API key. Send it as 'Authorization: Bearer KEY'.",
                    "invalid_request_error", "", "invalid_api_key"};
  if (h.size() < 7 || strncasecmp(h.c_str(), "Bearer ", 7) != 0 || !equal_ct(h.substr(7), cfg.api_key))
    return ApiError{401, "Incorrect API key provided.", "invalid_request_error", "", "invalid_api_key"};
  return std::nullopt;
}

std::optional<json> Server::Impl::parse_body(const httplib::Request& req, httplib::Response& res) {
  if (auto e = check_auth(req)) {
    send_error(res, *e);
    return std::nullopt;
  }
  if (auto why = json_shape_error(req.body)) {
    send_error(res, bad_request("the body " + *why));
    return std::nullopt;
  }
  try {
    return json::parse(req.body);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number like 1e400
    send_error(res, bad_request(fmt::format("the body is not valid JSON: {}", e.what())));
    return std::nullopt;
  }
}

std::shared_ptr<engine::RequestHandle> Server::Impl::submit(httplib::Response& res, Names names, const CommonParams& c,
                                                            std::vector<int32_t> prompt, int32_t snapshot_at,
                                                            bool in_reasoning) {
  auto send_error = [&res](const ApiError& e) -> std::shared_ptr<engine::RequestHandle> {
    ds::server::send_error(res, e);
    return nullptr;
  };
  const int64_t ctx = eng.backend().n_ctx();
  const int64_t n_prompt = static_cast<int64_t>(prompt.size());
  const char* what = names.prompt;
  const int64_t max_prompt = cfg.max_prompt_tokens > 0 ? std::min<int64_t>(cfg.max_prompt_tokens, ctx) : ctx;
  if (n_prompt == 0) return send_error(bad_request("the prompt is empty", what));
  if (n_prompt > max_prompt)
    return send_error(bad_request(
        fmt::format("the prompt has {} tokens; this server accepts at most {} (context {})", n_prompt, max_prompt, ctx),
        what, "context_length_exceeded"));
  const int64_t limit = cfg.max_tokens_limit > 0 ? std::min<int64_t>(cfg.max_tokens_limit, ctx) : ctx;
  int64_t max_tokens;
  if (c.max_tokens) {
    max_tokens = *c.max_tokens;
    if (max_tokens > limit)
      return send_error(
          bad_request(fmt::format("{} is {}; this server allows at most {}", names.max_tokens, max_tokens, limit),
                      names.max_tokens));
    if (n_prompt + max_tokens > ctx)
      return send_error(bad_request(fmt::format("This model's maximum context length is {} tokens. However, you "
                                                "requested {} tokens ({} in the {}, {} in the completion). Please "
                                                "reduce the length of the {} or completion.",
                                                ctx, n_prompt + max_tokens, n_prompt, what, max_tokens, what),
                                    what, "context_length_exceeded"));
  } else {
    max_tokens = std::min(names.chat ? limit : std::min<int64_t>(16, limit), ctx - n_prompt);
    if (max_tokens < 1)
      return send_error(bad_request(fmt::format("the prompt has {} tokens and fills the context of {}", n_prompt, ctx),
                                    what, "context_length_exceeded"));
  }

  engine::GenerationRequest g;
  g.prompt = std::move(prompt);
  g.sampling = c.sampling;
  if (!c.has_seed) g.sampling.seed = std::random_device{}() * 0x100000001ull ^ std::random_device{}();
  g.max_tokens = static_cast<int32_t>(max_tokens);
  g.stop = c.stop;
  g.ignore_eos = c.ignore_eos;
  g.top_logprobs = c.top_logprobs;
  if (snapshot_at > 0) g.snapshot_at.push_back(snapshot_at);
  g.constraint = c.constraint;
  if (c.constraint && in_reasoning) {
    // Thinking on: the reasoning stays free, the content after the model's </think> is the document.
    const std::vector<int32_t> end = codec.encode("</think>", true);
    if (end.size() != 1)
      return send_error(bad_request("response_format needs thinking off with this model (its prompt opens a "
                                    "thinking block, but </think> is not one token)",
                                    "response_format"));
    g.constraint_after = end[0];
  }
  engine::Submitted s = eng.submit(std::move(g));
  switch (s.status) {
    case engine::SubmitStatus::Ok: break;
    case engine::SubmitStatus::Invalid: return send_error(bad_request(s.message, what));
    case engine::SubmitStatus::QueueFull:
      return send_error(ApiError{429, s.message, "rate_limit_error", "", "rate_limit_exceeded"});
    case engine::SubmitStatus::Stopped:
      return send_error(ApiError{503, s.message, "server_error", "", "service_unavailable"});
  }

  return s.handle;
}

void Server::Impl::generate(const httplib::Request& req, httplib::Response& res, JobOptions o, const CommonParams& c,
                            std::vector<int32_t> prompt, int32_t snapshot_at) {
  const bool chat = o.kind == Endpoint::Chat;
  auto h = submit(res, {chat ? "messages" : "prompt", "max_tokens", chat}, c, std::move(prompt), snapshot_at,
                  o.in_reasoning);
  if (!h) return;
  o.model = cfg.model_id;
  o.created = unix_now();
  o.id = (o.kind == Endpoint::Chat ? "chatcmpl-" : "cmpl-") + random_hex(24);
  o.stream = c.stream;
  o.include_usage = c.include_usage;
  o.top_logprobs = c.top_logprobs;
  serve(req, res, std::make_shared<Job>(std::move(o), codec), std::move(h), c.stream);
}

template <class J>
void Server::Impl::serve(const httplib::Request& req, httplib::Response& res, std::shared_ptr<J> job,
                         std::shared_ptr<engine::RequestHandle> h, bool stream) {
  if (!stream) {
    // A client that has gone away frees its sequence within a check interval, as a stream's does on
    // its next write (else it would generate up to max_tokens for no one, holding a slot).
    int sock = -2;  // looked up at the first check: most replies are done before
    auto next_check = Clock::now() + 200ms;
    while (!job->done()) {
      std::vector<engine::Event> evs;
      if (h->wait(evs, 200ms)) job->on_events(evs);
      if (job->done() || Clock::now() < next_check) continue;
      next_check = Clock::now() + 200ms;
      if (sock == -2) sock = connection_socket(req);
      if (sock >= 0 && peer_closed(sock)) {
        h->cancel();
        return send_error(res, ApiError{499, "the client closed the connection", "invalid_request_error", "",
                                        "client_closed_request"});
      }
    }
    auto [status, body] = job->result();
    return send_json(res, body, status);
  }

  struct Stream {
    std::shared_ptr<J> job;
    std::shared_ptr<engine::RequestHandle> h;
    bool started = false;
    Clock::time_point last_write = Clock::now();
  };
  auto st = std::make_shared<Stream>(Stream{job, h});
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [st](size_t, httplib::DataSink& sink) {
        std::string out;
        if (!st->started) {
          out = st->job->sse_start();
          st->started = true;
        }
        std::vector<engine::Event> evs;
        st->h->wait(evs, out.empty() ? 100ms : 0ms);
        out += st->job->on_events(evs);
        const auto now = Clock::now();
        // While nothing comes (queued for a slot, long prompt), a comment line every second finds
        // a client that has gone away.
        if (out.empty() && now - st->last_write > 1s) out = ": keep-alive\n\n";
        if (!out.empty()) {
          if (!sink.write(out.data(), out.size())) {
            st->h->cancel();
            return false;
          }
          st->last_write = now;
        }
        if (st->job->done()) sink.done();
        return true;
      },
      [st](bool) {
        if (!st->job->done()) st->h->cancel();
      });
}

std::variant<ChatPrompt, ApiError> Server::Impl::chat_prompt(const ChatRequest& cr, std::string& reply_prefix) {
  auto p = build_chat_prompt(render, codec, cr.messages, cr.tools, cr.template_kwargs);
  auto* prompt = std::get_if<ChatPrompt>(&p);
  if (!prompt || !cr.force_tool_call) return p;
  // Rendered with enable_thinking false; a template that still opens a thinking block cannot have the
  // call put first.
  if (prompt->in_reasoning)
    return bad_request("this model's chat template keeps the thinking block open, so a tool call cannot be forced",
                       "tool_choice");
  reply_prefix = forced_call_opening(render, cr.forced_function);
  const auto opening = codec.encode(reply_prefix, true);  // template text and a plain name (checked)
  prompt->tokens.insert(prompt->tokens.end(), opening.begin(), opening.end());
  return p;
}

void Server::Impl::routes() {
  svr.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    auto body = parse_body(req, res);
    if (!body) return;
    ChatRequest cr;
    if (auto e = parse_chat_request(*body, codec.n_vocab(), cr)) return send_error(res, *e);
    JobOptions o;
    auto prompt = chat_prompt(cr, o.reply_prefix);
    if (auto* e = std::get_if<ApiError>(&prompt)) return send_error(res, *e);
    auto& p = std::get<ChatPrompt>(prompt);
    o.kind = Endpoint::Chat;
    o.in_reasoning = p.in_reasoning;
    // With response_format the content is the document (special tokens such as <tool_call> are masked): nothing
    // in it is a tool call, even a string that reads like one.
    o.parse_tools = cr.parse_tool_calls && !cr.common.constraint;
    o.tools = cr.tools;
    o.first_call_only = !cr.parallel_tool_calls;
    o.named_tool_choice = cr.force_tool_call && !cr.forced_function.empty();
    generate(req, res, std::move(o), cr.common, std::move(p.tokens), p.conversation_tokens);
  });
  svr.Post("/v1/responses", [this](const httplib::Request& req, httplib::Response& res) {
    auto body = parse_body(req, res);
    if (!body) return;
    ResponsesRequest rr;
    auto lookup = [this](const std::string& id) { return responses.get(id); };
    if (auto e = parse_responses_request(*body, codec.n_vocab(), lookup, rr)) return send_error(res, *e);
    ResponsesJobOptions o;
    auto prompt = chat_prompt(rr.chat, o.reply_prefix);
    if (auto* e = std::get_if<ApiError>(&prompt)) {
      if (e->param.starts_with("messages")) e->param = "input";  // the chat template's refusal
      return send_error(res, *e);
    }
    auto& p = std::get<ChatPrompt>(prompt);
    auto h = submit(res, {"input", "max_output_tokens", true}, rr.chat.common, std::move(p.tokens), p.conversation_tokens,
                    p.in_reasoning);
    if (!h) return;
    o.id = "resp_" + random_hex(48);
    o.model = cfg.model_id;
    o.created = unix_now();
    o.stream = rr.chat.common.stream;
    o.in_reasoning = p.in_reasoning;
    o.parse_tools = rr.chat.parse_tool_calls && !rr.chat.common.constraint;  // as on chat: the content is the document
    o.tools = rr.chat.tools;
    o.first_call_only = !rr.chat.parallel_tool_calls;
    o.echo = std::move(rr.echo);
    if (rr.store)
      o.on_finished = [this, input = std::move(rr.conversation)](const json& r) {
        json output = json::array();
        if (!normalise_items(r["output"], "output", output)) responses.put(r["id"], input, output, r);
      };
    serve(req, res, std::make_shared<ResponsesJob>(std::move(o)), std::move(h), rr.chat.common.stream);
  });
  // Stored responses (store true, the default; the store's bound drops the oldest): GET answers the Response as POST
  // did, DELETE forgets it (previous_response_id can no longer name it), input_items lists what it was made from.
  auto stored_response_id = [this](const httplib::Request& req, httplib::Response& res) -> std::optional<std::string> {
    if (auto e = check_auth(req)) {
      send_error(res, *e);
      return std::nullopt;
    }
    return req.matches[1].str();
  };
  auto not_found = [](const std::string& id) {
    return ApiError{404, fmt::format("Response with id '{}' not found (unknown, made with store false, deleted, or "
                                     "dropped as the oldest from the server's bounded store)", id),
                    "invalid_request_error", "", "response_not_found"};
  };
  svr.Get(R"(/v1/responses/([^/]+))", [this, stored_response_id, not_found](const httplib::Request& req,
                                                                              httplib::Response& res) {
    auto id = stored_response_id(req, res);
    if (!id) return;
    // OpenAI streams a background response's events again; this server's responses are stored once complete.
    if (req.has_param("stream") && req.get_param_value("stream") != "false")
      return send_error(res, bad_request("'stream' is not supported when retrieving a stored response (it is "
                                         "complete: retrieve it without stream)", "stream"));
    auto r = responses.response(*id);
    if (!r) return send_error(res, not_found(*id));
    send_json(res, *r);
  });
  svr.Delete(R"(/v1/responses/([^/]+))", [this, stored_response_id, not_found](const httplib::Request& req,
                                                                                 httplib::Response& res) {
    auto id = stored_response_id(req, res);
    if (!id) return;
    if (!responses.erase(*id)) return send_error(res, not_found(*id));
    send_json(res, {{"id", *id}, {"object", "response.deleted"}, {"deleted", true}});
  });
  svr.Get(R"(/v1/responses/([^/]+)/input_items)", [this, stored_response_id, not_found](const httplib::Request& req,
                                                                                          httplib::Response& res) {
    auto id = stored_response_id(req, res);
    if (!id) return;
    auto input = responses.input(*id);
    if (!input) return send_error(res, not_found(*id));
    auto list = input_item_list(*id, *input, QueryParams(req.params.begin(), req.params.end()));
    if (auto* e = std::get_if<ApiError>(&list)) return send_error(res, *e);
    send_json(res, std::get<json>(list));
  });
  svr.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    auto body = parse_body(req, res);
    if (!body) return;
    CompletionRequest cr;
    if (auto e = parse_completion_request(*body, codec.n_vocab(), cr)) return send_error(res, *e);
    std::vector<int32_t> tokens;
    JobOptions o;
    o.kind = Endpoint::Completion;
    if (auto* s = std::get_if<std::string>(&cr.prompt)) {
      tokens = codec.encode(*s, false);  // raw text: special-token text stays text
      o.prompt_chars = utf8_chars(*s);
    } else {
      tokens = std::get<std::vector<int32_t>>(cr.prompt);
      for (int32_t t : tokens) o.prompt_chars += utf8_chars(codec.token_bytes(t));
    }
    generate(req, res, std::move(o), cr.common, std::move(tokens));
  });
  svr.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    auto body = parse_body(req, res);
    if (!body) return;
    auto chat_tokens = [this](const ChatRequest& cr) -> std::variant<std::vector<int32_t>, ApiError> {
      std::string reply_prefix;
      auto p = chat_prompt(cr, reply_prefix);
      if (auto* e = std::get_if<ApiError>(&p)) return *e;
      return std::move(std::get<ChatPrompt>(p).tokens);
    };
    auto r = tokenize_reply(*body, codec, eng.backend().n_ctx(), chat_tokens);
    if (auto* e = std::get_if<ApiError>(&r)) return send_error(res, *e);
    send_json(res, std::get<json>(r));
  });
  svr.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    auto body = parse_body(req, res);
    if (!body) return;
    auto r = detokenize_reply(*body, codec);
    if (auto* e = std::get_if<ApiError>(&r)) return send_error(res, *e);
    send_json(res, std::get<json>(r));
  });
  auto model_json = [this] {
    return json{{"id", cfg.model_id},
                {"object", "model"},
                {"created", started},
                {"owned_by", "deltaserve"},
                {"meta", {{"n_ctx", eng.backend().n_ctx()}, {"n_vocab", eng.backend().n_vocab()},
                          {"backend", eng.backend().name()}, {"parallel", eng.backend().n_slots()}}}};
  };
  svr.Get("/v1/models", [this, model_json](const httplib::Request& req, httplib::Response& res) {
    if (auto e = check_auth(req)) return send_error(res, *e);
    send_json(res, {{"object", "list"}, {"data", json::array({model_json()})}});
  });
  svr.Get(R"(/v1/models/(.+))", [this, model_json](const httplib::Request& req, httplib::Response& res) {
    if (auto e = check_auth(req)) return send_error(res, *e);
    if (req.matches[1] != cfg.model_id)
      return send_error(res, ApiError{404, fmt::format("The model '{}' does not exist", req.matches[1].str()),
                                      "invalid_request_error", "model", "model_not_found"});
    send_json(res, model_json());
  });
  svr.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    auto st = eng.stats();
    send_json(res, {{"status", "ok"}, {"slots", st.n_slots}, {"running", st.running}, {"waiting", st.waiting}});
  });
  svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.render(eng.stats()), "text/plain; version=0.0.4; charset=utf-8");
  });
}

Server::Server(ServerConfig cfg, engine::Engine& engine, const engine::TextCodec& codec, ChatRenderFn render)
    : impl_(std::make_unique<Impl>(std::move(cfg), engine, codec, std::move(render))) {
  auto& I = *impl_;
  std::signal(SIGPIPE, SIG_IGN);  // a write to a closed socket must fail, not kill the process
  int threads = I.cfg.http_threads > 0 ? I.cfg.http_threads
                                       : I.eng.backend().n_slots() + I.eng.config().max_queue + 16;
  // Up to 4x that many (at least 1024) while connections hold them all (idle or slow clients).
  I.svr.new_task_queue = [threads] {
    return new ElasticPool(static_cast<size_t>(threads), std::max<size_t>(4 * static_cast<size_t>(threads), 1024));
  };
  I.svr.set_payload_max_length(I.cfg.max_body_bytes);
  I.svr.set_read_timeout(I.cfg.io_timeout_s, 0);
  I.svr.set_write_timeout(I.cfg.io_timeout_s, 0);
  I.svr.set_keep_alive_max_count(1000);
  // An idle keep-alive connection holds a worker thread: closed after at most --timeout (or 10 s).
  I.svr.set_keep_alive_timeout(std::min(10, I.cfg.io_timeout_s));
  I.svr.set_tcp_nodelay(true);  // SSE: each token's event leaves at once
  // The hook runs on the listening socket only (cpp-httplib's default options, plus remembering it).
  I.svr.set_socket_options([&I](socket_t sock) {
    httplib::default_socket_options(sock);
    I.listen_fd = sock;
  });
  // Runs before the body is read. cpp-httplib 0.11 enforces the payload limit only for a declared
  // Content-Length: a chunked body, or the body of a POST/PUT/PATCH/PRI that declares no length (read
  // until the client closes), would be read into memory without bound, so both are refused (411; OpenAI
  // clients send a Content-Length); so are compressed bodies (415). The unread body bytes are then taken
  // for a next request: answered 400, or dropped after --timeout (a "Connection: close" reply does not
  // close the connection in cpp-httplib 0.11, nor does shutting its read side: the answer is lost).
  // The connection holds its thread until then, as any slow client does.
  I.svr.set_pre_routing_handler([cors = Cors(I.cfg.cors_origins)](const httplib::Request& req, httplib::Response& res) {
    t_request_start = Clock::now();
    if (cors.enabled()) {
      const CorsHeaders ch = cors.for_request(req.get_header_value("Origin"), req.method,
                                              req.get_header_value("Access-Control-Request-Method"),
                                              req.get_header_value("Access-Control-Request-Headers"),
                                              route_methods(req.path));
      for (const auto& [k, v] : ch.headers) res.set_header(k, v);
      if (ch.preflight) {
        res.status = 204;
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    if (auto e = unreadable_body(req)) {
      send_error(res, *e);
      res.set_header("Connection", "close");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  I.svr.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty() || res.is_chunked_content_provider_) return httplib::Server::HandlerResponse::Unhandled;
    ApiError e{res.status, "", res.status >= 500 ? "server_error" : "invalid_request_error", "", ""};
    switch (res.status) {
      case 404:
        // cpp-httplib answers 404 for a route that exists under another method (PUT, DELETE, OPTIONS,
        // GET of a POST route, POST /health): that is a 405 naming the methods to use.
        if (std::string m = route_methods(req.path); !m.empty()) {
          e.status = 405;
          e.message = fmt::format("{} is not allowed on {}; use {}", req.method, req.path, m);
          e.code = "method_not_allowed";
          res.set_header("Allow", m);
          break;
        }
        e.message = fmt::format("Unknown request URL: {} {}", req.method, req.path), e.code = "unknown_url";
        break;
      case 413:
        e.message = fmt::format("the request body is too large; the limit is {} bytes", impl_->cfg.max_body_bytes);
        e.code = "payload_too_large";
        break;
      case 400: e.message = "malformed HTTP request"; break;
      case 414: e.message = "the request URL is too long"; break;
      case 416: e.message = fmt::format("the Range header '{}' cannot be satisfied", req.get_header_value("Range")); break;
      default: e.message = fmt::format("HTTP {}", res.status);
    }
    send_error(res, e);
    return httplib::Server::HandlerResponse::Handled;
  }));
  I.svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    spdlog::error("server: handler failed: {}", what);
    send_error(res, ApiError{500, "internal server error: " + what, "server_error", "", ""});
  });
  I.svr.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    const double s = std::chrono::duration<double>(Clock::now() - t_request_start).count();
    impl_->metrics.record(route_label(req.path), res.status, s);
    spdlog::debug("{} {} -> {} ({:.3f} s)", req.method, req.path, res.status, s);
  });
  I.routes();
}

Server::~Server() { stop(); }

Status Server::bind() {
  auto& I = *impl_;
  if (I.cfg.port == 0) {
    I.bound_port = I.svr.bind_to_any_port(I.cfg.host);
    if (I.bound_port < 0) return err("server: cannot bind {} (any port)", I.cfg.host);
  } else {
    if (!I.svr.bind_to_port(I.cfg.host, I.cfg.port))
      return err("server: cannot bind {}:{} (in use, or not a local address?)", I.cfg.host, I.cfg.port);
    I.bound_port = I.cfg.port;
  }
  // cpp-httplib listens with a backlog of 5: 64 clients connecting at once on a fast machine overflowed
  // it (connections reset before the first request: the H200 serving benchmark's warm-up). Listening
  // again on a listening socket only changes its backlog (POSIX/Linux).
  if (I.listen_fd >= 0 && ::listen(I.listen_fd, SOMAXCONN) != 0)
    spdlog::warn("server: cannot raise the listen backlog to {}: {}", SOMAXCONN, std::strerror(errno));
  return {};
}

int Server::port() const { return impl_->bound_port; }

void Server::run() { impl_->svr.listen_after_bind(); }

void Server::stop() { impl_->svr.stop(); }

}  // namespace ds::server
